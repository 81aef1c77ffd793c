package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/slogtest"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/telemetry"
)

func decodeLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestLoggerAddsTraceIDs(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("test").Start(context.Background(), telemetry.SpanProcess)
	defer span.End()
	sc := span.SpanContext()

	var buf bytes.Buffer
	log := telemetry.NewLogger(&buf, slog.LevelInfo, true)
	log.InfoContext(ctx, "task resolved", telemetry.LogTaskID, "T-42")
	log.Info("no context")
	log.InfoContext(context.Background(), "context without span")
	log.With("worker", "w-1").WarnContext(ctx, "with attrs")
	log.DebugContext(ctx, "below level")

	lines := decodeLines(t, buf.Bytes())
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4 (debug is below the level):\n%s", len(lines), buf.String())
	}
	tests := []struct {
		line      int
		withTrace bool
	}{{0, true}, {1, false}, {2, false}, {3, true}}
	for _, tt := range tests {
		m := lines[tt.line]
		tid, hasT := m[telemetry.LogTraceID]
		sid, hasS := m[telemetry.LogSpanID]
		if !tt.withTrace {
			if hasT || hasS {
				t.Errorf("line %d %v has trace ids without a span", tt.line, m)
			}
			continue
		}
		if tid != sc.TraceID().String() || sid != sc.SpanID().String() {
			t.Errorf("line %d trace_id=%v span_id=%v, want %s %s", tt.line, tid, sid, sc.TraceID(), sc.SpanID())
		}
	}
	if lines[0][telemetry.LogTaskID] != "T-42" || lines[3]["worker"] != "w-1" {
		t.Errorf("caller attributes lost: %v", lines)
	}
}

// A remote parent (tracing off, context passed through) is valid too.
// Durations are logged as Go duration strings in both formats, at any
// depth: slog's JSON handler alone would write integer nanoseconds.
func TestLoggerWritesDurationsAsGoStrings(t *testing.T) {
	for _, jsonLogs := range []bool{true, false} {
		var buf bytes.Buffer
		log := telemetry.NewLogger(&buf, slog.LevelInfo, jsonLogs)
		log.With("wait", 250*time.Millisecond).Info("retrying", "retry_in", 1500*time.Millisecond,
			slog.Group("drain", slog.Duration("timeout", 30*time.Second)), "count", 3)
		out := buf.String()
		for _, want := range []string{"250ms", "1.5s", "30s"} {
			if !strings.Contains(out, want) {
				t.Errorf("json=%t: %q is not in %s", jsonLogs, want, out)
			}
		}
		for _, ns := range []string{"250000000", "1500000000", "30000000000"} {
			if strings.Contains(out, ns) {
				t.Errorf("json=%t: a duration is written as nanoseconds (%s): %s", jsonLogs, ns, out)
			}
		}
		if jsonLogs {
			m := decodeLines(t, buf.Bytes())[0]
			if m["retry_in"] != "1.5s" || m["count"] != float64(3) {
				t.Errorf("retry_in %v count %v, want \"1.5s\" and the number 3", m["retry_in"], m["count"])
			}
		}
	}
}

func TestLoggerAddsRemoteTraceIDs(t *testing.T) {
	sc := mustSpanContext(t, hdrParent, "")
	var buf bytes.Buffer
	telemetry.NewLogger(&buf, slog.LevelInfo, false).InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "hello")
	want := "trace_id=" + sc.TraceID().String() + " span_id=" + sc.SpanID().String()
	if !strings.Contains(buf.String(), want) {
		t.Errorf("text line %q lacks %q", buf.String(), want)
	}
}

// The wrapper must keep the wrapped handler a correct slog.Handler.
func TestTraceHandlerConformance(t *testing.T) {
	var buf bytes.Buffer
	slogtest.Run(t, func(*testing.T) slog.Handler {
		buf.Reset()
		return telemetry.NewTraceHandler(slog.NewJSONHandler(&buf, nil))
	}, func(t *testing.T) map[string]any {
		lines := decodeLines(t, buf.Bytes())
		if len(lines) != 1 {
			t.Fatalf("got %d lines, want 1", len(lines))
		}
		return lines[0]
	})
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in   string
		want slog.Level
		ok   bool
	}{
		{"debug", slog.LevelDebug, true},
		{"INFO", slog.LevelInfo, true},
		{" warn ", slog.LevelWarn, true},
		{"warning", slog.LevelWarn, true},
		{"Warning+1", slog.LevelWarn + 1, true},
		{"error", slog.LevelError, true},
		{"info+2", slog.LevelInfo + 2, true},
		{"error-1", slog.LevelError - 1, true},
		{"", 0, false},
		{"verbose", 0, false},
		{"4", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := telemetry.ParseLevel(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseLevel(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	tests := []struct {
		name string
		f    *os.File
		want bool
	}{
		{"regular file", f, false},
		{"pipe", w, false},
		{"character device (" + os.DevNull + ")", null, true},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := telemetry.IsTerminal(tt.f); got != tt.want {
				t.Errorf("IsTerminal = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestErrorHandlerLogs(t *testing.T) {
	var buf bytes.Buffer
	telemetry.ErrorHandler(telemetry.NewLogger(&buf, slog.LevelInfo, true)).Handle(errors.New("collector unreachable"))
	lines := decodeLines(t, buf.Bytes())
	if len(lines) != 1 || lines[0]["level"] != "WARN" || lines[0]["error"] != "collector unreachable" {
		t.Errorf("logged %v, want one WARN line with the error", lines)
	}
}
