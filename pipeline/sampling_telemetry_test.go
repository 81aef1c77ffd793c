package pipeline_test

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/telemetry"
)

// TestTraceSamplingParentBased: with the SDK's default sampler
// (parentbased_always_on) a task whose parent is unsampled records no
// span, yet its outcome stays in the task's trace, unsampled, with the
// tracestate passed on; a sampled parent's task is recorded. A malformed
// traceparent, in the header or the extension, does not break the task:
// it is resolved in a trace of its own.
func TestTraceSamplingParentBased(t *testing.T) {
	r := newTelRig(t, telConfig())
	r.rec = tracetest.NewSpanRecorder()
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.rec))
	t.Cleanup(func() { _ = r.tp.Shutdown(context.Background()) })
	r.start(context.Background(), telSnapshot(t, nil), r.options())

	const state = "vendor=abc"
	unsampled := "00-" + traceID(1).String() + "-" + spanID(1).String() + "-00"
	ids := []string{
		r.publish(taskMsg{data: `{"task_id":"S-0","role":"architect"}`, header: unsampled, state: state}),
		r.publish(taskMsg{data: `{"task_id":"S-1","role":"architect"}`, header: traceparent(traceID(2), spanID(2)), state: state}),
		r.publish(taskMsg{data: `{"task_id":"S-2","role":"architect"}`, header: "00-" + traceID(3).String() + "-0000000000000000-01"}),
		r.publish(taskMsg{data: `{"task_id":"S-3","role":"architect"}`, ext: "01-garbage", binary: true}),
	}
	outs := byCausation(t, r.waitOutcomes(len(ids)))
	spans := byTrace(r.waitProcessSpans(3))
	for i, id := range ids {
		if o := outs[id]; o.subject != r.cfg.Prefix+".specs.resolved.architect" {
			t.Errorf("task %d: outcome on %q, want resolved", i, o.subject)
		}
	}

	if n := len(spans[traceID(1)]); n != 0 {
		t.Errorf("unsampled parent: %d spans recorded, want none", n)
	}
	tp, _ := outs[ids[0]].ev.Extensions()[events.ExtTraceParent].(string)
	if !strings.HasPrefix(tp, "00-"+traceID(1).String()+"-") || !strings.HasSuffix(tp, "-00") {
		t.Errorf("unsampled parent: outcome traceparent %q, want the task's trace, unsampled", tp)
	}
	if got := outs[ids[0]].header.Get(telemetry.HeaderTraceState); got != state {
		t.Errorf("unsampled parent: outcome tracestate %q, want %q", got, state)
	}

	ts, _ := trees(t, spans[traceID(2)])
	if len(ts) != 1 {
		t.Fatalf("sampled parent: %d process spans, want 1", len(ts))
	}
	pub := ts[0].kid(telemetry.SpanPublish)
	checkOutcomeTrace(t, outs[ids[1]], traceparent(traceID(2), pub.SpanContext().SpanID()), state)

	// The two malformed contexts each start a trace of their own.
	if n := len(spans[traceID(3)]); n != 0 {
		t.Errorf("all-zero parent span id: %d spans joined trace %s", n, traceID(3))
	}
	roots := 0
	for tid, ss := range spans {
		if tid == traceID(2) {
			continue
		}
		ts, _ := trees(t, ss)
		for _, st := range ts {
			if st.proc.Parent().IsValid() {
				t.Errorf("%s: parent %s, want a root span", st.proc.Name(), st.proc.Parent().SpanID())
			}
			roots++
		}
	}
	if roots != 2 {
		t.Errorf("%d root process spans, want 2 (one per malformed context)", roots)
	}
}
