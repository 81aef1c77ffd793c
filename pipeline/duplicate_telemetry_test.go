package pipeline_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/telemetry"
)

// TestTraceDuplicate: a task event that already has its outcome (the
// idempotency store) is a process span with rolecall.outcome=duplicate,
// status unset, its decode child only, in the task's trace.
func TestTraceDuplicate(t *testing.T) {
	cfg := telConfig()
	cfg.IdempotencyHorizon = time.Hour
	r := newTelRig(t, cfg)
	r.start(context.Background(), telSnapshot(t, nil), r.options())
	tp := traceparent(traceID(1), spanID(1))
	send := func() {
		hdr, body, err := events.EncodeTask("test", "dup-1", []byte(`{"task_id":"D-1","role":"architect"}`), tp, "", false)
		if err != nil {
			t.Fatal(err)
		}
		delete(hdr, "Nats-Msg-Id") // past the tasks stream's own deduplication
		r.publishRaw(hdr, body)
	}
	send()
	r.waitOutcomes(1)
	r.waitProcessSpans(1)
	send()
	ts, loose := trees(t, byTrace(r.waitProcessSpans(2))[traceID(1)])
	if len(ts) != 2 || len(loose) != 0 {
		t.Fatalf("%d process spans and %d other spans, want 2 and 0", len(ts), len(loose))
	}
	dup := ts[1]
	if attrs(ts[0].proc)[telemetry.AttrOutcome] == telemetry.OutcomeDuplicate {
		dup = ts[0]
	}
	checkTree(t, dup, remote(traceID(1), spanID(1)), telemetry.SpanDecode)
	if got := attrs(dup.proc)[telemetry.AttrOutcome]; got != telemetry.OutcomeDuplicate {
		t.Errorf("second delivery outcome %q, want duplicate", got)
	}
	if s := dup.proc.Status(); s.Code != codes.Unset {
		t.Errorf("duplicate status %v, want unset", s)
	}
}
