package telemetry

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// HeaderCarrier adapts NATS message headers for a TextMapPropagator. Unlike
// OTel's HTTP carrier it does not canonicalize names: keys are written
// exactly as given (the W3C propagator uses lowercase "traceparent"), and
// read exactly first, then case-insensitively, so a "Traceparent" written by
// an HTTP-minded producer is still found.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key.
func (c HeaderCarrier) Get(key string) string {
	if v, ok := c[key]; ok {
		if len(v) == 0 {
			return ""
		}
		return v[0]
	}
	for k, v := range c {
		if strings.EqualFold(k, key) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// Set replaces key's values with value and drops other spellings of key, so
// a re-published message never carries two trace contexts. c must not be
// nil.
func (c HeaderCarrier) Set(key, value string) {
	for k := range c {
		if k != key && strings.EqualFold(k, key) {
			delete(c, k)
		}
	}
	c[key] = []string{value}
}

// Keys lists the header names present.
func (c HeaderCarrier) Keys() []string {
	return slices.AppendSeq(make([]string, 0, len(c)), maps.Keys(c))
}

// ExtractTask returns ctx carrying a task's parent trace context: from the
// traceparent/tracestate headers when they hold a valid context, else from
// the CloudEvents distributed-tracing extension values
// ceTraceParent/ceTraceState (empty when the event has none). Baggage comes
// from the headers. An invalid or absent context leaves ctx's own.
func ExtractTask(ctx context.Context, prop propagation.TextMapPropagator, header nats.Header,
	ceTraceParent, ceTraceState string) context.Context {
	out := prop.Extract(ctx, HeaderCarrier(header))
	// A propagator leaves ctx's span context in place when the headers hold
	// none (or an invalid one), so "changed" means "the headers won".
	if sc := trace.SpanContextFromContext(out); ceTraceParent == "" ||
		(sc.IsValid() && !sc.Equal(trace.SpanContextFromContext(ctx))) {
		return out
	}
	// The two-value carrier, not a MapCarrier: a map per task showed in
	// the worker's allocation profile.
	return prop.Extract(out, &traceCarrier{parent: ceTraceParent, state: ceTraceState})
}

// Inject writes ctx's trace context into header (lowercase names) and returns
// the traceparent and tracestate it wrote, so the caller can set the same
// values as the outcome's CloudEvents extension. Both are empty when ctx has
// no valid span context. header must not be nil.
func Inject(ctx context.Context, prop propagation.TextMapPropagator, header nats.Header) (traceparent, tracestate string) {
	c := HeaderCarrier(header)
	prop.Inject(ctx, c)
	return c.Get(HeaderTraceParent), c.Get(HeaderTraceState)
}

// InjectValues returns the traceparent and tracestate prop writes for
// ctx, without a header to write them to: the worker sets them on the
// outcome itself. Other keys the propagator writes (baggage) are dropped,
// as outcomes carry only the trace context. Both are empty when ctx has no
// valid span context.
func InjectValues(ctx context.Context, prop propagation.TextMapPropagator) (traceparent, tracestate string) {
	var c traceCarrier
	prop.Inject(ctx, &c)
	return c.parent, c.state
}

// traceCarrier keeps the two W3C values: a header map per outcome only to
// read them back showed in the worker's allocation profile.
type traceCarrier struct{ parent, state string }

func (c *traceCarrier) Get(key string) string {
	switch strings.ToLower(key) {
	case HeaderTraceParent:
		return c.parent
	case HeaderTraceState:
		return c.state
	}
	return ""
}

func (c *traceCarrier) Set(key, value string) {
	switch strings.ToLower(key) {
	case HeaderTraceParent:
		c.parent = value
	case HeaderTraceState:
		c.state = value
	}
}

func (c *traceCarrier) Keys() []string { return []string{HeaderTraceParent, HeaderTraceState} }
