package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

type fixedSource struct{ s *discover.Snapshot }

func (f fixedSource) Snapshot() *discover.Snapshot { return f.s }

// shape is what the span floor must share with the worker's spans: names,
// kinds, the tree, and which attributes each span carries (their count is
// what the SDK's cost depends on; values differ per task).
func shape(spans tracetest.SpanStubs) []string {
	names := map[string]string{}
	for _, s := range spans {
		names[s.SpanContext.SpanID().String()] = s.Name
	}
	var out []string
	for _, s := range spans {
		var keys []string
		for _, kv := range s.Attributes {
			keys = append(keys, string(kv.Key))
		}
		slices.Sort(keys)
		out = append(out, fmt.Sprintf("%s kind=%s parent=%q attrs=%s", s.Name, s.SpanKind, names[s.Parent.SpanID().String()], strings.Join(keys, ",")))
	}
	slices.Sort(out)
	return out
}

// TestSpanFloorHasTheWorkersShape: the spans whose cost SpanFloor reports
// are the ones the worker makes for a resolved bench task, so the floor
// measures the SDK's share of real tracing and not some other tree.
func TestSpanFloorHasTheWorkersShape(t *testing.T) {
	js, err := jetstream.New(natstest.Connect(t, natstest.Start(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := pipelineConfig(Options{Concurrency: 1}.withDefaults())
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	tasks, err := buildTasks(1, Mix{1, 0, 0, 0}, false, false, "floor")
	if err != nil {
		t.Fatal(err)
	}
	tk := tasks[0]
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: events.TasksSubject(cfg.Prefix, tk.kind.String()), Header: tk.header(), Data: tk.body}); err != nil {
		t.Fatal(err)
	}

	worker := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSyncer(worker))
	w, err := pipeline.New(js, fixedSource{testSnapshot(t)}, cfg, pipeline.Options{TracerProvider: tp, Propagator: telemetry.NewPropagator()})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(runCtx) }()
	deadline := time.Now().Add(20 * time.Second)
	// The process span ends last, after the ack.
	for !slices.ContainsFunc(worker.GetSpans(), func(s tracetest.SpanStub) bool { return s.Name == telemetry.SpanProcess }) {
		if time.Now().After(deadline) {
			t.Fatalf("no process span after 20 s; spans so far: %v", shape(worker.GetSpans()))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-ran; err != nil {
		t.Fatal(err)
	}

	floor := tracetest.NewInMemoryExporter()
	ftp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSyncer(floor))
	newSpanTree(ftp.Tracer(telemetry.ScopeName)).make(ctx)

	want := shape(worker.GetSpans())
	if len(want) != 6 {
		t.Fatalf("the worker made %d spans for one task, want 6: %v", len(want), want)
	}
	if diff := cmp.Diff(want, shape(floor.GetSpans())); diff != "" {
		t.Errorf("span floor tree differs from the worker's (-worker +floor):\n%s", diff)
	}
}

// TestSpanFloorCounts: the floor reports a cost for every task it made.
func TestSpanFloorCounts(t *testing.T) {
	f, err := spanFloor(200)
	if err != nil {
		t.Fatal(err)
	}
	// Six spans cannot be made without allocating: a zero here would mean
	// the measurement read nothing.
	if f.Tasks != 200 || f.AllocsPerTask < 6 || f.AllocBytesPerTask <= 0 {
		t.Errorf("span floor %+v: want 200 tasks and at least one allocation per span", f)
	}
}
