package telemetry_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rolecall/rolecall/telemetry"
)

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != telemetry.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, telemetry.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func newManual(t *testing.T) (*telemetry.Instruments, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	ins, err := telemetry.NewInstruments(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	if err != nil {
		t.Fatal(err)
	}
	return ins, r
}

func TestInstruments(t *testing.T) {
	ins, r := newManual(t)
	ctx := context.Background()
	ins.TaskDone(ctx, telemetry.OutcomeResolved, "")
	ins.TaskDone(ctx, telemetry.OutcomeFailed, "mode_disallowed")
	ins.TaskDone(ctx, telemetry.OutcomeFailed, "mode_disallowed")
	ins.StageDone(ctx, telemetry.StageResolve, 3*time.Millisecond)
	ins.StageDone(ctx, telemetry.StagePublish, 80*time.Microsecond)
	ins.StageDone(ctx, telemetry.StageDecode, 10*time.Microsecond)
	ins.StageDone(ctx, telemetry.StageDiscover, 2*time.Microsecond)
	ins.StageDone(ctx, telemetry.StageMaterialize, 500*time.Microsecond)
	ins.StageDone(ctx, "allocate", time.Second) // not one of the five
	ins.StageDone(ctx, telemetry.StageResolve, time.Millisecond)
	// Two workers' counts add up.
	for _, n := range []int64{1, 2} {
		if _, err := ins.ObserveInflight(func() int64 { return n }); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ins.ObservePending(func(context.Context) (int64, bool) { return 7, true }); err != nil {
		t.Fatal(err)
	}
	got := collect(t, r)

	units := map[string]string{
		telemetry.MetricTasks:           "{task}",
		telemetry.MetricStageDuration:   "s",
		telemetry.MetricInflight:        "{task}",
		telemetry.MetricConsumerPending: "{message}",
		// reported with pending, 0 while the backlog was read; no unit, so
		// that the Prometheus name has no _ratio suffix
		telemetry.MetricConsumerPendingStale: "",
	}
	for name, unit := range units {
		m, ok := got[name]
		if !ok {
			t.Errorf("no metric %s", name)
			continue
		}
		if m.Unit != unit {
			t.Errorf("%s unit %q, want %q", name, m.Unit, unit)
		}
		if m.Description == "" {
			t.Errorf("%s has no description", name)
		}
	}
	if len(got) != len(units) {
		t.Errorf("got %d metrics, want %d", len(got), len(units))
	}

	tasks, ok := got[telemetry.MetricTasks].Data.(metricdata.Sum[int64])
	if !ok || !tasks.IsMonotonic {
		t.Fatalf("%s is %T, want a monotonic int64 sum", telemetry.MetricTasks, got[telemetry.MetricTasks].Data)
	}
	counts := map[attribute.Distinct]int64{}
	for _, dp := range tasks.DataPoints {
		counts[dp.Attributes.Equivalent()] = dp.Value
	}
	resolved := attribute.NewSet(attribute.String(telemetry.MetricAttrOutcome, "resolved"))
	failed := attribute.NewSet(attribute.String(telemetry.MetricAttrOutcome, "failed"), attribute.String(telemetry.MetricAttrCode, "mode_disallowed"))
	if counts[resolved.Equivalent()] != 1 || counts[failed.Equivalent()] != 2 || len(counts) != 2 {
		t.Errorf("task counts %v, want resolved 1 (no code) and failed/mode_disallowed 2", tasks.DataPoints)
	}

	hist, ok := got[telemetry.MetricStageDuration].Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T, want a float64 histogram", telemetry.MetricStageDuration, got[telemetry.MetricStageDuration].Data)
	}
	stages := map[string]float64{}
	for _, dp := range hist.DataPoints {
		if diff := cmp.Diff(telemetry.StageBuckets, dp.Bounds); diff != "" {
			t.Errorf("bucket bounds (-want +got):\n%s", diff)
		}
		st, _ := dp.Attributes.Value(attribute.Key(telemetry.MetricAttrStage))
		stages[st.AsString()] = dp.Sum
	}
	want := map[string]float64{"resolve": 0.004, "publish": 0.00008, "decode": 0.00001, "discover": 0.000002, "materialize": 0.0005, "allocate": 1}
	if diff := cmp.Diff(want, stages, cmpopts.EquateApprox(0, 1e-12)); diff != "" {
		t.Errorf("stage sums in seconds (-want +got):\n%s", diff)
	}

	inflight, ok := got[telemetry.MetricInflight].Data.(metricdata.Sum[int64])
	if !ok || inflight.IsMonotonic || len(inflight.DataPoints) != 1 || inflight.DataPoints[0].Value != 3 {
		t.Errorf("%s = %+v, want a non-monotonic sum of 3", telemetry.MetricInflight, got[telemetry.MetricInflight].Data)
	}
	pending, ok := got[telemetry.MetricConsumerPending].Data.(metricdata.Gauge[int64])
	if !ok || len(pending.DataPoints) != 1 || pending.DataPoints[0].Value != 7 {
		t.Errorf("%s = %+v, want a gauge of 7", telemetry.MetricConsumerPending, got[telemetry.MetricConsumerPending].Data)
	}
}

func TestObservePendingWithoutValue(t *testing.T) {
	ins, r := newManual(t)
	var ok bool
	reg, err := ins.ObservePending(func(context.Context) (int64, bool) { return 5, ok })
	if err != nil {
		t.Fatal(err)
	}
	if _, found := collect(t, r)[telemetry.MetricConsumerPending]; found {
		t.Error("pending reported while the callback had no value")
	}
	ok = true
	if _, found := collect(t, r)[telemetry.MetricConsumerPending]; !found {
		t.Error("pending not reported once the callback had a value")
	}
	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	if _, found := collect(t, r)[telemetry.MetricConsumerPending]; found {
		t.Error("pending still reported after Unregister")
	}
}

// While the backlog cannot be read, a collection still answers: the
// stale marker says so, and the gauge keeps the last value read.
func TestObservePendingMarksStaleValues(t *testing.T) {
	ins, r := newManual(t)
	var (
		n  int64
		ok bool
	)
	if _, err := ins.ObservePending(func(context.Context) (int64, bool) { return n, ok }); err != nil {
		t.Fatal(err)
	}
	gauge := func(m map[string]metricdata.Metrics, name string) (int64, bool) {
		g, found := m[name].Data.(metricdata.Gauge[int64])
		if !found || len(g.DataPoints) != 1 {
			return 0, false
		}
		return g.DataPoints[0].Value, true
	}
	steps := []struct {
		name        string
		n           int64
		ok          bool
		wantPending int64 // -1: absent
		wantStale   int64
	}{
		{"never read", 0, false, -1, 1},
		{"read", 7, true, 7, 0},
		{"broker down keeps the last value", 99, false, 7, 1},
		{"read again", 3, true, 3, 0},
	}
	for _, st := range steps {
		n, ok = st.n, st.ok
		got := collect(t, r)
		pending, found := gauge(got, telemetry.MetricConsumerPending)
		if !found {
			pending = -1
		}
		stale, _ := gauge(got, telemetry.MetricConsumerPendingStale)
		if pending != st.wantPending || stale != st.wantStale {
			t.Errorf("%s: pending %d stale %d, want pending %d stale %d", st.name, pending, stale, st.wantPending, st.wantStale)
		}
	}
}

func TestConfigProblemsAndSlowConsumers(t *testing.T) {
	ins, r := newManual(t)
	problems := int64(2)
	if _, err := ins.ObserveConfigProblems(func() int64 { return problems }); err != nil {
		t.Fatal(err)
	}
	ins.SlowConsumer(context.Background())
	ins.SlowConsumer(context.Background())
	ins.SlowConsumer(context.Background())
	got := collect(t, r)
	if g, ok := got[telemetry.MetricConfigProblems].Data.(metricdata.Gauge[int64]); !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 2 {
		t.Errorf("%s = %+v, want a gauge of 2", telemetry.MetricConfigProblems, got[telemetry.MetricConfigProblems].Data)
	}
	if s, ok := got[telemetry.MetricSlowConsumers].Data.(metricdata.Sum[int64]); !ok || !s.IsMonotonic || len(s.DataPoints) != 1 || s.DataPoints[0].Value != 3 {
		t.Errorf("%s = %+v, want a counter of 3", telemetry.MetricSlowConsumers, got[telemetry.MetricSlowConsumers].Data)
	}
	problems = 0
	if g, ok := collect(t, r)[telemetry.MetricConfigProblems].Data.(metricdata.Gauge[int64]); !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != 0 {
		t.Errorf("%s with no problems = %+v, want a gauge of 0 (present, so an alert can tell none from unknown)", telemetry.MetricConfigProblems, g)
	}
}

// Recording on the hot path must not allocate per task once the attribute
// set for an outcome/code or stage has been seen.
func BenchmarkTaskDone(b *testing.B) {
	r := sdkmetric.NewManualReader()
	ins, err := telemetry.NewInstruments(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ins.TaskDone(ctx, telemetry.OutcomeFailed, "mode_disallowed")
		ins.StageDone(ctx, telemetry.StageResolve, time.Microsecond)
	}
}
