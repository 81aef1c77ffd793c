package pipeline_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

// BenchmarkPipelineTracingOff is the pipeline's cost per task with the
// default no-op tracer: b.N traced tasks (traceparent headers, as a tracing
// planner sends them) are preloaded, and the clock runs from starting the
// worker until every outcome has its PubAck. ns/op is ns per task.
func BenchmarkPipelineTracingOff(b *testing.B) { benchPipeline(b, false) }

// BenchmarkPipelineTracingOn is the same with an always-sampling SDK tracer
// provider whose batch processor feeds an exporter that drops everything,
// so the difference to BenchmarkPipelineTracingOff is the cost of making
// the spans, not of shipping them.
func BenchmarkPipelineTracingOn(b *testing.B) { benchPipeline(b, true) }

type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

func benchPipeline(b *testing.B, traced bool) {
	cfg := telConfig()
	cfg.AckWait = 30 * time.Second
	cfg.DuplicateWindow = 5 * time.Minute
	// A run disturbed by a slow-consumer drop waits out ack_wait for the
	// redelivery; say so rather than report a silent outlier.
	var asyncErrs atomic.Int64
	nc := natstest.Connect(b, natstest.Start(b), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if asyncErrs.Add(1) == 1 {
			b.Logf("NATS async error (the measurement is disturbed): %v", err)
		}
	}))
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		b.Fatal(err)
	}
	roles := []string{"architect", "analyst", "critic", "tester"}
	for i := range b.N {
		data := fmt.Sprintf(`{"task_id":"B-%d","role":%q}`, i, roles[i%len(roles)])
		hdr, body, err := events.EncodeTask("bench", fmt.Sprintf("b-%d", i), []byte(data),
			traceparent(traceID(i), spanID(i)), "", false)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: cfg.Prefix + ".tasks.bench", Header: hdr, Data: body}); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("preloading tasks took over a minute")
	}

	// Metrics are on in both runs, as in a real worker.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	inst, err := telemetry.NewInstruments(mp)
	if err != nil {
		b.Fatal(err)
	}
	var published atomic.Int64
	done := make(chan struct{})
	opt := pipeline.Options{
		Propagator:  telemetry.NewPropagator(),
		Instruments: inst,
		Hooks: pipeline.Hooks{AfterPublish: func(*pipeline.Outcome, *jetstream.PubAck) {
			if published.Add(1) == int64(b.N) {
				close(done)
			}
		}},
	}
	if traced {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
			sdktrace.WithBatcher(discardExporter{}))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		opt.TracerProvider = tp
	}
	w, err := pipeline.New(js, telSnapshot(b, nil), cfg, opt)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)

	b.ReportAllocs()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	go func() { ran <- w.Run(runCtx) }()
	select {
	case <-done:
	case err := <-ran:
		b.Fatalf("worker stopped early: %v", err)
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d outcomes after 5 minutes", published.Load(), b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
	// CPU time of the process (worker and embedded server) per task: less
	// disturbed than ns/op by other load on the machine.
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/task")
	cancel()
	if err := <-ran; err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the user+system CPU time the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
