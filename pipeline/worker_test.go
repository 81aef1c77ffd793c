package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// testConfig keeps delivery fast enough for tests while honouring the
// duplicate-window rule.
func testConfig() pipeline.Config {
	c := pipeline.DefaultConfig()
	c.AckWait = 2 * time.Second
	c.MaxDeliver = 3
	c.Backoff = []time.Duration{50 * time.Millisecond}
	c.DuplicateWindow = time.Minute
	c.Concurrency = 8
	// A transient fault is retried in place this long before the task is
	// nak'ed: long enough for a test's injected fault to clear, short
	// enough that one lasting longer reaches the nak and the dead letter.
	c.RetryFor = 500 * time.Millisecond
	return c
}

type harness struct {
	t   *testing.T
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg pipeline.Config
	seq atomic.Int64
}

func newHarness(t *testing.T, cfg pipeline.Config) *harness {
	t.Helper()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatalf("ensure: %v", err)
	}
	return &harness{t: t, nc: nc, js: js, cfg: cfg}
}

// staticSource serves one snapshot loaded from a root.
type staticSource struct{ snap *discover.Snapshot }

func (s staticSource) Snapshot() *discover.Snapshot { return s.snap }

func loadSource(t *testing.T, root string) staticSource {
	t.Helper()
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		t.Fatalf("load %s: %v", root, err)
	}
	return staticSource{snap}
}

// emptyRoot is a config root with no files: the embedded catalog and pack.
func emptyRoot(t *testing.T) string { return t.TempDir() }

type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned; err is set then
	err    *error
}

func (r running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		if *r.err != nil {
			t.Errorf("worker returned %v", *r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("worker did not drain within 20s")
	}
}

func (h *harness) start(src pipeline.SnapshotSource, opt pipeline.Options) running {
	h.t.Helper()
	w, err := pipeline.New(h.js, src, h.cfg, opt)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := running{cancel: cancel, done: make(chan struct{}), err: new(error)}
	go func() {
		*r.err = w.Run(ctx)
		close(r.done)
	}()
	h.t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// submit publishes a task event and returns its CloudEvents id.
func (h *harness) submit(data string, binary bool) string {
	h.t.Helper()
	id := fmt.Sprintf("t-%d", h.seq.Add(1))
	hdr, body, err := events.EncodeTask("test", id, []byte(data), "", "", binary)
	if err != nil {
		h.t.Fatal(err)
	}
	h.publishRaw(hdr, body)
	return id
}

func (h *harness) publishRaw(hdr nats.Header, body []byte) {
	h.t.Helper()
	if _, err := h.js.PublishMsg(context.Background(), &nats.Msg{Subject: h.cfg.Prefix + ".tasks.test", Header: hdr, Data: body}); err != nil {
		h.t.Fatalf("publish task: %v", err)
	}
}

type outcome struct {
	subject string
	msgID   string
	ev      event.Event
}

// outcomes reads the whole specs stream.
func (h *harness) outcomes() []outcome {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := h.js.Stream(ctx, h.cfg.SpecsStream)
	if err != nil {
		h.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	n := int(info.State.Msgs)
	var out []outcome
	if n == 0 {
		return out
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		h.t.Fatal(err)
	}
	for len(out) < n {
		batch, err := c.Fetch(n-len(out), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			h.t.Fatal(err)
		}
		for m := range batch.Messages() {
			ev, err := events.DecodeOutcome(m.Headers(), m.Data())
			if err != nil {
				h.t.Fatalf("undecodable outcome on %s: %v", m.Subject(), err)
			}
			out = append(out, outcome{m.Subject(), m.Headers().Get(nats.MsgIdHdr), ev})
		}
		if batch.Error() != nil {
			h.t.Fatal(batch.Error())
		}
	}
	return out
}

// waitOutcomes polls until the specs stream holds n messages.
func (h *harness) waitOutcomes(n int, within time.Duration) []outcome {
	h.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s, err := h.js.Stream(context.Background(), h.cfg.SpecsStream)
		if err != nil {
			h.t.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			h.t.Fatal(err)
		}
		if int(info.State.Msgs) >= n {
			return h.outcomes()
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("specs stream has %d outcomes after %s, want %d", info.State.Msgs, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func causation(ev event.Event) string {
	v, _ := ev.Extensions()["causationid"].(string)
	return v
}

// exactlyOnce asserts one outcome per submitted id, and no others.
func exactlyOnce(t *testing.T, ids []string, outs []outcome) {
	t.Helper()
	count := map[string]int{}
	for _, o := range outs {
		count[causation(o.ev)]++
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("task %s has %d outcomes, want 1", id, count[id])
		}
		delete(count, id)
	}
	for id, n := range count {
		t.Errorf("unexpected outcome(s) for %q: %d", id, n)
	}
}

func failureOf(t *testing.T, ev event.Event) events.FailureData {
	t.Helper()
	if ev.Type() != events.TypeSpecFailed {
		t.Fatalf("outcome type %s, want failure; data %s", ev.Type(), ev.Data())
	}
	var f events.FailureData
	if err := json.Unmarshal(ev.Data(), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestOutcomeShapes(t *testing.T) {
	h := newHarness(t, testConfig())
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})

	cases := []struct {
		name    string
		data    string
		binary  bool
		raw     func() (nats.Header, []byte)
		subject string // expected outcome subject
		stage   resolve.Stage
		code    resolve.Code
	}{
		{name: "resolved structured", data: `{"task_id":"T-1","role":"architect"}`, subject: "rolecall.specs.resolved.architect"},
		{name: "resolved binary", data: `{"task_id":"T-2","role":"analyst","modes":[]}`, binary: true, subject: "rolecall.specs.resolved.analyst"},
		{name: "task_invalid unknown field", data: `{"task_id":"T-3","role":"architect","colour":"red"}`,
			subject: "rolecall.specs.failed.task_invalid", stage: resolve.StageDecode, code: resolve.CodeTaskInvalid},
		{name: "task_invalid bad name", data: `{"task_id":"T-4","role":"architect","pack":"../etc"}`,
			subject: "rolecall.specs.failed.task_invalid", stage: resolve.StageDecode, code: resolve.CodeTaskInvalid},
		{name: "discover pack_not_found", data: `{"task_id":"T-5","role":"architect","pack":"nope"}`,
			subject: "rolecall.specs.failed.pack_not_found", stage: resolve.StageDiscover, code: resolve.CodePackNotFound},
		{name: "resolve mode_unknown", data: `{"task_id":"T-6","role":"architect","modes":["telepathic"]}`,
			subject: "rolecall.specs.failed.mode_unknown", stage: resolve.StageResolve, code: resolve.CodeModeUnknown},
		{name: "resolve role_unknown", data: `{"task_id":"T-7","role":"astronaut"}`,
			subject: "rolecall.specs.failed.role_unknown", stage: resolve.StageResolve, code: resolve.CodeRoleUnknown},
		{name: "resolve external_profile_missing", data: `{"task_id":"T-8","role":"external:ghost"}`,
			subject: "rolecall.specs.failed.external_profile_missing", stage: resolve.StageResolve, code: resolve.CodeExternalProfileMissing},
		{name: "event_invalid malformed JSON", raw: func() (nats.Header, []byte) {
			return nats.Header{"Content-Type": []string{"application/cloudevents+json"}}, []byte(`{"specversion":"1.0",`)
		}, subject: "rolecall.specs.failed.event_invalid", stage: resolve.StageDecode, code: resolve.CodeEventInvalid},
		{name: "event_invalid unknown type", raw: func() (nats.Header, []byte) {
			return nats.Header{"Content-Type": []string{"application/cloudevents+json"}},
				[]byte(`{"specversion":"1.0","id":"x-1","source":"test","type":"com.example.other","datacontenttype":"application/json","data":{"task_id":"T-9","role":"architect"}}`)
		}, subject: "rolecall.specs.failed.event_invalid", stage: resolve.StageDecode, code: resolve.CodeEventInvalid},
	}
	for i, tc := range cases {
		if tc.raw != nil {
			h.publishRaw(tc.raw())
		} else {
			h.submit(tc.data, tc.binary)
		}
		outs := h.waitOutcomes(i+1, 10*time.Second)
		got := outs[i]
		t.Run(tc.name, func(t *testing.T) {
			if got.subject != tc.subject {
				t.Errorf("subject %s, want %s", got.subject, tc.subject)
			}
			if tc.code == "" {
				if got.ev.Type() != events.TypeSpecResolved {
					t.Fatalf("type %s, want resolved; data %s", got.ev.Type(), got.ev.Data())
				}
				var r events.ResolvedData
				if err := json.Unmarshal(got.ev.Data(), &r); err != nil {
					t.Fatal(err)
				}
				if r.Model == "" || r.InputsDigest == "" || r.SystemMessage == "" {
					t.Errorf("resolved data incomplete: model %q digest %q", r.Model, r.InputsDigest)
				}
				return
			}
			f := failureOf(t, got.ev)
			if f.Stage != tc.stage || f.Code != tc.code {
				t.Errorf("failure %s/%s, want %s/%s (%s)", f.Stage, f.Code, tc.stage, tc.code, f.Message)
			}
		})
	}
}

func TestDeliveryExhausted(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDeliver = 2
	h := newHarness(t, cfg)
	var attempts atomic.Int32
	alloc := &countingAllocator{}
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{
		Allocator: alloc,
		Hooks: pipeline.Hooks{BeforePublish: func(context.Context, *pipeline.Outcome, uint64) error {
			attempts.Add(1)
			return errors.New("injected transient fault")
		}},
	})
	id := h.submit(`{"task_id":"T-dead","role":"architect"}`, false)
	outs := h.waitOutcomes(1, 20*time.Second)
	exactlyOnce(t, []string{id}, outs)
	f := failureOf(t, outs[0].ev)
	if f.Code != resolve.CodeDeliveryExhausted || f.Stage != resolve.StageDeliver {
		t.Errorf("got %s/%s, want deliver/delivery_exhausted", f.Stage, f.Code)
	}
	if f.TaskID == nil || *f.TaskID != "T-dead" {
		t.Errorf("task_id %v, want T-dead", f.TaskID)
	}
	if d := f.Decision; d == nil || d.ID != outs[0].msgID || !strings.Contains(string(d.Task), `"T-dead"`) || len(d.Inputs) != 0 {
		t.Errorf("delivery_exhausted decision record %+v, want its id, the task and no inputs", d)
	}
	if want := events.OutcomeID("test", id); outs[0].msgID != want {
		t.Errorf("outcome id %s, want the task's deterministic id %s", outs[0].msgID, want)
	}
	if n := attempts.Load(); n < 2 {
		t.Errorf("%d publish attempts, want at least one per delivery (max_deliver = 2)", n)
	}
	if alloc.n.Load() != 0 {
		t.Error("allocator called for a task without a resolved outcome")
	}
}

type countingAllocator struct{ n atomic.Int32 }

func (a *countingAllocator) Allocate(context.Context, *events.ResolvedData) error {
	a.n.Add(1)
	return nil
}

func TestAllocatorOnlyAfterResolved(t *testing.T) {
	h := newHarness(t, testConfig())
	alloc := &countingAllocator{}
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Allocator: alloc})
	h.submit(`{"task_id":"ok","role":"architect"}`, false)
	h.submit(`{"task_id":"bad","role":"architect","modes":["nope"]}`, false)
	h.submit(`{"task_id":"bad2","role":"nobody"}`, false)
	h.waitOutcomes(3, 10*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for alloc.n.Load() < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := alloc.n.Load(); n != 1 {
		t.Errorf("allocator called %d times, want 1 (only the resolved task)", n)
	}
}

// recordingAllocator keeps what each allocation was given, by task id.
type recordingAllocator struct {
	mu    sync.Mutex
	specs map[string]*events.ResolvedData
}

func (a *recordingAllocator) Allocate(_ context.Context, d *events.ResolvedData) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.specs[d.TaskID] = d
	return nil
}

// TestAllocatorGetsThePublishedSpec: tasks of one configuration are
// finished from a plan, their extra prompts kept apart for the encoder;
// the allocator still gets each task's whole prompt and system message,
// the ones its outcome published.
func TestAllocatorGetsThePublishedSpec(t *testing.T) {
	h := newHarness(t, testConfig())
	alloc := &recordingAllocator{specs: map[string]*events.ResolvedData{}}
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Allocator: alloc})
	const n = 40
	for i := range n {
		h.submit(fmt.Sprintf(`{"task_id":"T-%d","role":"architect","overrides":{"extra_prompt":"Ticket T-%d."}}`, i, i), false)
	}
	outs := h.waitOutcomes(n, 20*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		alloc.mu.Lock()
		got := len(alloc.specs)
		alloc.mu.Unlock()
		if got == n {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	alloc.mu.Lock()
	defer alloc.mu.Unlock()
	if len(alloc.specs) != n {
		t.Fatalf("%d allocations, want %d", len(alloc.specs), n)
	}
	for _, o := range outs {
		var pub events.ResolvedData
		if err := json.Unmarshal(o.ev.Data(), &pub); err != nil {
			t.Fatal(err)
		}
		got := alloc.specs[pub.TaskID]
		if got == nil {
			t.Fatalf("no allocation for %s", pub.TaskID)
		}
		if got.PromptBody != pub.PromptBody || got.SystemMessage != pub.SystemMessage {
			t.Fatalf("%s: allocated prompt ends %q, published %q", pub.TaskID,
				got.PromptBody[max(len(got.PromptBody)-20, 0):], pub.PromptBody[max(len(pub.PromptBody)-20, 0):])
		}
	}
}

// Every task gets one outcome, and that outcome is its own: a worker
// writes each outcome over the last one as soon as it is published, so a
// body still read after that would show here as another task's.
func TestTwoWorkersManyTasks(t *testing.T) {
	h := newHarness(t, testConfig())
	src := loadSource(t, emptyRoot(t))
	h.start(src, pipeline.Options{})
	h.start(src, pipeline.Options{})
	roles := []string{"architect", "analyst", "critic", "tester", "nobody"}
	var ids []string
	taskOf := map[string]string{} // event id -> task id
	for i := 0; i < 2000; i++ {
		taskID := fmt.Sprintf("T-%d", i)
		// An extra prompt of its own makes each body differ beyond its ids.
		id := h.submit(fmt.Sprintf(`{"task_id":%q,"role":%q,"overrides":{"extra_prompt":"Ticket %s."}}`, taskID, roles[i%len(roles)], taskID), i%2 == 0)
		ids = append(ids, id)
		taskOf[id] = taskID
	}
	outs := h.waitOutcomes(len(ids), 60*time.Second)
	exactlyOnce(t, ids, outs)
	for _, o := range outs {
		id, want := causation(o.ev), taskOf[causation(o.ev)]
		if o.ev.Type() == events.TypeSpecFailed {
			if f := failureOf(t, o.ev); f.TaskID == nil || *f.TaskID != want {
				t.Fatalf("failure outcome of %s (task %s) holds task %v", id, want, f.TaskID)
			}
			continue
		}
		var data events.ResolvedData
		if err := json.Unmarshal(o.ev.Data(), &data); err != nil {
			t.Fatalf("outcome of %s: %v", id, err)
		}
		if data.TaskID != want || !strings.HasSuffix(data.PromptBody, "Ticket "+want+".") {
			t.Fatalf("outcome of %s (task %s) holds task %q with a prompt ending %q", id, want, data.TaskID, data.PromptBody[max(len(data.PromptBody)-20, 0):])
		}
	}
}

func TestStoppedWorkerAndSecondWorker(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg)
	src := loadSource(t, emptyRoot(t))
	var seen atomic.Int32
	var once sync.Once
	crashed := make(chan struct{})
	// Worker A "crashes" after its 50th outcome: from then on it drops
	// every task unacknowledged, as a process killed mid-batch would.
	a := h.start(src, pipeline.Options{Hooks: pipeline.Hooks{Abandon: func(after pipeline.Step, _ *pipeline.Outcome) bool {
		if after != pipeline.StepRecord {
			return false
		}
		if seen.Add(1) > 50 {
			once.Do(func() { close(crashed) })
			return true
		}
		return false
	}}})
	var ids []string
	for i := 0; i < 300; i++ {
		ids = append(ids, h.submit(fmt.Sprintf(`{"task_id":"T-%d","role":"architect"}`, i), false))
	}
	<-crashed
	a.stop(t)
	h.start(src, pipeline.Options{})
	outs := h.waitOutcomes(len(ids), 30*time.Second)
	exactlyOnce(t, ids, outs)
}

func TestDrainFinishesInFlight(t *testing.T) {
	h := newHarness(t, testConfig())
	src := loadSource(t, emptyRoot(t))
	var mu sync.Mutex
	acked := map[string]bool{}
	r := h.start(src, pipeline.Options{Hooks: pipeline.Hooks{Abandon: func(after pipeline.Step, o *pipeline.Outcome) bool {
		mu.Lock()
		defer mu.Unlock()
		if after == pipeline.StepRecord && o.Resolved != nil {
			acked[o.Resolved.TaskID] = true
		}
		return false
	}}})
	var ids []string
	for i := 0; i < 500; i++ {
		ids = append(ids, h.submit(fmt.Sprintf(`{"task_id":"T-%d","role":"critic"}`, i), false))
	}
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 20 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	r.stop(t)
	// Every task the drained worker acknowledged has its outcome in the
	// stream: nothing was acknowledged without one.
	have := map[string]bool{}
	for _, o := range h.outcomes() {
		if v, ok := o.ev.Extensions()["taskid"].(string); ok {
			have[v] = true
		}
	}
	mu.Lock()
	for id := range acked {
		if !have[id] {
			t.Errorf("task %s was acknowledged without an outcome", id)
		}
	}
	mu.Unlock()
	// A successor finishes the rest with exactly one outcome each.
	h.start(src, pipeline.Options{})
	exactlyOnce(t, ids, h.waitOutcomes(len(ids), 30*time.Second))
}

func TestOversizedTaskRejectedByServer(t *testing.T) {
	h := newHarness(t, testConfig())
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
	big := `{"task_id":"T-big","role":"architect","overrides":{"extra_prompt":"` + strings.Repeat("x", 2<<20) + `"}}`
	hdr, body, err := events.EncodeTask("test", "big", []byte(big), "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.js.PublishMsg(context.Background(), &nats.Msg{Subject: "rolecall.tasks.big", Header: hdr, Data: body})
	if !errors.Is(err, nats.ErrMaxPayload) {
		t.Fatalf("publishing a 2 MiB task: %v, want nats.ErrMaxPayload", err)
	}
	// The worker keeps running: the next task still resolves.
	id := h.submit(`{"task_id":"T-after","role":"architect"}`, false)
	exactlyOnce(t, []string{id}, h.waitOutcomes(1, 10*time.Second))
}

func TestOverLimitTaskIsTyped(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDataBytes = 1024
	h := newHarness(t, cfg)
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
	h.submit(`{"task_id":"T-limit","role":"architect","overrides":{"extra_prompt":"`+strings.Repeat("y", 2048)+`"}}`, false)
	f := failureOf(t, h.waitOutcomes(1, 10*time.Second)[0].ev)
	if f.Code != resolve.CodeTaskInvalid {
		t.Errorf("code %s, want task_invalid", f.Code)
	}
}

func TestConfigChangeTakesEffect(t *testing.T) {
	root := t.TempDir()
	writePack := func(model string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(root, "packs"), 0o755); err != nil {
			t.Fatal(err)
		}
		replaceFile(t, root, "packs/team.yaml", "roles:\n  architect:\n    model: "+model+"\n")
	}
	writePack("model-one")
	src := watchedSource(t, root, discover.Options{})
	h := newHarness(t, testConfig())
	h.start(src, pipeline.Options{})
	h.submit(`{"task_id":"T-a","role":"architect","pack":"team"}`, false)
	first := h.waitOutcomes(1, 10*time.Second)[0]
	prev := src.Snapshot()
	writePack("model-two-longer")
	awaitNewSnapshot(t, src, prev)
	h.submit(`{"task_id":"T-b","role":"architect","pack":"team"}`, false)
	second := h.waitOutcomes(2, 10*time.Second)[1]
	for i, c := range []struct {
		o     outcome
		model string
	}{{first, "model-one"}, {second, "model-two-longer"}} {
		var r events.ResolvedData
		if err := json.Unmarshal(c.o.ev.Data(), &r); err != nil {
			t.Fatalf("outcome %d: %v (%s)", i, err, c.o.ev.Data())
		}
		if r.Model != c.model {
			t.Errorf("task %d model %q, want %q", i, r.Model, c.model)
		}
	}
}

func TestPanicIsTransient(t *testing.T) {
	h := newHarness(t, testConfig())
	var calls atomic.Int32
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Hooks: pipeline.Hooks{BeforePublish: func(context.Context, *pipeline.Outcome, uint64) error {
		if calls.Add(1) == 1 {
			panic("injected bug in a stage")
		}
		return nil
	}}})
	id := h.submit(`{"task_id":"T-panic","role":"architect"}`, false)
	outs := h.waitOutcomes(1, 10*time.Second)
	exactlyOnce(t, []string{id}, outs)
	if outs[0].ev.Type() != events.TypeSpecResolved {
		t.Errorf("after a recovered panic the retry should resolve; got %s", outs[0].ev.Type())
	}
	if calls.Load() != 2 {
		t.Errorf("%d attempts, want 2 (panic, then retry)", calls.Load())
	}
}

func TestShortDuplicateWindowRefused(t *testing.T) {
	cfg := testConfig()
	cfg.DuplicateWindow = cfg.AckWait // far below ack_wait × max_deliver
	if err := cfg.Validate(); !errors.Is(err, pipeline.ErrConfig) {
		t.Fatalf("Validate() = %v, want ErrConfig", err)
	}
	// An existing specs stream with a short window is refused at start.
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	good := testConfig()
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: good.SpecsStream, Subjects: []string{"rolecall.specs.>"}, Duplicates: 5 * time.Second,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Ensure(context.Background(), js, good); !errors.Is(err, pipeline.ErrConfig) {
		t.Fatalf("Ensure with a 5s duplicate window = %v, want ErrConfig", err)
	}
}

func TestOutcomeTooLargeIsTyped(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDataBytes = 900 << 10
	h := newHarness(t, cfg)
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
	// A 400 KB extra prompt appears twice in the outcome (prompt_body and
	// system_message) and once more in prompt_overlays: over 1 MiB.
	h.submit(`{"task_id":"T-huge","role":"architect","overrides":{"extra_prompt":"`+strings.Repeat("z", 400<<10)+`"}}`, false)
	f := failureOf(t, h.waitOutcomes(1, 10*time.Second)[0].ev)
	if f.Code != resolve.CodeMaterializeFailed || f.Details["reason"] != "outcome_too_large" {
		t.Errorf("got %s %v, want materialize_failed/outcome_too_large", f.Code, f.Details)
	}
}

// TestStopDuringOutageGivesTheTaskBack: a worker stopped while a delivery
// retries a broker fault in place does not sit out RetryFor; it naks the
// task, and another worker finishes it.
func TestStopDuringOutageGivesTheTaskBack(t *testing.T) {
	cfg := testConfig()
	cfg.RetryFor = time.Hour
	cfg.DuplicateWindow = cfg.RequiredDuplicateWindow() + time.Minute
	h := newHarness(t, cfg)
	src := loadSource(t, emptyRoot(t))
	retrying := make(chan struct{}, 1)
	down := h.start(src, pipeline.Options{Hooks: pipeline.Hooks{BeforePublish: func(context.Context, *pipeline.Outcome, uint64) error {
		select {
		case retrying <- struct{}{}:
		default:
		}
		return errors.New("injected broker outage")
	}}})
	id := h.submit(`{"task_id":"T-stop","role":"architect"}`, false)
	<-retrying
	down.stop(t) // fails the test if the drain takes 20 s
	h.start(src, pipeline.Options{})
	exactlyOnce(t, []string{id}, h.waitOutcomes(1, 10*time.Second))
}
