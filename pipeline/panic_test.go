package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
	"github.com/rolecall/rolecall/telemetry"
)

// panickyPropagator is the W3C propagator whose at-th Extract panics: a
// bug in a telemetry piece the worker calls before it handles a task (and
// in the dead-letter path).
type panickyPropagator struct {
	propagation.TraceContext
	calls atomic.Int32
	at    int32
}

func (p *panickyPropagator) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	if p.calls.Add(1) == p.at {
		panic("injected bug in a propagator")
	}
	return p.TraceContext.Extract(ctx, c)
}

// taskCounts reads rolecall.tasks by outcome (and code).
func taskCounts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	tasks := map[string]int64{}
	for _, dp := range metric[metricdata.Sum[int64]](t, rm, telemetry.MetricTasks).DataPoints {
		o, _ := dp.Attributes.Value(telemetry.MetricAttrOutcome)
		key := o.AsString()
		if c, ok := dp.Attributes.Value(telemetry.MetricAttrCode); ok && c.AsString() != "" {
			key += "/" + c.AsString()
		}
		tasks[key] += dp.Value
	}
	return tasks
}

// TestPanicBeforeHandlingIsTransient: a panic before the task is handled
// (here in the trace extraction that follows decoding) is recovered like
// one in a stage: the worker keeps running, the delivery ends as a retry
// in the metrics, and the redelivery resolves the task.
func TestPanicBeforeHandlingIsTransient(t *testing.T) {
	h := newHarness(t, testConfig())
	reader, inst := manualInstruments(t)
	prop := &panickyPropagator{at: 1}
	r := h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Propagator: prop, Instruments: inst})
	id := h.submit(`{"task_id":"T-early-panic","role":"architect"}`, false)
	outs := h.waitOutcomes(1, 10*time.Second)
	exactlyOnce(t, []string{id}, outs)
	if outs[0].ev.Type() != events.TypeSpecResolved {
		t.Errorf("after a recovered panic the redelivery should resolve; got %s", outs[0].ev.Type())
	}
	r.stop(t)
	if diff := cmp.Diff(map[string]int64{"retry": 1, "resolved": 1}, taskCounts(t, reader)); diff != "" {
		t.Errorf("rolecall.tasks (-want +got):\n%s", diff)
	}
}

// TestPanicInDeadLetterIsRetried: a panic while the dead-letter path
// handles an advisory naks the advisory; the next try publishes the
// task's delivery_exhausted outcome.
func TestPanicInDeadLetterIsRetried(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDeliver = 2
	h := newHarness(t, cfg)
	// Extract runs once per delivery (two) and then in the dead-letter path.
	prop := &panickyPropagator{at: 3}
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{
		Propagator: prop,
		Hooks: pipeline.Hooks{BeforePublish: func(context.Context, *pipeline.Outcome, uint64) error {
			return errors.New("injected transient fault")
		}},
	})
	id := h.submit(`{"task_id":"T-dl-panic","role":"architect"}`, false)
	outs := h.waitOutcomes(1, 20*time.Second)
	exactlyOnce(t, []string{id}, outs)
	if f := failureOf(t, outs[0].ev); f.Code != resolve.CodeDeliveryExhausted {
		t.Errorf("code %s, want delivery_exhausted", f.Code)
	}
	if n := prop.calls.Load(); n < 4 {
		t.Errorf("%d extractions, want the dead-letter path's second try after its panic", n)
	}
}

// panickyAllocator panics, after the outcome was published and the task
// acked.
type panickyAllocator struct{ n atomic.Int32 }

func (a *panickyAllocator) Allocate(context.Context, *events.ResolvedData) error {
	a.n.Add(1)
	panic("injected bug in an allocator")
}

// TestAllocatorPanicAfterAck: a panicking allocator runs after the task
// was acked, so the delivery ended resolved, not as a retry: the metrics
// say so, and the log says the allocator failed, not that the task will be
// redelivered.
func TestAllocatorPanicAfterAck(t *testing.T) {
	h := newHarness(t, testConfig())
	reader, inst := manualInstruments(t)
	var logs lockedBuffer
	alloc := &panickyAllocator{}
	r := h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Allocator: alloc, Instruments: inst, Logger: telemetry.NewLogger(&logs, slog.LevelDebug, true)})
	id := h.submit(`{"task_id":"T-alloc-panic","role":"architect"}`, false)
	exactlyOnce(t, []string{id}, h.waitOutcomes(1, 10*time.Second))
	for deadline := time.Now().Add(5 * time.Second); alloc.n.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	r.stop(t)
	if n := alloc.n.Load(); n != 1 {
		t.Errorf("allocator called %d times, want 1", n)
	}
	if diff := cmp.Diff(map[string]int64{"resolved": 1}, taskCounts(t, reader)); diff != "" {
		t.Errorf("rolecall.tasks (-want +got):\n%s", diff)
	}
	var failed bool
	for _, l := range logs.taskLines(t) {
		msg, _ := l["msg"].(string)
		if strings.Contains(msg, "redelivered") {
			t.Errorf("log line %q after the task was acked", msg)
		}
		failed = failed || strings.Contains(msg, "allocator failed")
	}
	if !failed {
		t.Error("no log line says the allocator failed")
	}
}
