package telemetry_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/telemetry"
)

const (
	hdrParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	hdrState  = "rolecall=hdr"
	extParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	extState  = "rolecall=ext"
)

func mustSpanContext(t *testing.T, traceparent, tracestate string) trace.SpanContext {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceparent[3:35])
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex(traceparent[36:52])
	if err != nil {
		t.Fatal(err)
	}
	ts, err := trace.ParseTraceState(tracestate)
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts, Remote: true,
	})
}

func TestInjectWritesLowercaseHeaders(t *testing.T) {
	prop := telemetry.NewPropagator()
	sc := mustSpanContext(t, hdrParent, hdrState)
	h := nats.Header{"Traceparent": {"stale"}, "Nats-Msg-Id": {"x"}}
	tp, ts := telemetry.Inject(trace.ContextWithSpanContext(context.Background(), sc), prop, h)
	if tp != hdrParent || ts != hdrState {
		t.Errorf("Inject returned (%q, %q), want (%q, %q)", tp, ts, hdrParent, hdrState)
	}
	keys := slices.Sorted(maps.Keys(h))
	// The stale capitalized copy is gone; other headers stay.
	if diff := cmp.Diff([]string{"Nats-Msg-Id", "traceparent", "tracestate"}, keys); diff != "" {
		t.Errorf("header names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{hdrParent}, h["traceparent"]); diff != "" {
		t.Errorf("traceparent values (-want +got):\n%s", diff)
	}
}

func TestInjectWithoutSpanWritesNothing(t *testing.T) {
	h := nats.Header{}
	tp, ts := telemetry.Inject(context.Background(), telemetry.NewPropagator(), h)
	if tp != "" || ts != "" || len(h) != 0 {
		t.Errorf("Inject without a span: (%q, %q), headers %v; want nothing", tp, ts, h)
	}
}

func TestCarrierRoundTrip(t *testing.T) {
	prop := telemetry.NewPropagator()
	sc := mustSpanContext(t, hdrParent, hdrState)
	m, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(m)
	ctx := baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), bag)

	h := nats.Header{}
	telemetry.Inject(ctx, prop, h)
	got := telemetry.ExtractTask(context.Background(), prop, h, "", "")
	if gsc := trace.SpanContextFromContext(got); !gsc.Equal(sc) {
		t.Errorf("round trip span context %v, want %v", gsc, sc)
	}
	if v := baggage.FromContext(got).Member("tenant").Value(); v != "acme" {
		t.Errorf("round trip baggage tenant = %q, want acme", v)
	}
}

func TestCarrierGet(t *testing.T) {
	tests := []struct {
		name string
		h    nats.Header
		want string
	}{
		{"exact", nats.Header{"traceparent": {"a"}}, "a"},
		{"capitalized", nats.Header{"Traceparent": {"b"}}, "b"},
		{"upper", nats.Header{"TRACEPARENT": {"c"}}, "c"},
		{"exact wins", nats.Header{"traceparent": {"exact"}, "Traceparent": {"other"}}, "exact"},
		{"first value", nats.Header{"traceparent": {"1", "2"}}, "1"},
		{"absent", nats.Header{"tracestate": {"x"}}, ""},
		{"nil header", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := telemetry.HeaderCarrier(tt.h).Get("traceparent"); got != tt.want {
				t.Errorf("Get = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCarrierKeys(t *testing.T) {
	got := telemetry.HeaderCarrier(nats.Header{"traceparent": {"a"}, "Nats-Msg-Id": {"b"}}).Keys()
	slices.Sort(got)
	if diff := cmp.Diff([]string{"Nats-Msg-Id", "traceparent"}, got); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
}

func TestExtractTask(t *testing.T) {
	hdr := mustSpanContext(t, hdrParent, hdrState)
	ext := mustSpanContext(t, extParent, extState)
	tests := []struct {
		name       string
		header     nats.Header
		ceTP, ceTS string
		want       trace.SpanContext // zero: no parent
	}{
		{"headers only", nats.Header{"traceparent": {hdrParent}, "tracestate": {hdrState}}, "", "", hdr},
		{"extension only", nats.Header{}, extParent, extState, ext},
		{"extension only, nil header", nil, extParent, extState, ext},
		{"headers win over the extension", nats.Header{"traceparent": {hdrParent}, "tracestate": {hdrState}}, extParent, extState, hdr},
		{"capitalized headers win too", nats.Header{"Traceparent": {hdrParent}, "Tracestate": {hdrState}}, extParent, extState, hdr},
		{"invalid header falls back", nats.Header{"traceparent": {"00-zz-yy-01"}}, extParent, extState, ext},
		{"all-zero trace id falls back", nats.Header{"traceparent": {"00-00000000000000000000000000000000-00f067aa0ba902b7-01"}}, extParent, extState, ext},
		{"extension without state", nil, extParent, "", mustSpanContext(t, extParent, "")},
		{"neither", nats.Header{}, "", "", trace.SpanContext{}},
		{"invalid both", nats.Header{"traceparent": {"garbage"}}, "garbage", "", trace.SpanContext{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := telemetry.ExtractTask(context.Background(), telemetry.NewPropagator(), tt.header, tt.ceTP, tt.ceTS)
			if got := trace.SpanContextFromContext(ctx); !got.Equal(tt.want) {
				t.Errorf("parent = %v, want %v", got, tt.want)
			}
		})
	}
}

// Baggage rides in the headers even when the trace parent comes from the
// extension.
func TestExtractTaskKeepsHeaderBaggage(t *testing.T) {
	h := nats.Header{"baggage": {"tenant=acme"}}
	ctx := telemetry.ExtractTask(context.Background(), telemetry.NewPropagator(), h, extParent, extState)
	if !trace.SpanContextFromContext(ctx).Equal(mustSpanContext(t, extParent, extState)) {
		t.Errorf("parent not taken from the extension")
	}
	if v := baggage.FromContext(ctx).Member("tenant").Value(); v != "acme" {
		t.Errorf("baggage tenant = %q, want acme", v)
	}
}

// InjectValues gives what Inject writes, for every kind of context.
func TestInjectValuesEqualsInject(t *testing.T) {
	prop := telemetry.NewPropagator()
	bag, err := baggage.Parse("tenant=acme")
	if err != nil {
		t.Fatal(err)
	}
	withState := mustSpanContext(t, hdrParent, hdrState)
	noState := mustSpanContext(t, extParent, "")
	cases := []struct {
		name string
		ctx  context.Context
		want [2]string
	}{
		{"no span", context.Background(), [2]string{"", ""}},
		{"span with tracestate", trace.ContextWithSpanContext(context.Background(), withState), [2]string{hdrParent, hdrState}},
		{"span without tracestate", trace.ContextWithSpanContext(context.Background(), noState), [2]string{extParent, ""}},
		{"span and baggage", baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), withState), bag), [2]string{hdrParent, hdrState}},
		{"baggage only", baggage.ContextWithBaggage(context.Background(), bag), [2]string{"", ""}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tp, ts := telemetry.InjectValues(c.ctx, prop)
			htp, hts := telemetry.Inject(c.ctx, prop, nats.Header{})
			if [2]string{tp, ts} != c.want || [2]string{htp, hts} != c.want {
				t.Errorf("InjectValues = (%q, %q), Inject = (%q, %q), want %q", tp, ts, htp, hts, c.want)
			}
		})
	}
}

// BenchmarkExtractTask is the worker's per-task extraction for a
// structured-mode task: no trace headers, the parent in the extension.
func BenchmarkExtractTask(b *testing.B) {
	prop := telemetry.NewPropagator()
	h := nats.Header{}
	b.ReportAllocs()
	for b.Loop() {
		ctx := telemetry.ExtractTask(context.Background(), prop, h, extParent, extState)
		if !trace.SpanContextFromContext(ctx).IsValid() {
			b.Fatal("no parent extracted")
		}
	}
}
