package bench

import (
	"context"
	"fmt"
	"runtime"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/telemetry"
)

// SpanFloor is what the OpenTelemetry SDK alone costs per task for the
// spans DESIGN.md §8 requires, measured in the bench's process with the
// traced runs' provider (always sample, batch processor, discarding
// exporter) and no pipeline around it: the part of tracing's cost that no
// change to rolecall can remove.
type SpanFloor struct {
	Tasks int `json:"tasks"`
	// CPUMicrosPerTask is user+system CPU of the whole process per task:
	// the spans, the batch processor's goroutine and the garbage they
	// leave for the collector.
	CPUMicrosPerTask    float64 `json:"cpu_us_per_task"`
	AllocsPerTask       float64 `json:"allocs_per_task"`
	AllocBytesPerTask   float64 `json:"alloc_bytes_per_task"`
	ShareOfUntracedTask float64 `json:"share_of_untraced_task"` // CPUMicrosPerTask over the untraced pipeline's CPU per task
}

// tracedProvider is the tracer provider of the traced runs and of the
// span floor: always sample, a batch processor, an exporter that discards
// every span.
func tracedProvider() *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(tracetest.NewNoopExporter()),
	)
}

// spanFloor makes n tasks' worth of the worker's span tree: rolecall.process
// (consumer) with the attributes the worker gives it, its four stage
// children, and rolecall.publish (producer) with its four attributes; then
// it flushes the provider, so the exporter has seen every span.
func spanFloor(n int) (SpanFloor, error) {
	tp := tracedProvider()
	ctx := context.Background()
	tree := newSpanTree(tp.Tracer(telemetry.ScopeName))
	// On one P, as on a saturated machine: with a P idle, every span's
	// hand-off to the batch processor's goroutine wakes a thread (a futex
	// call), which the busy pipeline does not pay and which doubled the
	// figure.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	runtime.GC()
	u0 := readUsage()
	for range n {
		tree.make(ctx)
	}
	if err := tp.Shutdown(ctx); err != nil {
		return SpanFloor{}, fmt.Errorf("bench: span floor: %w", err)
	}
	u1 := readUsage()
	f := float64(n)
	return SpanFloor{
		Tasks:             n,
		CPUMicrosPerTask:  float64((u1.cpu - u0.cpu).Microseconds()) / f,
		AllocsPerTask:     float64(u1.allocs-u0.allocs) / f,
		AllocBytesPerTask: float64(u1.allocBytes-u0.allocBytes) / f,
	}, nil
}

// spanTree makes one task's spans as the worker does: rolecall.process
// (consumer) with the attributes the worker gives a resolved task, its four
// stage children, and rolecall.publish (producer) with its four attributes.
type spanTree struct {
	tr                 trace.Tracer
	consumer, producer trace.SpanStartOption
}

func newSpanTree(tr trace.Tracer) spanTree {
	return spanTree{tr: tr, consumer: trace.WithSpanKind(trace.SpanKindConsumer), producer: trace.WithSpanKind(trace.SpanKindProducer)}
}

// Attribute values of the lengths a bench task gives them.
const (
	floorTaskSubject = "rolecall.tasks.casts"
	floorOutSubject  = "rolecall.specs.resolved.casts.architect"
	floorEventID     = "0f8fad5b-d9cb-469f-a165-70867728950e"
	floorDigest      = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

var floorStages = [...]string{telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanResolve, telemetry.SpanMaterialize}

func (t spanTree) make(ctx context.Context) {
	pctx, proc := t.tr.Start(ctx, telemetry.SpanProcess, t.consumer)
	for _, name := range floorStages {
		_, s := t.tr.Start(pctx, name)
		s.End()
	}
	_, pub := t.tr.Start(pctx, telemetry.SpanPublish, t.producer)
	pub.SetAttributes(telemetry.MessagingSystemNATS, attribute.String(telemetry.AttrMessagingDestination, floorOutSubject),
		attribute.String(telemetry.AttrEventID, floorEventID), attribute.String(telemetry.AttrEventType, events.TypeSpecResolved))
	pub.End()
	// One call, as the worker sets them when the span ends.
	proc.SetAttributes(telemetry.MessagingSystemNATS, attribute.String(telemetry.AttrMessagingDestination, floorTaskSubject),
		attribute.String(telemetry.AttrEventID, floorEventID), attribute.String(telemetry.AttrEventType, events.TypeTaskAssigned),
		attribute.String(telemetry.AttrTaskID, "TICKET-12345"), attribute.String(telemetry.AttrSnapshotDigest, floorDigest),
		attribute.String(telemetry.AttrRole, "architect"), attribute.String(telemetry.AttrPack, "default"),
		attribute.String(telemetry.AttrInputsDigest, floorDigest), attribute.String(telemetry.AttrOutcome, telemetry.OutcomeResolved))
	proc.End()
}
