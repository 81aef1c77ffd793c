package pipeline_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

// telConfig delivers fast, with an ack wait long enough that no task is
// redelivered by accident on a loaded machine: a stray redelivery would add
// a second rolecall.process span and break the exact shapes asserted here.
func telConfig() pipeline.Config {
	c := testConfig()
	c.AckWait = 10 * time.Second
	return c
}

// telRig is an embedded server with the rolecall streams and an
// always-sampling tracer provider whose ended spans a recorder keeps.
type telRig struct {
	tb  testing.TB
	js  jetstream.JetStream
	cfg pipeline.Config
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
	seq atomic.Int64
}

func newTelRig(tb testing.TB, cfg pipeline.Config) *telRig {
	tb.Helper()
	nc := natstest.Connect(tb, natstest.Start(tb))
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
		tb.Fatalf("ensure: %v", err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	tb.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &telRig{tb: tb, js: js, cfg: cfg, rec: rec, tp: tp}
}

// options are a traced worker's options, as cmd/worker builds them.
func (r *telRig) options() pipeline.Options {
	return pipeline.Options{TracerProvider: r.tp, Propagator: telemetry.NewPropagator()}
}

// start runs a worker on a child of ctx; stop drains it (and is also run
// when the test ends).
func (r *telRig) start(ctx context.Context, src pipeline.SnapshotSource, opt pipeline.Options) (stop func()) {
	r.tb.Helper()
	w, err := pipeline.New(r.js, src, r.cfg, opt)
	if err != nil {
		r.tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					r.tb.Errorf("worker returned %v", err)
				}
			case <-time.After(20 * time.Second):
				r.tb.Error("worker did not drain within 20s")
			}
		})
	}
	r.tb.Cleanup(stop)
	return stop
}

// telSource serves one snapshot.
type telSource struct{ snap *discover.Snapshot }

func (s telSource) Snapshot() *discover.Snapshot { return s.snap }

// telSnapshot loads a config root made of files (name → content); no files
// means the embedded catalog and default pack.
func telSnapshot(tb testing.TB, files map[string]string) telSource {
	tb.Helper()
	root := tb.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		tb.Fatalf("load config root: %v", err)
	}
	return telSource{snap}
}

// taskMsg is one task message and where it carries its trace context.
type taskMsg struct {
	data   string
	binary bool
	header string // traceparent NATS header; "" = none
	ext    string // traceparent CloudEvents extension; "" = none
	state  string // tracestate, next to each traceparent given
}

// publish sends a task event and returns its CloudEvents id (the outcome's
// causationid).
func (r *telRig) publish(m taskMsg) string {
	r.tb.Helper()
	id := fmt.Sprintf("t-%d", r.seq.Add(1))
	hdr, body, err := events.EncodeTask("test", id, []byte(m.data), m.ext, m.state, m.binary)
	if err != nil {
		r.tb.Fatal(err)
	}
	// EncodeTask writes the context as headers and as the extension; keep
	// the headers only as the case asks.
	delete(hdr, telemetry.HeaderTraceParent)
	delete(hdr, telemetry.HeaderTraceState)
	if m.header != "" {
		hdr[telemetry.HeaderTraceParent] = []string{m.header}
		if m.state != "" {
			hdr[telemetry.HeaderTraceState] = []string{m.state}
		}
	}
	r.publishRaw(hdr, body)
	return id
}

func (r *telRig) publishRaw(hdr nats.Header, body []byte) {
	r.tb.Helper()
	msg := &nats.Msg{Subject: r.cfg.Prefix + ".tasks.test", Header: hdr, Data: body}
	if _, err := r.js.PublishMsg(context.Background(), msg); err != nil {
		r.tb.Fatalf("publish task: %v", err)
	}
}

type telOutcome struct {
	subject string
	header  nats.Header
	ev      event.Event
}

func (o telOutcome) causation() string {
	v, _ := o.ev.Extensions()["causationid"].(string)
	return v
}

// waitOutcomes reads the specs stream from the start until it has n
// outcomes.
func (r *telRig) waitOutcomes(n int) []telOutcome {
	r.tb.Helper()
	ctx := context.Background()
	c, err := r.js.OrderedConsumer(ctx, r.cfg.SpecsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		r.tb.Fatal(err)
	}
	var out []telOutcome
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n {
		if time.Now().After(deadline) {
			r.tb.Fatalf("%d outcomes after 30s, want %d", len(out), n)
		}
		batch, err := c.Fetch(n-len(out), jetstream.FetchMaxWait(time.Second))
		if err != nil {
			r.tb.Fatal(err)
		}
		for m := range batch.Messages() {
			ev, err := events.DecodeOutcome(m.Headers(), m.Data())
			if err != nil {
				r.tb.Fatalf("undecodable outcome on %s: %v", m.Subject(), err)
			}
			out = append(out, telOutcome{m.Subject(), m.Headers(), ev})
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			r.tb.Fatal(err)
		}
	}
	return out
}

// byCausation indexes outcomes by the id of the task event they answer.
func byCausation(tb testing.TB, outs []telOutcome) map[string]telOutcome {
	tb.Helper()
	m := make(map[string]telOutcome, len(outs))
	for _, o := range outs {
		if _, dup := m[o.causation()]; dup {
			tb.Fatalf("two outcomes for task event %q", o.causation())
		}
		m[o.causation()] = o
	}
	return m
}

// waitProcessSpans waits until n rolecall.process spans have ended and
// returns every ended span. A process span ends after all its children.
func (r *telRig) waitProcessSpans(n int) []sdktrace.ReadOnlySpan {
	r.tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans := r.rec.Ended()
		got := 0
		for _, s := range spans {
			if s.Name() == telemetry.SpanProcess {
				got++
			}
		}
		if got >= n {
			return spans
		}
		if time.Now().After(deadline) {
			r.tb.Fatalf("%d %s spans ended after 30s, want %d", got, telemetry.SpanProcess, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func byTrace(spans []sdktrace.ReadOnlySpan) map[trace.TraceID][]sdktrace.ReadOnlySpan {
	m := map[trace.TraceID][]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		id := s.SpanContext().TraceID()
		m[id] = append(m[id], s)
	}
	return m
}

// attrs is a span's attributes as strings (every rolecall attribute is one).
// conventions adds to want the OpenTelemetry messaging attributes a span
// of kind op (telemetry.OperationProcess or OperationSend) must carry on
// the rig's server: operation type and name, the consumer group of a
// consumer span, and server.address/server.port.
func (r *telRig) conventions(want map[string]string, op string) map[string]string {
	u, err := url.Parse(r.js.Conn().ConnectedUrl())
	if err != nil {
		r.tb.Fatal(err)
	}
	want[telemetry.AttrServerAddress] = u.Hostname()
	want[telemetry.AttrServerPort] = u.Port()
	want[telemetry.AttrMessagingOperationType] = op
	if op == telemetry.OperationProcess {
		want[telemetry.AttrMessagingOperationName] = telemetry.OperationProcess
		want[telemetry.AttrMessagingConsumerGroup] = r.cfg.Consumer
	} else {
		want[telemetry.AttrMessagingOperationName] = telemetry.OperationPublish
		want[telemetry.AttrEventSource] = "rolecall"
		want[telemetry.AttrMessagingMessageID] = want[telemetry.AttrEventID]
	}
	return want
}

func attrs(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// spanTree is one rolecall.process span and its children in start order.
type spanTree struct {
	proc sdktrace.ReadOnlySpan
	kids []sdktrace.ReadOnlySpan
}

func (st spanTree) kid(name string) sdktrace.ReadOnlySpan {
	for _, k := range st.kids {
		if k.Name() == name {
			return k
		}
	}
	return nil
}

// trees splits one trace's spans into process trees (in start order) and
// the spans that belong to none (a dead-letter publish). It fails on a span
// whose parent is neither the trace's incoming parent nor a process span.
func trees(t *testing.T, spans []sdktrace.ReadOnlySpan) (out []spanTree, loose []sdktrace.ReadOnlySpan) {
	t.Helper()
	procs := map[trace.SpanID]int{}
	for _, s := range spans {
		if s.Name() == telemetry.SpanProcess {
			procs[s.SpanContext().SpanID()] = len(out)
			out = append(out, spanTree{proc: s})
		}
	}
	for _, s := range spans {
		if s.Name() == telemetry.SpanProcess {
			continue
		}
		if i, ok := procs[s.Parent().SpanID()]; ok && s.Parent().TraceID() == s.SpanContext().TraceID() {
			out[i].kids = append(out[i].kids, s)
			continue
		}
		loose = append(loose, s)
	}
	byStart := func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) }
	for i := range out {
		slices.SortFunc(out[i].kids, byStart)
	}
	slices.SortFunc(out, func(a, b spanTree) int { return byStart(a.proc, b.proc) })
	return out, loose
}

// checkTree asserts the shape docs/OPERATIONS.md gives one delivery: a consumer
// span whose parent is want (none when want is invalid), with exactly the
// children named, in that order, each inside the process span and after
// the previous one, rolecall.publish a producer and the stages internal.
func checkTree(t *testing.T, st spanTree, want trace.SpanContext, children ...string) {
	t.Helper()
	p := st.proc
	if p.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("%s kind %s, want consumer", p.Name(), p.SpanKind())
	}
	if want.IsValid() {
		if got := p.Parent(); got.TraceID() != want.TraceID() || got.SpanID() != want.SpanID() || !got.IsRemote() {
			t.Errorf("%s parent %s/%s remote=%t, want the incoming %s/%s", p.Name(),
				got.TraceID(), got.SpanID(), got.IsRemote(), want.TraceID(), want.SpanID())
		}
	} else if p.Parent().IsValid() {
		t.Errorf("%s has parent %s/%s, want a root span (the task carried no trace context)",
			p.Name(), p.Parent().TraceID(), p.Parent().SpanID())
	}
	var names []string
	for _, k := range st.kids {
		names = append(names, k.Name())
	}
	if diff := cmp.Diff(children, names); diff != "" {
		t.Fatalf("children of %s (-want +got):\n%s", p.Name(), diff)
	}
	prevEnd := p.StartTime()
	for _, k := range st.kids {
		wantKind := trace.SpanKindInternal
		if k.Name() == telemetry.SpanPublish {
			wantKind = trace.SpanKindProducer
		}
		if k.SpanKind() != wantKind {
			t.Errorf("%s kind %s, want %s", k.Name(), k.SpanKind(), wantKind)
		}
		if k.StartTime().Before(prevEnd) {
			t.Errorf("%s starts before the previous stage (or the process span) ended", k.Name())
		}
		if k.EndTime().Before(k.StartTime()) || k.EndTime().After(p.EndTime()) {
			t.Errorf("%s [%s, %s] is not inside %s [%s, %s]", k.Name(), k.StartTime(), k.EndTime(),
				p.Name(), p.StartTime(), p.EndTime())
		}
		prevEnd = k.EndTime()
	}
}

// traceparent formats a sampled W3C traceparent.
func traceparent(tid trace.TraceID, sid trace.SpanID) string {
	return "00-" + tid.String() + "-" + sid.String() + "-01"
}

// remote is the span context a worker extracts from traceparent(tid, sid).
func remote(tid trace.TraceID, sid trace.SpanID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

func traceID(n int) trace.TraceID {
	var id trace.TraceID
	copy(id[:], fmt.Sprintf("rolecall%08x", n))
	return id
}

func spanID(n int) trace.SpanID {
	var id trace.SpanID
	copy(id[:], fmt.Sprintf("s%07x", n))
	return id
}

// checkOutcomeTrace asserts the outcome carries traceparent tp (and
// tracestate ts) both as a lowercase NATS header and as the CloudEvents
// extension.
func checkOutcomeTrace(t *testing.T, o telOutcome, tp, ts string) {
	t.Helper()
	ext := o.ev.Extensions()
	if got := o.header[telemetry.HeaderTraceParent]; !slices.Equal(got, []string{tp}) {
		t.Errorf("outcome traceparent header %q, want [%s]", got, tp)
	}
	if got, _ := ext[events.ExtTraceParent].(string); got != tp {
		t.Errorf("outcome traceparent extension %q, want %s", got, tp)
	}
	wantTS := []string(nil)
	if ts != "" {
		wantTS = []string{ts}
	}
	if got := o.header[telemetry.HeaderTraceState]; !slices.Equal(got, wantTS) {
		t.Errorf("outcome tracestate header %q, want %q", got, wantTS)
	}
	if got, _ := ext[events.ExtTraceState].(string); got != ts {
		t.Errorf("outcome tracestate extension %q, want %q", got, ts)
	}
}

// TestTraceTree: a resolved task yields rolecall.process (consumer, parent =
// the incoming context) with the five stage children, the §8 attributes,
// and an outcome whose traceparent is the publish span, wherever the task
// carried its trace context.
func TestTraceTree(t *testing.T) {
	r := newTelRig(t, telConfig())
	src := telSnapshot(t, nil)
	// The worker's own context carries a span: a traceless task must still
	// start a trace of its own, not join the caller's.
	runCtx, runSpan := r.tp.Tracer("test").Start(context.Background(), "test.run")
	defer runSpan.End()
	r.start(runCtx, src, r.options())

	const state = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
	type tc struct {
		name   string
		msg    func(tp, other string) taskMsg
		parent bool // the incoming tp is the parent (else: a root span)
		state  string
	}
	cases := []tc{
		{name: "header, structured", parent: true, state: state,
			msg: func(tp, _ string) taskMsg { return taskMsg{header: tp, state: state} }},
		{name: "header, binary", parent: true,
			msg: func(tp, _ string) taskMsg { return taskMsg{header: tp, binary: true} }},
		{name: "extension only, structured", parent: true, state: state,
			msg: func(tp, _ string) taskMsg { return taskMsg{ext: tp, state: state} }},
		{name: "extension only, binary", parent: true, state: state,
			msg: func(tp, _ string) taskMsg { return taskMsg{ext: tp, state: state, binary: true} }},
		{name: "header and extension, binary", parent: true,
			msg: func(tp, _ string) taskMsg { return taskMsg{header: tp, ext: tp, binary: true} }},
		{name: "header wins over a different extension", parent: true,
			msg: func(tp, other string) taskMsg { return taskMsg{header: tp, ext: other} }},
		{name: "invalid header, extension used", parent: true,
			msg: func(tp, _ string) taskMsg { return taskMsg{header: "00-zzzz-not-a-traceparent-01", ext: tp} }},
		{name: "no trace context", parent: false,
			msg: func(string, string) taskMsg { return taskMsg{} }},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		m := c.msg(traceparent(traceID(i), spanID(i)), traceparent(traceID(100+i), spanID(100+i)))
		m.data = fmt.Sprintf(`{"task_id":"T-%d","role":"architect"}`, i)
		ids[i] = r.publish(m)
	}
	outs := byCausation(t, r.waitOutcomes(len(cases)))
	spans := r.waitProcessSpans(len(cases))
	// Index the traces by the task they carry.
	byTask := map[string]spanTree{}
	for tid, ss := range byTrace(spans) {
		if tid == runSpan.SpanContext().TraceID() {
			t.Errorf("%d span(s) joined the worker's own trace: %s", len(ss), ss[0].Name())
			continue
		}
		ts, loose := trees(t, ss)
		if len(ts) != 1 || len(loose) != 0 {
			t.Errorf("trace %s: %d process spans and %d other spans, want 1 and 0", tid, len(ts), len(loose))
			continue
		}
		byTask[attrs(ts[0].proc)[telemetry.AttrTaskID]] = ts[0]
	}

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, ok := byTask[fmt.Sprintf("T-%d", i)]
			if !ok {
				t.Fatal("no trace for the task")
			}
			var want trace.SpanContext
			if c.parent {
				want = remote(traceID(i), spanID(i))
			}
			checkTree(t, st, want, telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanResolve,
				telemetry.SpanMaterialize, telemetry.SpanPublish)
			if st.proc.Status().Code != codes.Unset {
				t.Errorf("process status %v, want unset", st.proc.Status())
			}
			out := outs[ids[i]]
			data := resolvedOf(t, out.ev)
			wantAttrs := r.conventions(map[string]string{
				telemetry.AttrMessagingSystem:      "nats",
				telemetry.AttrMessagingDestination: "rolecall.tasks.test",
				telemetry.AttrEventID:              ids[i],
				telemetry.AttrMessagingMessageID:   ids[i],
				telemetry.AttrEventSource:          "test",
				telemetry.AttrEventType:            events.TypeTaskAssigned,
				telemetry.AttrTaskID:               fmt.Sprintf("T-%d", i),
				telemetry.AttrRole:                 "architect",
				telemetry.AttrPack:                 "default",
				telemetry.AttrOutcome:              telemetry.OutcomeResolved,
				telemetry.AttrSnapshotDigest:       src.snap.Digest,
				telemetry.AttrInputsDigest:         data.InputsDigest,
			}, telemetry.OperationProcess)
			if diff := cmp.Diff(wantAttrs, attrs(st.proc)); diff != "" {
				t.Errorf("process attributes (-want +got):\n%s", diff)
			}
			pub := st.kid(telemetry.SpanPublish)
			wantPub := r.conventions(map[string]string{
				telemetry.AttrMessagingSystem:      "nats",
				telemetry.AttrMessagingDestination: "rolecall.specs.resolved.architect",
				telemetry.AttrEventID:              out.ev.ID(),
				telemetry.AttrEventType:            events.TypeSpecResolved,
			}, telemetry.OperationSend)
			if diff := cmp.Diff(wantPub, attrs(pub)); diff != "" {
				t.Errorf("publish attributes (-want +got):\n%s", diff)
			}
			for _, k := range st.kids[:4] {
				if a := attrs(k); len(a) != 0 || k.Status().Code != codes.Unset {
					t.Errorf("%s: attributes %v status %v, want none and unset", k.Name(), a, k.Status())
				}
			}
			if c.parent && st.proc.SpanContext().TraceState().String() != c.state {
				t.Errorf("tracestate %q, want %q", st.proc.SpanContext().TraceState(), c.state)
			}
			checkOutcomeTrace(t, out, traceparent(st.proc.SpanContext().TraceID(), pub.SpanContext().SpanID()), c.state)
		})
	}
}

// failRoot is a config root where analyst may only use systematic.
var failRoot = map[string]string{
	"packs/team.yaml": "roles:\n  analyst:\n    model: m1\n    modes_allow: [systematic]\n",
}

// TestTraceFailures: a failure sets error status and rolecall.error.code on
// the process span and on the stage span that failed, and the tree stops at
// that stage (plus the publish of the failure outcome).
func TestTraceFailures(t *testing.T) {
	r := newTelRig(t, telConfig())
	src := telSnapshot(t, failRoot)
	r.start(context.Background(), src, r.options())

	structured := func() nats.Header { return nats.Header{"content-type": []string{events.ContentTypeCloudEventsJSON}} }
	cases := []struct {
		name  string
		data  string                       // a task (encoded structured)
		raw   func() (nats.Header, []byte) // or a raw message
		code  string
		stage string // the span that failed
		spans []string
		attrs map[string]string // process attributes beyond the common ones
	}{
		{name: "task_invalid", data: `{"task_id":"F-0","role":"architect","colour":"red"}`,
			code: "task_invalid", stage: telemetry.SpanDecode,
			spans: []string{telemetry.SpanDecode, telemetry.SpanPublish},
			attrs: map[string]string{telemetry.AttrEventType: events.TypeTaskAssigned, telemetry.AttrTaskID: "F-0"}},
		{name: "event_invalid wrong type", raw: func() (nats.Header, []byte) {
			return structured(), []byte(`{"specversion":"1.0","id":"x-1","source":"test","type":"com.example.other",` +
				`"datacontenttype":"application/json","data":{"task_id":"F-1","role":"architect"}}`)
		}, code: "event_invalid", stage: telemetry.SpanDecode,
			spans: []string{telemetry.SpanDecode, telemetry.SpanPublish},
			// The attributes report what the message carried, even the type
			// that made it invalid.
			attrs: map[string]string{telemetry.AttrEventID: "x-1", telemetry.AttrMessagingMessageID: "x-1", telemetry.AttrEventSource: "test",
				telemetry.AttrEventType: "com.example.other", telemetry.AttrTaskID: "F-1"}},
		{name: "event_invalid malformed", raw: func() (nats.Header, []byte) {
			return structured(), []byte(`{"specversion":"1.0",`)
		}, code: "event_invalid", stage: telemetry.SpanDecode,
			spans: []string{telemetry.SpanDecode, telemetry.SpanPublish},
			attrs: map[string]string{}},
		{name: "pack_not_found", data: `{"task_id":"F-3","role":"architect","pack":"nope"}`,
			code: "pack_not_found", stage: telemetry.SpanDiscover,
			spans: []string{telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanPublish},
			attrs: map[string]string{telemetry.AttrRole: "architect", telemetry.AttrPack: "nope"}},
		{name: "external_profile_missing (a resolver code met in discovery)", data: `{"task_id":"F-4","role":"external:ghost"}`,
			code: "external_profile_missing", stage: telemetry.SpanDiscover,
			spans: []string{telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanPublish},
			attrs: map[string]string{telemetry.AttrRole: "external:ghost"}},
		{name: "mode_unknown", data: `{"task_id":"F-5","role":"architect","modes":["telepathic"]}`,
			code: "mode_unknown", stage: telemetry.SpanResolve,
			spans: []string{telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanResolve, telemetry.SpanPublish},
			attrs: map[string]string{telemetry.AttrRole: "architect", telemetry.AttrPack: "default"}},
		{name: "mode_disallowed", data: `{"task_id":"F-6","role":"analyst","pack":"team","modes":["fast"]}`,
			code: "mode_disallowed", stage: telemetry.SpanResolve,
			spans: []string{telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanResolve, telemetry.SpanPublish},
			attrs: map[string]string{telemetry.AttrRole: "analyst", telemetry.AttrPack: "team"}},
	}
	ids := map[int]string{}
	for i, c := range cases {
		tp := traceparent(traceID(i), spanID(i))
		if c.raw != nil {
			hdr, body := c.raw()
			hdr[telemetry.HeaderTraceParent] = []string{tp}
			r.publishRaw(hdr, body)
			continue
		}
		ids[i] = r.publish(taskMsg{data: c.data, header: tp})
	}
	outs := r.waitOutcomes(len(cases))
	byTraceID := map[trace.TraceID]telOutcome{}
	for _, o := range outs {
		tp, _ := o.ev.Extensions()[events.ExtTraceParent].(string)
		sc := telemetry.ExtractTask(context.Background(), telemetry.NewPropagator(), nil, tp, "")
		byTraceID[trace.SpanContextFromContext(sc).TraceID()] = o
	}
	traces := byTrace(r.waitProcessSpans(len(cases)))

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, loose := trees(t, traces[traceID(i)])
			if len(ts) != 1 || len(loose) != 0 {
				t.Fatalf("%d process spans and %d other spans, want 1 and 0", len(ts), len(loose))
			}
			st := ts[0]
			checkTree(t, st, remote(traceID(i), spanID(i)), c.spans...)
			if got := st.proc.Status(); got.Code != codes.Error || got.Description != c.code {
				t.Errorf("process status %v, want Error %q", got, c.code)
			}
			want := r.conventions(map[string]string{
				telemetry.AttrMessagingSystem:      "nats",
				telemetry.AttrMessagingDestination: "rolecall.tasks.test",
				telemetry.AttrOutcome:              telemetry.OutcomeFailed,
				telemetry.AttrErrorCode:            c.code,
				telemetry.AttrErrorType:            c.code,
			}, telemetry.OperationProcess)
			if id, ok := ids[i]; ok {
				want[telemetry.AttrEventID] = id
				want[telemetry.AttrMessagingMessageID] = id
				want[telemetry.AttrEventSource] = "test"
				want[telemetry.AttrEventType] = events.TypeTaskAssigned
				want[telemetry.AttrTaskID] = fmt.Sprintf("F-%d", i)
			}
			if c.stage != telemetry.SpanDecode {
				want[telemetry.AttrSnapshotDigest] = src.snap.Digest
			}
			for k, v := range c.attrs {
				want[k] = v
			}
			if diff := cmp.Diff(want, attrs(st.proc)); diff != "" {
				t.Errorf("process attributes (-want +got):\n%s", diff)
			}
			for _, k := range st.kids {
				a, status := attrs(k), k.Status()
				switch k.Name() {
				case c.stage:
					if status.Code != codes.Error || a[telemetry.AttrErrorCode] != c.code {
						t.Errorf("%s: status %v, code %q; want Error and %s", k.Name(), status, a[telemetry.AttrErrorCode], c.code)
					}
				case telemetry.SpanPublish:
					out, ok := byTraceID[traceID(i)]
					if !ok {
						t.Fatal("no outcome carries the task's trace id")
					}
					wantPub := r.conventions(map[string]string{
						telemetry.AttrMessagingSystem:      "nats",
						telemetry.AttrMessagingDestination: "rolecall.specs.failed." + c.code,
						telemetry.AttrEventID:              out.ev.ID(),
						telemetry.AttrEventType:            events.TypeSpecFailed,
					}, telemetry.OperationSend)
					if diff := cmp.Diff(wantPub, a); diff != "" {
						t.Errorf("publish attributes (-want +got):\n%s", diff)
					}
					if status.Code != codes.Unset {
						t.Errorf("publish status %v, want unset (the failure outcome was published)", status)
					}
					checkOutcomeTrace(t, out, traceparent(traceID(i), k.SpanContext().SpanID()), "")
				default:
					if status.Code != codes.Unset || len(a) != 0 {
						t.Errorf("%s (before the failing stage): status %v attributes %v", k.Name(), status, a)
					}
				}
			}
		})
	}
}

// TestTraceTransientRetry: a transient fault that outlasts the delivery's
// retries in place ends its process span with error status and outcome
// retry, its publish span failed; the redelivery is a second process span
// under the same parent, and the outcome's traceparent is its publish
// span.
func TestTraceTransientRetry(t *testing.T) {
	r := newTelRig(t, telConfig())
	opt := r.options()
	opt.Hooks.BeforePublish = func(_ context.Context, _ *pipeline.Outcome, delivery uint64) error {
		if delivery == 1 {
			return errors.New("injected transient fault")
		}
		return nil
	}
	r.start(context.Background(), telSnapshot(t, nil), opt)
	r.publish(taskMsg{data: `{"task_id":"T-r","role":"critic"}`, header: traceparent(traceID(7), spanID(7))})
	out := r.waitOutcomes(1)[0]
	ts, loose := trees(t, byTrace(r.waitProcessSpans(2))[traceID(7)])
	if len(ts) != 2 || len(loose) != 0 {
		t.Fatalf("%d process spans and %d other spans, want 2 and 0", len(ts), len(loose))
	}
	parent := remote(traceID(7), spanID(7))
	first, second := ts[0], ts[1]
	stages := []string{telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanResolve, telemetry.SpanMaterialize, telemetry.SpanPublish}
	checkTree(t, first, parent, stages...)
	checkTree(t, second, parent, stages...)
	if got := first.proc.Status(); got.Code != codes.Error || !strings.HasPrefix(got.Description, "transient: publish: injected transient fault") {
		t.Errorf("first delivery status %v, want Error \"transient: publish: injected transient fault …\"", got)
	}
	if got := first.kid(telemetry.SpanPublish).Status(); got.Code != codes.Error {
		t.Errorf("first delivery's publish span status %v, want Error", got)
	}
	// A transient fault has no failure code, on the stage span either.
	if c, ok := attrs(first.kid(telemetry.SpanPublish))[telemetry.AttrErrorCode]; ok {
		t.Errorf("first delivery's publish span has rolecall.error.code %q; a transient fault has no failure code", c)
	}
	if ev := first.proc.Events(); len(ev) != 1 || ev[0].Name != "exception" {
		t.Errorf("first delivery events %v, want one exception", ev)
	}
	a := attrs(first.proc)
	if a[telemetry.AttrOutcome] != telemetry.OutcomeRetry {
		t.Errorf("first delivery outcome %q, want retry", a[telemetry.AttrOutcome])
	}
	if _, ok := a[telemetry.AttrErrorCode]; ok {
		t.Errorf("first delivery has rolecall.error.code %q; a transient fault has no failure code", a[telemetry.AttrErrorCode])
	}
	if got := attrs(second.proc)[telemetry.AttrOutcome]; got != telemetry.OutcomeResolved {
		t.Errorf("second delivery outcome %q, want resolved", got)
	}
	checkOutcomeTrace(t, out, traceparent(traceID(7), second.kid(telemetry.SpanPublish).SpanContext().SpanID()), "")
}

// TestTraceTransientFaultRetriedInPlace: a fault that clears within
// RetryFor costs no delivery: one process span, resolved, whose publish
// span covers the failed attempt and the one that stored the outcome.
func TestTraceTransientFaultRetriedInPlace(t *testing.T) {
	r := newTelRig(t, telConfig())
	opt := r.options()
	var calls atomic.Int32
	opt.Hooks.BeforePublish = func(context.Context, *pipeline.Outcome, uint64) error {
		if calls.Add(1) == 1 {
			return errors.New("injected transient fault")
		}
		return nil
	}
	r.start(context.Background(), telSnapshot(t, nil), opt)
	r.publish(taskMsg{data: `{"task_id":"T-p","role":"critic"}`, header: traceparent(traceID(8), spanID(8))})
	out := r.waitOutcomes(1)[0]
	ts, loose := trees(t, byTrace(r.waitProcessSpans(1))[traceID(8)])
	if len(ts) != 1 || len(loose) != 0 {
		t.Fatalf("%d process spans and %d other spans, want 1 and 0", len(ts), len(loose))
	}
	checkTree(t, ts[0], remote(traceID(8), spanID(8)), telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanResolve,
		telemetry.SpanMaterialize, telemetry.SpanPublish)
	if got := attrs(ts[0].proc)[telemetry.AttrOutcome]; got != telemetry.OutcomeResolved {
		t.Errorf("outcome %q, want resolved", got)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d publish attempts, want 2", n)
	}
	checkOutcomeTrace(t, out, traceparent(traceID(8), ts[0].kid(telemetry.SpanPublish).SpanContext().SpanID()), "")
}

// TestTraceDeliveryExhausted: the dead-letter handler's delivery_exhausted
// outcome stays in the task's trace: its publish span's parent is the
// task's incoming context, next to the failed deliveries.
func TestTraceDeliveryExhausted(t *testing.T) {
	cfg := telConfig()
	cfg.MaxDeliver = 2
	r := newTelRig(t, cfg)
	opt := r.options()
	opt.Hooks.BeforePublish = func(context.Context, *pipeline.Outcome, uint64) error { return errors.New("always down") }
	r.start(context.Background(), telSnapshot(t, nil), opt)
	r.publish(taskMsg{data: `{"task_id":"T-dl","role":"critic"}`, ext: traceparent(traceID(9), spanID(9)), binary: true})
	out := r.waitOutcomes(1)[0]
	r.waitProcessSpans(2)
	// The dead-letter publish span may end just after the outcome is in.
	var ts []spanTree
	var loose []sdktrace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); len(loose) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ts, loose = trees(t, byTrace(r.rec.Ended())[traceID(9)])
	}
	if len(ts) != 2 || len(loose) != 1 {
		t.Fatalf("%d process spans and %d other spans, want 2 and 1", len(ts), len(loose))
	}
	pub := loose[0]
	if pub.Name() != telemetry.SpanPublish || pub.SpanKind() != trace.SpanKindProducer {
		t.Fatalf("dead-letter span %s (%s), want %s (producer)", pub.Name(), pub.SpanKind(), telemetry.SpanPublish)
	}
	if p := pub.Parent(); p.SpanID() != spanID(9) || !p.IsRemote() {
		t.Errorf("dead-letter publish parent %s remote=%t, want the task's incoming span %s", p.SpanID(), p.IsRemote(), spanID(9))
	}
	if got := attrs(pub)[telemetry.AttrMessagingDestination]; got != "rolecall.specs.failed.delivery_exhausted" {
		t.Errorf("dead-letter publish destination %q", got)
	}
	checkOutcomeTrace(t, out, traceparent(traceID(9), pub.SpanContext().SpanID()), "")
}

// TestTraceNoLeakUnderConcurrency: 200 tasks, each with its own trace,
// processed 8 at a time: every trace holds exactly one delivery of its own
// task with exactly its stage spans, no span lands in another task's trace
// or in a trace of its own, and every outcome names its task's trace.
func TestTraceNoLeakUnderConcurrency(t *testing.T) {
	r := newTelRig(t, telConfig())
	r.start(context.Background(), telSnapshot(t, nil), r.options())
	const n = 200
	full := []string{telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanResolve, telemetry.SpanMaterialize, telemetry.SpanPublish}
	shapes := [][]string{
		full,
		{telemetry.SpanDecode, telemetry.SpanPublish},                                                // task_invalid
		{telemetry.SpanDecode, telemetry.SpanDiscover, telemetry.SpanResolve, telemetry.SpanPublish}, // mode_unknown
		full,
	}
	data := []string{
		`{"task_id":"T-%d","role":"architect"}`,
		`{"task_id":"T-%d","role":"architect","colour":"red"}`,
		`{"task_id":"T-%d","role":"architect","modes":["telepathic"]}`,
		`{"task_id":"T-%d","role":"critic","modes":[]}`,
	}
	ids := make([]string, n)
	for i := range n {
		m := taskMsg{data: fmt.Sprintf(data[i%4], i), binary: i%2 == 1}
		if tp := traceparent(traceID(i), spanID(i)); i%3 == 0 {
			m.ext = tp
		} else {
			m.header = tp
		}
		ids[i] = r.publish(m)
	}
	outs := byCausation(t, r.waitOutcomes(n))
	traces := byTrace(r.waitProcessSpans(n))
	if len(traces) != n {
		t.Errorf("%d traces, want %d (one per task)", len(traces), n)
	}
	for i := range n {
		ss := traces[traceID(i)]
		ts, loose := trees(t, ss)
		if len(ts) != 1 || len(loose) != 0 {
			t.Errorf("task %d: %d process spans and %d other spans, want 1 and 0", i, len(ts), len(loose))
			continue
		}
		st := ts[0]
		var names []string
		for _, k := range st.kids {
			names = append(names, k.Name())
		}
		if diff := cmp.Diff(shapes[i%4], names); diff != "" {
			t.Errorf("task %d: children (-want +got):\n%s", i, diff)
			continue
		}
		if p := st.proc.Parent(); p.SpanID() != spanID(i) || !p.IsRemote() {
			t.Errorf("task %d: process parent %s, want %s", i, p.SpanID(), spanID(i))
		}
		if got := attrs(st.proc)[telemetry.AttrTaskID]; got != fmt.Sprintf("T-%d", i) {
			t.Errorf("task %d: its trace's process span is for task %q", i, got)
		}
		if got := attrs(st.proc)[telemetry.AttrEventID]; got != ids[i] {
			t.Errorf("task %d: its trace's process span is for event %q, want %q", i, got, ids[i])
		}
		checkOutcomeTrace(t, outs[ids[i]], traceparent(traceID(i), st.kid(telemetry.SpanPublish).SpanContext().SpanID()), "")
	}
}

// TestMetricsMixedBatch: after resolved tasks, failures of several codes and
// one transient retry, rolecall.tasks has exactly one count per delivery by
// outcome and code, rolecall.stage.duration one sample per stage run, the
// backlog gauge reads 0, and rolecall.inflight is gone with the worker.
func TestMetricsMixedBatch(t *testing.T) {
	r := newTelRig(t, telConfig())
	reader, inst := manualInstruments(t)
	opt := r.options()
	opt.Instruments = inst
	opt.Hooks.BeforePublish = func(_ context.Context, o *pipeline.Outcome, delivery uint64) error {
		if o.Resolved != nil && o.Resolved.TaskID == "X" && delivery == 1 {
			return errors.New("injected transient fault")
		}
		return nil
	}
	stop := r.start(context.Background(), telSnapshot(t, failRoot), opt)
	for _, d := range []string{
		`{"task_id":"R1","role":"architect"}`,
		`{"task_id":"R2","role":"critic"}`,
		`{"task_id":"R3","role":"analyst","pack":"team","modes":["systematic"]}`,
		`{"task_id":"X","role":"architect"}`,                               // nak'ed once, then resolved
		`{"task_id":"TI1","role":"architect","colour":"red"}`,              // task_invalid
		`{"task_id":"TI2","role":"architect","pack":"../up"}`,              // task_invalid
		`{"task_id":"MU","role":"architect","modes":["telepathic"]}`,       // mode_unknown
		`{"task_id":"MD","role":"analyst","pack":"team","modes":["fast"]}`, // mode_disallowed
		`{"task_id":"PNF","role":"architect","pack":"nope"}`,               // pack_not_found
	} {
		r.publish(taskMsg{data: d})
	}
	r.publishRaw(nats.Header{"content-type": []string{events.ContentTypeCloudEventsJSON}}, []byte(`{"specversion":"1.0",`)) // event_invalid
	r.waitOutcomes(10)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if got, ok := gauge(t, rm, telemetry.MetricConsumerPending); !ok || got != 0 {
		t.Errorf("%s = %d (reported %t), want 0 once every task was delivered", telemetry.MetricConsumerPending, got, ok)
	}
	stop() // drain: every delivery has finished, inflight included
	rm = metricdata.ResourceMetrics{}
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}

	tasks := map[string]int64{}
	for _, dp := range metric[metricdata.Sum[int64]](t, rm, telemetry.MetricTasks).DataPoints {
		o, _ := dp.Attributes.Value(telemetry.MetricAttrOutcome)
		key := o.AsString()
		if c, ok := dp.Attributes.Value(telemetry.MetricAttrCode); ok {
			key += "/" + c.AsString()
		}
		if dp.Attributes.Len() != 1+strings.Count(key, "/") {
			t.Errorf("rolecall.tasks point %v has unexpected attributes", dp.Attributes.ToSlice())
		}
		tasks[key] = dp.Value
	}
	wantTasks := map[string]int64{
		"resolved":               4,
		"retry":                  1,
		"failed/task_invalid":    2,
		"failed/event_invalid":   1,
		"failed/mode_unknown":    1,
		"failed/mode_disallowed": 1,
		"failed/pack_not_found":  1,
	}
	if diff := cmp.Diff(wantTasks, tasks); diff != "" {
		t.Errorf("rolecall.tasks by outcome/code (-want +got):\n%s", diff)
	}

	hist := metric[metricdata.Histogram[float64]](t, rm, telemetry.MetricStageDuration)
	stages := map[string]uint64{}
	for _, dp := range hist.DataPoints {
		s, _ := dp.Attributes.Value(telemetry.MetricAttrStage)
		stages[s.AsString()] = dp.Count
		if !slices.Equal(dp.Bounds, telemetry.StageBuckets) {
			t.Errorf("stage %s bounds %v, want telemetry.StageBuckets", s.AsString(), dp.Bounds)
		}
	}
	// 11 deliveries (10 tasks, X twice); the stages each one reached.
	wantStages := map[string]uint64{
		telemetry.StageDecode:      11,
		telemetry.StageDiscover:    8,  // not the 3 decode failures
		telemetry.StageResolve:     7,  // not pack_not_found
		telemetry.StageMaterialize: 5,  // the 4 resolved tasks and X's first delivery
		telemetry.StagePublish:     11, // one per delivery; X's first one failed
	}
	if diff := cmp.Diff(wantStages, stages); diff != "" {
		t.Errorf("rolecall.stage.duration counts by stage (-want +got):\n%s", diff)
	}

	if n, ok := inflightPoint(t, rm); ok {
		t.Errorf("%s = %d after the worker stopped, want no point", telemetry.MetricInflight, n)
	}
}

// TestMetricsInflight: rolecall.inflight counts the tasks a worker holds
// while it holds them, reads 0 once they are finished, and reports nothing
// once the worker has stopped.
func TestMetricsInflight(t *testing.T) {
	r := newTelRig(t, telConfig())
	reader, inst := manualInstruments(t)
	collect := func() (int64, bool) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		return inflightPoint(t, rm)
	}
	opt := r.options()
	opt.Instruments = inst
	held, release := make(chan string, 2), make(chan struct{})
	opt.Hooks.BeforePublish = func(_ context.Context, o *pipeline.Outcome, _ uint64) error {
		if o.Resolved != nil {
			held <- o.Resolved.TaskID
			<-release
		}
		return nil
	}
	stop := r.start(context.Background(), telSnapshot(t, failRoot), opt)
	r.publish(taskMsg{data: `{"task_id":"H1","role":"architect"}`})
	r.publish(taskMsg{data: `{"task_id":"H2","role":"critic"}`})
	for range 2 {
		select {
		case <-held:
		case <-time.After(10 * time.Second):
			t.Fatal("the tasks were not taken")
		}
	}
	if n, ok := collect(); !ok || n != 2 {
		t.Errorf("%s = %d (reported %t) while two tasks are held, want 2", telemetry.MetricInflight, n, ok)
	}
	close(release)
	r.waitOutcomes(2)
	// The outcomes are stored before the tasks are acked and let go.
	deadline := time.Now().Add(5 * time.Second)
	for n, _ := collect(); n != 0; n, _ = collect() {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d after every outcome, want 0", telemetry.MetricInflight, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if n, ok := collect(); ok {
		t.Errorf("%s = %d after the worker stopped, want no point", telemetry.MetricInflight, n)
	}
}

// inflightPoint reads rolecall.inflight; ok is false when it reported
// nothing.
func inflightPoint(t *testing.T, rm metricdata.ResourceMetrics) (int64, bool) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != telemetry.MetricInflight {
				continue
			}
			s, ok := m.Data.(metricdata.Sum[int64])
			if !ok || s.IsMonotonic || len(s.DataPoints) > 1 {
				t.Fatalf("%s: %+v, want a non-monotonic int64 sum with at most one point", m.Name, m.Data)
			}
			if len(s.DataPoints) == 1 {
				return s.DataPoints[0].Value, true
			}
		}
	}
	return 0, false
}

// manualInstruments are the worker's instruments on a meter provider
// whose manual reader the test collects from.
func manualInstruments(t *testing.T) (*sdkmetric.ManualReader, *telemetry.Instruments) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	inst, err := telemetry.NewInstruments(mp)
	if err != nil {
		t.Fatal(err)
	}
	return reader, inst
}

// metric finds the instrument name in rm and asserts its data type.
func metric[T metricdata.Aggregation](t *testing.T, rm metricdata.ResourceMetrics, name string) T {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			d, ok := m.Data.(T)
			if !ok {
				t.Fatalf("%s is a %T", name, m.Data)
			}
			return d
		}
	}
	t.Fatalf("no %s in the collected metrics", name)
	panic("unreachable")
}

// gauge reads an int64 gauge with one point; ok is false when it reported
// nothing.
func gauge(t *testing.T, rm metricdata.ResourceMetrics, name string) (int64, bool) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				g, ok := m.Data.(metricdata.Gauge[int64])
				if !ok || len(g.DataPoints) != 1 {
					t.Fatalf("%s: %+v, want one int64 gauge point", name, m.Data)
				}
				return g.DataPoints[0].Value, true
			}
		}
	}
	return 0, false
}

// lockedBuffer is a log sink the worker's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines decodes the JSON log lines that name a task.
func (l *lockedBuffer) taskLines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(l.b.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Bytes())
		}
		if _, ok := m[telemetry.LogTaskID]; ok {
			out = append(out, m)
		}
	}
	return out
}

// TestLogsCarryTraceAndTask: every per-task log line has task_id and the
// trace_id/span_id of its delivery's process span when tracing is on, the
// incoming parent's when tracing is off, and none for a traceless task with
// tracing off.
func TestLogsCarryTraceAndTask(t *testing.T) {
	for _, traced := range []bool{true, false} {
		t.Run(fmt.Sprintf("tracing=%t", traced), func(t *testing.T) {
			r := newTelRig(t, telConfig())
			var buf lockedBuffer
			opt := r.options()
			if !traced {
				opt.TracerProvider = nil // the runner's no-op default
			}
			opt.Logger = telemetry.NewLogger(&buf, slog.LevelDebug, true)
			opt.Hooks.BeforePublish = func(_ context.Context, o *pipeline.Outcome, delivery uint64) error {
				if o.Resolved != nil && o.Resolved.TaskID == "L-retry" && delivery == 1 {
					return errors.New("injected transient fault")
				}
				return nil
			}
			stop := r.start(context.Background(), telSnapshot(t, nil), opt)
			tasks := []struct {
				id   string
				data string
				msg  string // the line it must log
			}{
				{"L-ok", `{"task_id":"L-ok","role":"architect"}`, "task resolved"},
				{"L-fail", `{"task_id":"L-fail","role":"architect","modes":["telepathic"]}`, "task failed"},
				{"L-retry", `{"task_id":"L-retry","role":"architect"}`, "transient fault; task will be redelivered"},
				{"L-none", `{"task_id":"L-none","role":"architect","pack":"nope"}`, "task failed"},
			}
			for i, tk := range tasks {
				m := taskMsg{data: tk.data}
				if tk.id != "L-none" {
					m.header = traceparent(traceID(i), spanID(i))
				}
				r.publish(m)
			}
			r.waitOutcomes(len(tasks))
			stop()

			// The spans of each task's deliveries (several for L-retry): a
			// line about a stage may carry that stage's span.
			procSpans := map[string][]string{}
			taskOf := map[trace.SpanID]string{}
			ended := r.rec.Ended()
			for _, s := range ended {
				if s.Name() == telemetry.SpanProcess {
					taskOf[s.SpanContext().SpanID()] = attrs(s)[telemetry.AttrTaskID]
				}
			}
			for _, s := range ended {
				id, ok := taskOf[s.SpanContext().SpanID()]
				if !ok {
					id, ok = taskOf[s.Parent().SpanID()]
				}
				if ok {
					procSpans[id] = append(procSpans[id], s.SpanContext().TraceID().String()+"/"+s.SpanContext().SpanID().String())
				}
			}
			seen := map[string]bool{}
			for _, l := range buf.taskLines(t) {
				id, _ := l[telemetry.LogTaskID].(string)
				msg, _ := l["msg"].(string)
				tid, hasTID := l[telemetry.LogTraceID].(string)
				sid, hasSID := l[telemetry.LogSpanID].(string)
				i := slices.IndexFunc(tasks, func(tk struct{ id, data, msg string }) bool { return tk.id == id })
				if i < 0 {
					t.Errorf("log line for unknown task %q: %v", id, l)
					continue
				}
				if tasks[i].msg == msg {
					seen[id] = true
				}
				switch {
				case traced:
					if !hasTID || !hasSID || !slices.Contains(procSpans[id], tid+"/"+sid) {
						t.Errorf("%q line for %s has trace %q span %q, want one of its deliveries' spans %v", msg, id, tid, sid, procSpans[id])
					}
					if id != "L-none" && tid != traceID(i).String() {
						t.Errorf("%q line for %s has trace %q, want the incoming %s", msg, id, tid, traceID(i))
					}
				case id == "L-none":
					if hasTID || hasSID {
						t.Errorf("%q line for a traceless task with tracing off has trace %q span %q", msg, tid, sid)
					}
				default:
					if tid != traceID(i).String() || sid != spanID(i).String() {
						t.Errorf("%q line for %s has trace %q span %q, want the incoming parent %s/%s", msg, id, tid, sid, traceID(i), spanID(i))
					}
				}
			}
			for _, tk := range tasks {
				if !seen[tk.id] {
					t.Errorf("no %q line for %s", tk.msg, tk.id)
				}
			}
		})
	}
}

// With tracing off (the no-op default) the worker starts no spans, yet an
// outcome still carries its task's incoming trace context (docs/EVENTS.md):
// from the header, from the CloudEvents extension when the header has
// none, and nothing for a traceless task.
func TestOutcomeTraceWithTracingOff(t *testing.T) {
	r := newTelRig(t, telConfig())
	opt := r.options()
	opt.TracerProvider = nil
	stop := r.start(context.Background(), telSnapshot(t, nil), opt)
	defer stop()
	const state = "rolecall=off"
	hdr, ext := traceparent(traceID(1), spanID(1)), traceparent(traceID(2), spanID(2))
	cases := []struct {
		name       string
		msg        taskMsg
		wantParent string
		wantState  string
	}{
		{"header", taskMsg{data: `{"task_id":"O-1","role":"architect"}`, header: hdr, state: state}, hdr, state},
		{"extension only", taskMsg{data: `{"task_id":"O-2","role":"architect"}`, ext: ext}, ext, ""},
		{"header wins over extension, failure outcome", taskMsg{data: `{"task_id":"O-3","role":"nobody"}`, header: hdr, ext: ext}, hdr, ""},
		{"traceless", taskMsg{data: `{"task_id":"O-4","role":"architect"}`}, "", ""},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = r.publish(c.msg)
	}
	outs := byCausation(t, r.waitOutcomes(len(cases)))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := outs[ids[i]]
			if c.wantParent == "" {
				if got := o.header[telemetry.HeaderTraceParent]; got != nil {
					t.Errorf("traceless task's outcome has traceparent %q", got)
				}
				if got, ok := o.ev.Extensions()[events.ExtTraceParent]; ok {
					t.Errorf("traceless task's outcome has traceparent extension %v", got)
				}
				return
			}
			checkOutcomeTrace(t, o, c.wantParent, c.wantState)
		})
	}
}

// TestTraceLookupFault: a delivery whose idempotency look-up keeps failing
// is nak'ed as a transient fault, and says so: its process span is Error
// "transient: look-up: …" with an exception event, like a failed publish.
func TestTraceLookupFault(t *testing.T) {
	r := newTelRig(t, telConfig())
	r.start(context.Background(), telSnapshot(t, nil), r.options())
	// A first task shows the worker is running with its store; then the
	// store goes away.
	r.publish(taskMsg{data: `{"task_id":"T-warm","role":"critic"}`})
	r.waitOutcomes(1)
	ctx := context.Background()
	if err := r.js.DeleteKeyValue(ctx, r.cfg.OutcomesBucket); err != nil {
		t.Fatal(err)
	}
	r.publish(taskMsg{data: `{"task_id":"T-l","role":"critic"}`, header: traceparent(traceID(9), spanID(9))})
	ts, _ := trees(t, byTrace(r.waitProcessSpans(2))[traceID(9)])
	if len(ts) == 0 {
		t.Fatal("no process span")
	}
	first := ts[0].proc
	if _, err := pipeline.Ensure(ctx, r.js, r.cfg); err != nil {
		t.Fatal(err)
	}
	r.waitOutcomes(2)
	if got := first.Status(); got.Code != codes.Error || !strings.HasPrefix(got.Description, "transient: look-up: ") {
		t.Errorf("first delivery status %v, want Error \"transient: look-up: …\"", got)
	}
	if ev := first.Events(); len(ev) != 1 || ev[0].Name != "exception" {
		t.Errorf("first delivery events %v, want one exception", ev)
	}
	if got := attrs(first)[telemetry.AttrOutcome]; got != telemetry.OutcomeRetry {
		t.Errorf("first delivery outcome %q, want retry", got)
	}
}
