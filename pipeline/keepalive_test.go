package pipeline

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// progressMsg counts InProgress calls; the embedded interface is nil, so
// any other method would panic: keepAlives must call only InProgress.
type progressMsg struct {
	jetstream.Msg
	calls atomic.Int32 // the sweeper calls from its own goroutine
	fail  bool
}

func (m *progressMsg) InProgress() error {
	m.calls.Add(1)
	if m.fail {
		return errors.New("no connection")
	}
	return nil
}

func TestKeepAlivesSweep(t *testing.T) {
	const ackWait = 30 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	k := newKeepAlives(ackWait)
	a, b, c := &progressMsg{}, &progressMsg{}, &progressMsg{fail: true}
	k.hold(a, t0)
	k.hold(b, t0.Add(10*time.Second))
	k.hold(c, t0)

	steps := []struct {
		name    string
		at      time.Duration
		drop    []jetstream.Msg // finished before the sweep
		a, b, c int32           // InProgress calls so far
	}{
		{"nobody is silent for ack_wait/2 yet", 14 * time.Second, nil, 0, 0, 0},
		{"a and c reach ack_wait/2", 15 * time.Second, nil, 1, 0, 1},
		{"a just showed life, b is not due, c failed and is tried again", 20 * time.Second, nil, 1, 0, 2},
		{"b reaches ack_wait/2", 25 * time.Second, nil, 1, 1, 3},
		{"a is due again, b was dropped", 30 * time.Second, []jetstream.Msg{b}, 2, 1, 4},
		{"a and c dropped: nothing more", 60 * time.Second, []jetstream.Msg{a, c}, 2, 1, 4},
	}
	for _, s := range steps {
		for _, m := range s.drop {
			k.drop(m)
		}
		k.sweep(t0.Add(s.at))
		if a.calls.Load() != s.a || b.calls.Load() != s.b || c.calls.Load() != s.c {
			t.Errorf("%s (at %s): InProgress calls a=%d b=%d c=%d, want %d %d %d", s.name, s.at, a.calls.Load(), b.calls.Load(), c.calls.Load(), s.a, s.b, s.c)
		}
	}
	if len(k.held) != 0 {
		t.Errorf("%d tasks still held after every drop", len(k.held))
	}
}

// TestKeepAlivesRun: the sweeper runs on its own every ack_wait/4 and stops
// when told.
func TestKeepAlivesRun(t *testing.T) {
	k := newKeepAlives(40 * time.Millisecond)
	m := &progressMsg{}
	k.mu.Lock()
	k.held[m] = time.Now().Add(-time.Hour)
	k.mu.Unlock()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { k.run(stop); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := m.calls.Load()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d InProgress calls after 10 s, want the sweeper to have sent at least 2", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	<-done
}
