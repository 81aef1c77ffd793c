package telemetry_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/telemetry"
)

// FuzzExtractTask checks ExtractTask against its definition: the header
// context when it is valid, else the extension's, decoded by the plain W3C
// propagator.
func FuzzExtractTask(f *testing.F) {
	f.Add(hdrParent, hdrState, extParent, extState)
	f.Add("", "", extParent, "")
	f.Add("00-zz-yy-01", "", extParent, extState)
	f.Add(hdrParent, "", "", "")
	f.Add("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=b,c=d", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", "x")
	f.Fuzz(func(t *testing.T, hTP, hTS, ceTP, ceTS string) {
		w3c := propagation.TraceContext{}
		decode := func(tp, ts string) trace.SpanContext {
			return trace.SpanContextFromContext(w3c.Extract(context.Background(),
				propagation.MapCarrier{"traceparent": tp, "tracestate": ts}))
		}
		want := decode(hTP, hTS)
		if !want.IsValid() {
			want = decode(ceTP, ceTS)
		}
		h := nats.Header{"traceparent": {hTP}, "tracestate": {hTS}}
		ctx := telemetry.ExtractTask(context.Background(), telemetry.NewPropagator(), h, ceTP, ceTS)
		if got := trace.SpanContextFromContext(ctx); !got.Equal(want) {
			t.Errorf("ExtractTask = %v, want %v", got, want)
		}
	})
}

// FuzzHeaderCarrierSet checks that Set leaves exactly one spelling of the key,
// holding the value, and touches no other header.
func FuzzHeaderCarrierSet(f *testing.F) {
	f.Add("Traceparent", "traceparent", "v")
	f.Add("Nats-Msg-Id", "traceparent", "v")
	f.Add("traceparent", "traceparent", "")
	f.Fuzz(func(t *testing.T, existing, key, value string) {
		h := nats.Header{existing: {"old"}}
		c := telemetry.HeaderCarrier(h)
		c.Set(key, value)
		if got := c.Get(key); got != value {
			t.Errorf("Get(%q) = %q after Set, want %q", key, got, value)
		}
		n := 0
		for k := range h {
			if strings.EqualFold(k, key) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d spellings of %q after Set: %v", n, key, h)
		}
		if !strings.EqualFold(existing, key) && h.Get(existing) != "old" {
			t.Errorf("Set(%q) changed header %q: %v", key, existing, h)
		}
	})
}

// FuzzParseLevel checks that every accepted level survives slog's own
// spelling of it.
func FuzzParseLevel(f *testing.F) {
	for _, s := range []string{"debug", "INFO", "warning", "error+3", "info-12", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := telemetry.ParseLevel(s)
		if err != nil {
			return
		}
		back, err := telemetry.ParseLevel(l.String())
		if err != nil || back != l {
			t.Errorf("ParseLevel(%q) = %v, but ParseLevel(%q) = %v, %v", s, l, l.String(), back, err)
		}
	})
}
