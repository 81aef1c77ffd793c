package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

// shortWindow is a configuration whose duplicate window ends a few
// seconds after a task, so a test can re-send an event beyond it.
func shortWindow(horizon time.Duration) pipeline.Config {
	c := testConfig()
	c.AckWait = time.Second
	c.MaxDeliver = 2
	c.RetryFor = 200 * time.Millisecond
	c.Backoff = []time.Duration{50 * time.Millisecond}
	c.DuplicateWindow = c.RequiredDuplicateWindow() + 100*time.Millisecond
	c.IdempotencyHorizon = horizon
	return c
}

// resend publishes the same CloudEvent (source "test", id) again.
func (h *harness) resend(id, data string) {
	h.t.Helper()
	hdr, body, err := events.EncodeTask("test", id, []byte(data), "", "", false)
	if err != nil {
		h.t.Fatal(err)
	}
	h.publishRaw(hdr, body)
}

// settle waits until the tasks consumer has nothing pending or unacked.
func (h *harness) settle(within time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := h.js.Consumer(context.Background(), h.cfg.TasksStream, h.cfg.Consumer)
		if err != nil {
			h.t.Fatal(err)
		}
		info, err := c.Info(context.Background())
		if err != nil {
			h.t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("tasks consumer still has %d pending and %d unacked after %s", info.NumPending, info.NumAckPending, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestResentAfterWindow: the same event sent again after the duplicate
// window gets no second outcome while the store remembers it; without the
// store it gets one (what the window alone gives).
func TestResentAfterWindow(t *testing.T) {
	for _, tc := range []struct {
		name     string
		horizon  time.Duration
		outcomes int
	}{
		{"store on", time.Hour, 1},
		{"store off", pipeline.IdempotencyOff, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := shortWindow(tc.horizon)
			h := newHarness(t, cfg)
			h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
			const data = `{"task_id":"T-again","role":"architect"}`
			id := h.submit(data, false)
			h.waitOutcomes(1, 10*time.Second)
			time.Sleep(cfg.DuplicateWindow + 500*time.Millisecond)
			h.resend(id, data)
			h.settle(10 * time.Second)
			if got := len(h.outcomes()); got != tc.outcomes {
				t.Errorf("%d outcomes after the re-send, want %d", got, tc.outcomes)
			}
		})
	}
}

// switchable serves one of two snapshots.
type switchable struct {
	snaps [2]*discover.Snapshot
	which atomic.Int32
}

func (s *switchable) Snapshot() *discover.Snapshot { return s.snaps[s.which.Load()] }

// TestResentAfterConfigChange: a configuration change that would flip the
// decision does not give a re-sent event a second outcome.
func TestResentAfterConfigChange(t *testing.T) {
	h := newHarness(t, testConfig())
	src := &switchable{}
	src.snaps[0] = telSnapshot(t, nil).snap
	src.snaps[1] = telSnapshot(t, map[string]string{"packs/default.yaml": "roles: {}\n"}).snap
	h.start(src, pipeline.Options{})
	const data = `{"task_id":"T-flip","role":"architect"}`
	id := h.submit(data, false)
	first := h.waitOutcomes(1, 10*time.Second)[0]
	if first.ev.Type() != events.TypeSpecResolved {
		t.Fatalf("first outcome %s, want resolved", first.ev.Type())
	}
	src.which.Store(1) // architect is no longer in the default pack
	h.submit(`{"task_id":"T-probe","role":"architect"}`, false)
	if probe := h.waitOutcomes(2, 10*time.Second)[1]; probe.ev.Type() != events.TypeSpecFailed {
		t.Fatalf("after the change a new task got %s, want a failure", probe.ev.Type())
	}
	h.resend(id, data)
	h.settle(10 * time.Second)
	outs := h.outcomes()
	if len(outs) != 2 {
		t.Fatalf("%d outcomes, want 2: the re-sent event must keep its first", len(outs))
	}
}

// TestKilledBetweenSteps: a worker that dies after any step of a delivery
// leaves exactly one outcome once another delivery finishes the task.
func TestKilledBetweenSteps(t *testing.T) {
	for _, step := range []pipeline.Step{pipeline.StepLookup, pipeline.StepPublish, pipeline.StepRecord} {
		t.Run(string(step), func(t *testing.T) {
			cfg := testConfig()
			cfg.AckWait = time.Second
			h := newHarness(t, cfg)
			var killed atomic.Bool
			var published, duplicates atomic.Int32
			h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Hooks: pipeline.Hooks{
				AfterPublish: func(_ *pipeline.Outcome, ack *jetstream.PubAck) {
					published.Add(1)
					if ack.Duplicate {
						duplicates.Add(1)
					}
				},
				Abandon: func(after pipeline.Step, _ *pipeline.Outcome) bool {
					return after == step && killed.CompareAndSwap(false, true)
				},
			}})
			id := h.submit(`{"task_id":"T-kill","role":"architect"}`, false)
			h.waitOutcomes(1, 10*time.Second)
			h.settle(15 * time.Second)
			exactlyOnce(t, []string{id}, h.outcomes())
			// What the redelivery did: after the record it publishes
			// nothing; after the publish its publish is the duplicate.
			want := map[pipeline.Step][2]int32{
				pipeline.StepLookup:  {1, 0},
				pipeline.StepPublish: {2, 1},
				pipeline.StepRecord:  {1, 0},
			}[step]
			if got := [2]int32{published.Load(), duplicates.Load()}; got != want {
				t.Errorf("publishes/duplicates %v, want %v", got, want)
			}
			rec, err := outcomes(t, h).Record(context.Background(), events.OutcomeID("test", id))
			if err != nil || rec.Seq != 1 {
				t.Errorf("record %+v, %v; want the first outcome's sequence 1", rec, err)
			}
		})
	}
}

func outcomes(t *testing.T, h *harness) *pipeline.Outcomes {
	t.Helper()
	o, err := pipeline.OpenOutcomes(context.Background(), h.js, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// TestLookupOutcome: an outcome is found by its event's (source, id) and
// by its outcome id; an unknown one is ErrOutcomeNotFound.
func TestLookupOutcome(t *testing.T) {
	h := newHarness(t, testConfig())
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
	ids := []string{h.submit(`{"task_id":"T-1","role":"architect"}`, false), h.submit(`{"task_id":"T-2","role":"nobody"}`, true)}
	h.waitOutcomes(2, 10*time.Second)
	h.settle(10 * time.Second)
	o := outcomes(t, h)
	ctx := context.Background()
	for i, id := range ids {
		m, err := o.ByEvent(ctx, "test", id)
		if err != nil {
			t.Fatalf("ByEvent(test, %s): %v", id, err)
		}
		ev, err := events.DecodeOutcome(m.Header, m.Data)
		if err != nil {
			t.Fatal(err)
		}
		if causation(ev) != id || ev.Subject() != fmt.Sprintf("T-%d", i+1) {
			t.Errorf("ByEvent(test, %s) found the outcome of %s (%s)", id, causation(ev), ev.Subject())
		}
		byID, err := o.ByID(ctx, ev.ID())
		if err != nil || byID.Sequence != m.Sequence {
			t.Errorf("ByID(%s): %v, %v", ev.ID(), byID, err)
		}
	}
	if _, err := o.ByEvent(ctx, "test", "never-sent"); !errors.Is(err, pipeline.ErrOutcomeNotFound) {
		t.Errorf("unknown event: %v, want ErrOutcomeNotFound", err)
	}
}

// TestDuplicateIsCounted: a re-sent event is acked and counted as
// rolecall.tasks{outcome="duplicate"}.
func TestDuplicateIsCounted(t *testing.T) {
	h := newHarness(t, testConfig())
	reader, inst := manualInstruments(t)
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Instruments: inst})
	const data = `{"task_id":"T-dup","role":"architect"}`
	id := h.submit(data, false)
	h.waitOutcomes(1, 10*time.Second)
	h.resend(id, data)
	h.resend(id, data)
	h.settle(10 * time.Second)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, dp := range metric[metricdata.Sum[int64]](t, rm, telemetry.MetricTasks).DataPoints {
		o, _ := dp.Attributes.Value(telemetry.MetricAttrOutcome)
		counts[o.AsString()] += dp.Value
	}
	if counts["duplicate"] != 2 || counts["resolved"] != 1 {
		t.Errorf("rolecall.tasks by outcome %v, want 1 resolved and 2 duplicate", counts)
	}
	if n := len(h.outcomes()); n != 1 {
		t.Errorf("%d outcomes, want 1", n)
	}
}
