package pipeline

import (
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keepAlives tells the server that the tasks a worker holds are still being
// worked on, so none is redelivered to another worker while a stage runs
// long or its outcome waits for a PubAck. One sweep over the held tasks
// every ack_wait/4 sends InProgress for each one silent for ack_wait/2 or
// more, so no task goes longer than ack_wait·3/4 without a sign of life.
//
// It replaced a timer per task (time.AfterFunc), which cost an allocation
// and two timer-heap operations on every task; a task now costs one map
// insert and one delete under an uncontended lock. A failed InProgress is
// tried again on the next sweep, where the timer stopped for good.
type keepAlives struct {
	every time.Duration // ack_wait/2: the longest silence allowed
	mu    sync.Mutex
	held  map[jetstream.Msg]time.Time // task → when it last showed life
	due   []jetstream.Msg             // sweep's scratch list (run's alone)
}

func newKeepAlives(ackWait time.Duration) *keepAlives {
	return &keepAlives{every: ackWait / 2, held: map[jetstream.Msg]time.Time{}}
}

// hold starts keeping msg alive; now is when the worker took it.
func (k *keepAlives) hold(msg jetstream.Msg, now time.Time) {
	k.mu.Lock()
	k.held[msg] = now
	k.mu.Unlock()
}

// drop stops keeping msg alive (it is acked, nak'ed or abandoned). An
// InProgress of a sweep already under way may still follow; for a task
// that is finished the client or the server ignores it.
func (k *keepAlives) drop(msg jetstream.Msg) {
	k.mu.Lock()
	delete(k.held, msg)
	k.mu.Unlock()
}

// count is the number of tasks held (rolecall.inflight).
func (k *keepAlives) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}

// sweep sends InProgress for every held task silent since before
// now − every, outside the lock (it is a publish).
func (k *keepAlives) sweep(now time.Time) {
	k.mu.Lock()
	due := k.due[:0]
	for msg, t := range k.held {
		if now.Sub(t) >= k.every {
			due = append(due, msg)
		}
	}
	k.mu.Unlock()
	// due is this sweep's own: only run sweeps.
	for i, msg := range due {
		if msg.InProgress() == nil {
			k.mu.Lock()
			if _, ok := k.held[msg]; ok {
				k.held[msg] = now
			}
			k.mu.Unlock()
		}
		due[i] = nil
	}
	k.due = due[:0]
}

// run sweeps every ack_wait/4 until stop is closed.
func (k *keepAlives) run(stop <-chan struct{}) {
	t := time.NewTicker(max(k.every/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			k.sweep(now)
		case <-stop:
			return
		}
	}
}
