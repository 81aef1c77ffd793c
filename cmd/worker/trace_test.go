package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

// otlpSink is an OTLP/HTTP trace receiver that keeps every span it decoded,
// with its resource's service.name.
type otlpSink struct {
	t     *testing.T
	mu    sync.Mutex
	spans []sinkSpan
}

type sinkSpan struct {
	service string
	span    *tracepb.Span
}

func (s *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	req := new(coltrace.ExportTraceServiceRequest)
	if err == nil {
		err = proto.Unmarshal(raw, req)
	}
	if err != nil {
		s.t.Errorf("OTLP receiver: %s: %v", r.URL.Path, err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans = append(s.spans, sinkSpan{service, sp})
			}
		}
	}
	s.mu.Unlock()
	out, _ := proto.Marshal(new(coltrace.ExportTraceServiceResponse))
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (s *otlpSink) named(name string) []sinkSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sinkSpan
	for _, sp := range s.spans {
		if sp.span.GetName() == name {
			out = append(out, sp)
		}
	}
	return out
}

// TestSubmitWorkerOutcomeIsOneTrace: `worker submit` with OTLP tracing on
// exports a producer span rolecall.submit whose context is the task's
// traceparent; the worker's rolecall.process is its child; the outcome
// `submit --wait` prints carries the same trace id and the worker's
// rolecall.publish span id.
func TestSubmitWorkerOutcomeIsOneTrace(t *testing.T) {
	sink := &otlpSink{t: t}
	collector := httptest.NewServer(sink)
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")

	url, js, cfg, rec := startTracedWorker(t)
	task := writeTask(t, `{"task_id":"T-trace","role":"architect"}`)
	var stdout, stderr bytes.Buffer
	code := run([]string{"submit", "--nats", url, "--wait", "--timeout", "20s", "--id", "trace-1", task},
		strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("submit exit %d\nstdout: %s\nstderr: %s", code, &stdout, &stderr)
	}

	// The submit span reached the collector (submit flushes on exit).
	subs := sink.named("rolecall.submit")
	if len(subs) != 1 {
		t.Fatalf("collector has %d rolecall.submit spans, want 1", len(subs))
	}
	sub := subs[0]
	if sub.span.GetKind() != tracepb.Span_SPAN_KIND_PRODUCER || sub.service != "rolecall-submit" {
		t.Errorf("rolecall.submit kind %s service %q, want producer and rolecall-submit", sub.span.GetKind(), sub.service)
	}
	if len(sub.span.GetParentSpanId()) != 0 {
		t.Errorf("rolecall.submit has a parent; it should start the trace")
	}
	tid, sid := hex.EncodeToString(sub.span.GetTraceId()), hex.EncodeToString(sub.span.GetSpanId())

	// The task event carries the submit span, as header and extension.
	stream, err := js.Stream(context.Background(), cfg.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := events.DecodeTask(raw.Header, raw.Data, events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantTP := "00-" + tid + "-" + sid + "-01"
	if got := raw.Header.Get(telemetry.HeaderTraceParent); got != wantTP {
		t.Errorf("task traceparent header %q, want %s", got, wantTP)
	}
	if got, _ := inc.Event.Extensions()[events.ExtTraceParent].(string); got != wantTP {
		t.Errorf("task traceparent extension %q, want %s", got, wantTP)
	}

	// The worker's process span is the submit span's child, in its trace.
	var proc, pub sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); proc == nil; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no rolecall.process span ended within 10s")
		}
		for _, s := range rec.Ended() {
			switch s.Name() {
			case telemetry.SpanProcess:
				proc = s
			case telemetry.SpanPublish:
				pub = s
			}
		}
	}
	if p := proc.Parent(); p.TraceID().String() != tid || p.SpanID().String() != sid || !p.IsRemote() {
		t.Errorf("rolecall.process parent %s/%s, want the submit span %s/%s", p.TraceID(), p.SpanID(), tid, sid)
	}
	if pub == nil || pub.Parent().SpanID() != proc.SpanContext().SpanID() {
		t.Fatal("no rolecall.publish child of rolecall.process")
	}

	// The printed outcome names the same trace and the publish span.
	var outcome struct {
		Type        string `json:"type"`
		TraceParent string `json:"traceparent"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &outcome, json.RejectUnknownMembers(false)); err != nil {
		t.Fatalf("submit --wait output: %v\n%s", err, &stdout)
	}
	if outcome.Type != events.TypeSpecResolved {
		t.Errorf("outcome type %s, want resolved", outcome.Type)
	}
	if want := "00-" + tid + "-" + pub.SpanContext().SpanID().String() + "-01"; outcome.TraceParent != want {
		t.Errorf("outcome traceparent %q, want %s (the submit trace, the publish span)", outcome.TraceParent, want)
	}
	if proc.SpanContext().TraceID() != trace.TraceID(sub.span.GetTraceId()) {
		t.Errorf("worker trace %s, want the submit trace %s", proc.SpanContext().TraceID(), tid)
	}
}

// startTracedWorker runs an in-process pipeline on an embedded server; its
// spans go to the returned recorder.
func startTracedWorker(t *testing.T) (url string, js jetstream.JetStream, cfg pipeline.Config, rec *tracetest.SpanRecorder) {
	t.Helper()
	srv := natstest.Start(t)
	js = natstest.JetStream(t, natstest.Connect(t, srv))
	cfg = pipeline.DefaultConfig()
	cfg.Concurrency = 2
	snap, err := discover.Load(t.TempDir(), discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec = tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	w, err := pipeline.New(js, staticSnapshot{snap}, cfg, pipeline.Options{TracerProvider: tp, Propagator: telemetry.NewPropagator()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); !w.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("worker not ready after 10s")
		}
	}
	return srv.ClientURL(), js, cfg, rec
}

func writeTask(t *testing.T, data string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "task.json")
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSubmitWithoutTracingSendsNoContext: with OTEL_TRACES_EXPORTER=none
// (the default) the submit span is a no-op, the task carries no trace
// context, and the worker's rolecall.process starts the trace.
func TestSubmitWithoutTracingSendsNoContext(t *testing.T) {
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	url, js, cfg, rec := startTracedWorker(t)
	var stdout, stderr bytes.Buffer
	code := run([]string{"submit", "--nats", url, "--wait", "--timeout", "20s", "--id", "plain-1",
		writeTask(t, `{"task_id":"T-plain","role":"architect"}`)}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("submit exit %d\nstdout: %s\nstderr: %s", code, &stdout, &stderr)
	}
	stream, err := js.Stream(context.Background(), cfg.TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := stream.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	inc, err := events.DecodeTask(raw.Header, raw.Data, events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if inc.TraceParent != "" || len(raw.Header.Values(telemetry.HeaderTraceParent)) != 0 {
		t.Errorf("task carries trace context %q with tracing off", inc.TraceParent)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var proc sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == telemetry.SpanProcess {
				proc = s
			}
		}
		if proc != nil {
			if proc.Parent().IsValid() {
				t.Errorf("rolecall.process has parent %s; want a root span", proc.Parent().SpanID())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no rolecall.process span ended within 10s")
		}
	}
}

// staticSnapshot serves one snapshot to the in-process pipeline.
type staticSnapshot struct{ snap *discover.Snapshot }

func (s staticSnapshot) Snapshot() *discover.Snapshot { return s.snap }
