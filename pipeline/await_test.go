package pipeline

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sourcegraph/conc/pool"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/rolecall/rolecall/events"
)

// ackedMsg records how a task ended; the embedded interface is nil, so
// any other method would panic.
type ackedMsg struct {
	jetstream.Msg
	acks, naks atomic.Int32
}

func (m *ackedMsg) Ack() error                       { m.acks.Add(1); return nil }
func (m *ackedMsg) NakWithDelay(time.Duration) error { m.naks.Add(1); return nil }
func (m *ackedMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: 1}, nil
}

// future is a PubAck that comes after a delay, or never (delay < 0).
type future struct{ ok chan *jetstream.PubAck }

func newFuture(delay time.Duration) future {
	f := future{ok: make(chan *jetstream.PubAck, 1)}
	if delay >= 0 {
		time.AfterFunc(delay, func() { f.ok <- &jetstream.PubAck{Stream: "S", Sequence: 1} })
	}
	return f
}

func (f future) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f future) Err() <-chan error            { return nil }
func (f future) Msg() *nats.Msg               { return nil }

// TestAwaitPubAckDeadline: the completion goroutine checks the PubAck
// deadline on its ticker. A PubAck that comes after several ticks but
// before ack_wait finishes the task (ack); one that never comes is a
// transient fault within a tick of ack_wait (nak, no ack), and either way
// the task's slot is given back.
func TestAwaitPubAckDeadline(t *testing.T) {
	cfg := DefaultConfig()
	cfg.AckWait = 300 * time.Millisecond
	w, err := New(nil, nil, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(w.ackCheck())
	defer tick.Stop()
	cases := []struct {
		name       string
		pubAck     time.Duration // -1: never
		acks, naks int32
		atLeast    time.Duration
	}{
		{"PubAck after several ticks", 150 * time.Millisecond, 1, 0, 150 * time.Millisecond},
		{"no PubAck", -1, 0, 1, cfg.AckWait},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msg := &ackedMsg{}
			slots := make(chan struct{}, 1)
			slots <- struct{}{}
			_, span := noop.NewTracerProvider().Tracer("").Start(context.Background(), "")
			// pubStart is taken before the future's timer starts, so a
			// PubAck after d cannot come sooner than d after pubStart.
			pubStart := time.Now()
			d := &delivery{ctx: context.Background(), span: span, msg: msg, slots: slots,
				future: newFuture(c.pubAck), pubStart: pubStart}
			d.out.Resolved = &events.ResolvedData{}
			w.alive.hold(msg, d.pubStart)
			w.await(d, tick, pool.New())
			took := time.Since(d.pubStart)
			if msg.acks.Load() != c.acks || msg.naks.Load() != c.naks {
				t.Errorf("acks %d, naks %d; want %d and %d", msg.acks.Load(), msg.naks.Load(), c.acks, c.naks)
			}
			if took < c.atLeast || took > cfg.AckWait+time.Second {
				t.Errorf("await returned after %s, want between %s and ack_wait plus a second", took, c.atLeast)
			}
			if len(slots) != 0 {
				t.Error("the task's slot was not given back")
			}
			if len(w.alive.held) != 0 {
				t.Error("the task is still kept alive")
			}
		})
	}
}
