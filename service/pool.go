package service

import "sync"

// pool is a fixed set of goroutines that run the endpoints' work. A
// caller hands a job over and waits for it (see the package comment for
// why it waits).
type pool struct {
	jobs chan func()
	quit chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

func newPool(n int) *pool {
	p := &pool{jobs: make(chan func()), quit: make(chan struct{})}
	for range n {
		p.wg.Go(func() {
			for {
				select {
				case f := <-p.jobs:
					f()
				case <-p.quit:
					return
				}
			}
		})
	}
	return p
}

// do runs f on a pool goroutine and returns when it has returned. After
// stop, f runs on the caller's goroutine: a draining subscription still
// answers what it received.
func (p *pool) do(f func()) {
	done := make(chan struct{})
	select {
	case p.jobs <- func() { defer close(done); f() }:
		<-done
	case <-p.quit:
		f()
	}
}

func (p *pool) stop() {
	p.once.Do(func() { close(p.quit) })
	p.wg.Wait()
}
