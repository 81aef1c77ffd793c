package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// NewLogger returns a logger writing JSON (json true) or slog's text format
// to w at level and above, whose lines carry trace_id and span_id when the
// context passed to the logging call (InfoContext and friends) holds a valid
// span context. A time.Duration attribute is written as a Go duration
// string ("1.5s"), never as slog's JSON default of integer nanoseconds.
func NewLogger(w io.Writer, level slog.Leveler, json bool) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}
	var h slog.Handler
	if json {
		h = slog.NewJSONHandler(w, opts)
	} else {
		h = slog.NewTextHandler(w, opts)
	}
	return slog.New(NewTraceHandler(h))
}

// durationString writes a duration the way a person reads it: the JSON
// handler would write 1500000000 for 1.5 s, which a log query takes for a
// count or misreads by a factor of 10^9.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// NewTraceHandler wraps h so records logged with a span context in their
// context gain the attributes trace_id and span_id (hex, as in traceparent).
// They are added at the record's level, so under a WithGroup logger they sit
// inside the group.
func NewTraceHandler(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ inner slog.Handler }

func (h traceHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// Clone: the record shares its attribute storage with the caller's
		// copy, which may be handed to other handlers.
		r = r.Clone()
		r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.inner.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.inner.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.inner.WithGroup(name)}
}

// ParseLevel reads a --log-level value: debug, info, warn (or warning) or
// error, case-insensitive, optionally with an offset as slog writes it
// ("info+2", "error-1").
func ParseLevel(s string) (slog.Level, error) {
	t := strings.TrimSpace(s)
	if lower := strings.ToLower(t); strings.HasPrefix(lower, "warning") {
		t = "warn" + t[len("warning"):]
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(t)); err != nil {
		return 0, fmt.Errorf("telemetry: log level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// IsTerminal reports whether f is a character device, the usual sign of an
// interactive terminal (the worker then logs text, not JSON). It is a
// heuristic without a terminal library: /dev/null is a character device too.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// ErrorHandler returns an OpenTelemetry error handler that logs to l at warn
// level. Export failures happen on the SDK's goroutines, where no caller can
// see them; install it with otel.SetErrorHandler so they reach the worker's
// log instead of the standard logger.
func ErrorHandler(l *slog.Logger) otel.ErrorHandler {
	return otel.ErrorHandlerFunc(func(err error) {
		l.Warn("telemetry export", "error", err)
	})
}
