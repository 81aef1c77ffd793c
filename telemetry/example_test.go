package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/telemetry"
)

// The worker's wiring: Setup from the environment, instruments on the meter
// provider, /metrics from the handler, Shutdown on drain.
func ExampleSetup() {
	ctx := context.Background()
	// With no OTEL_* variables set: traces off, metrics for /metrics.
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceVersion: "0.1.0", InstanceID: "worker-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tel.Shutdown(ctx)

	ins, err := telemetry.NewInstruments(tel.MeterProvider)
	if err != nil {
		fmt.Println(err)
		return
	}
	ins.TaskDone(ctx, telemetry.OutcomeFailed, "mode_disallowed")

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", tel.MetricsHandler)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, "# TYPE rolecall_") {
			fmt.Println(line)
		}
	}
	// Output:
	// # TYPE rolecall_tasks_total counter
}

// A worker takes the parent context from the task's headers (or its
// CloudEvents extension) and writes its own into the outcome's headers,
// returning the values for the outcome's extension.
func ExampleInject() {
	prop := telemetry.NewPropagator()
	task := nats.Header{"traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	ctx := telemetry.ExtractTask(context.Background(), prop, task, "", "")

	out := nats.Header{}
	tp, _ := telemetry.Inject(ctx, prop, out)
	fmt.Println(tp)
	fmt.Println(out.Get("traceparent") == tp)
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// true
}

func ExampleNewTraceHandler() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(telemetry.NewTraceHandler(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})))

	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	log.InfoContext(ctx, "task resolved", telemetry.LogTaskID, "T-42")
	// Output:
	// {"level":"INFO","msg":"task resolved","task_id":"T-42","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","span_id":"00f067aa0ba902b7"}
}
