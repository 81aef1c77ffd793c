package main

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolecall/rolecall/discover"
)

// configProblems keeps the problems `worker validate` would report for the
// snapshot a worker serves: computed once per snapshot (by digest), each
// new one logged with its file:line and code, and shown in /readyz and in
// the rolecall.config.problems gauge. The worker serves such a snapshot
// (every pack without a problem keeps working) unless --strict refuses it
// at start.
type configProblems struct {
	log *slog.Logger

	mu       sync.Mutex
	digest   string
	problems []*discover.Error
	count    atomic.Int64
}

// check returns snap's problems, computing and logging them when snap is
// not the snapshot checked last.
func (p *configProblems) check(snap *discover.Snapshot) []*discover.Error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if snap.Digest == p.digest {
		return p.problems
	}
	problems := snap.Problems()
	known := make(map[string]bool, len(p.problems))
	for _, e := range p.problems {
		known[e.Error()] = true
	}
	for _, e := range problems {
		if known[e.Error()] {
			continue
		}
		p.log.Warn("config problem: tasks that depend on it fail; worker validate lists every problem",
			"problem", e.Error(), "file", e.File, "line", e.Line, "code", string(e.Code), "snapshot", snap.Digest)
	}
	if len(problems) == 0 && len(p.problems) > 0 {
		p.log.Info("config problems resolved", "snapshot", snap.Digest)
	}
	p.digest, p.problems = snap.Digest, problems
	p.count.Store(int64(len(problems)))
	return problems
}

// watch checks the source's snapshot every interval until ctx ends, so a
// reload that brings new problems reports them without waiting for a
// task or a probe.
func (p *configProblems) watch(ctx context.Context, snapshot func() *discover.Snapshot, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.check(snapshot())
		}
	}
}
