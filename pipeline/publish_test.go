package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// The worker hands an outcome's body back to its pool as soon as
// PublishMsgAsync returns. That is safe only if the client never sends the
// message again: with PublishOptions a publish no stream answers fails at
// once. With the client's default it would be resent after the retry wait
// (an hour here), and no error would come.
func TestPublishOptionsDoNotResend(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	opts := append(pipeline.PublishOptions(), jetstream.WithRetryWait(time.Hour))
	f, err := js.PublishMsgAsync(&nats.Msg{Subject: "nostream.outcome", Data: []byte("{}")}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-f.Err():
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Fatalf("publish without a stream failed with %v, want %v", err, jetstream.ErrNoStreamResponse)
		}
	case <-f.Ok():
		t.Fatal("publish without a stream was acknowledged")
	case <-time.After(10 * time.Second):
		t.Fatal("publish without a stream neither failed nor was acknowledged: the client is waiting to resend it")
	}
}

// transientLines passes on each line a text handler writes about a
// transient fault (a handler writes one record per Write).
type transientLines chan string

func (c transientLines) Write(p []byte) (int, error) {
	if line := string(p); strings.Contains(line, "transient fault") {
		select {
		case c <- line:
		default:
		}
	}
	return len(p), nil
}

// An outcome no stream answers is a transient fault of its own (the client
// does not resend it, TestPublishOptionsDoNotResend): the task is nak'ed,
// and its redelivery, once the stream is back, stores one intact outcome.
func TestOutcomeWithoutStreamIsRedelivered(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDeliver = 5
	cfg.Backoff = []time.Duration{300 * time.Millisecond}
	h := newHarness(t, cfg)
	logs := make(transientLines, 16)
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	// The worker is consuming once a first task has its outcome.
	h.submit(`{"task_id":"T-1","role":"architect"}`, false)
	h.waitOutcomes(1, 10*time.Second)

	ctx := context.Background()
	if err := h.js.DeleteStream(ctx, cfg.SpecsStream); err != nil {
		t.Fatal(err)
	}
	second := h.submit(`{"task_id":"T-2","role":"critic"}`, false)
	select {
	case line := <-logs:
		if !strings.Contains(line, jetstream.ErrNoStreamResponse.Error()) {
			t.Fatalf("transient fault logged as %q, want the error %q", line, jetstream.ErrNoStreamResponse)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no transient fault logged for an outcome without a stream")
	}
	if _, err := pipeline.Ensure(ctx, h.js, cfg); err != nil {
		t.Fatal(err)
	}
	outs := h.waitOutcomes(1, 10*time.Second)
	exactlyOnce(t, []string{second}, outs)
	var data events.ResolvedData
	if err := json.Unmarshal(outs[0].ev.Data(), &data); err != nil {
		t.Fatalf("outcome of %s: %v", second, err)
	}
	if data.TaskID != "T-2" || data.Identity.Name != "critic" {
		t.Errorf("outcome of %s is for task %q, role %q; want T-2, critic", second, data.TaskID, data.Identity.Name)
	}
}

// TestPoisonOutcomeDoesNotStallOthers: one task whose outcome no stream
// takes (its subject is bound to none) and one whose outcome is over the
// server's max payload, among 1,000 others. The others all get their
// outcomes while the first is still retrying its publish in place, so no
// delivery waits on another; the oversize one gets its typed failure and
// the unpublishable one, once its deliveries are spent, its dead-letter
// outcome: exactly one outcome each.
func TestPoisonOutcomeDoesNotStallOthers(t *testing.T) {
	cfg := testConfig()
	cfg.Concurrency = 32
	cfg.MaxDeliver = 2
	cfg.RetryFor = 3 * time.Second
	cfg.MaxDataBytes = 900 << 10
	cfg.DuplicateWindow = cfg.RequiredDuplicateWindow() + time.Minute
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The specs stream takes failures and architects' outcomes only.
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: cfg.SpecsStream, Subjects: []string{"rolecall.specs.failed.>", "rolecall.specs.resolved.architect"},
		Duplicates: cfg.DuplicateWindow,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, nc: nc, js: js, cfg: cfg}
	var poisonAttempts, poisonGaveUp atomic.Int32
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Hooks: pipeline.Hooks{
		BeforePublish: func(_ context.Context, o *pipeline.Outcome, delivery uint64) error {
			if o.Resolved != nil && o.Resolved.TaskID == "T-poison" {
				poisonAttempts.Add(1)
				if delivery > 1 {
					poisonGaveUp.Store(1) // its first delivery ran out of retries
				}
			}
			return nil
		},
	}})
	poison := h.submit(`{"task_id":"T-poison","role":"critic"}`, false)
	for poisonAttempts.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	huge := h.submit(`{"task_id":"T-huge","role":"architect","overrides":{"extra_prompt":"`+strings.Repeat("z", 400<<10)+`"}}`, false)
	ids := []string{poison, huge}
	for i := range 1000 {
		ids = append(ids, h.submit(fmt.Sprintf(`{"task_id":"T-%d","role":"architect"}`, i), i%2 == 0))
	}
	h.waitOutcomes(1001, 60*time.Second)
	if poisonGaveUp.Load() != 0 {
		t.Errorf("the other tasks finished only after the poison task's first delivery gave up")
	}
	outs := h.waitOutcomes(1002, 60*time.Second)
	exactlyOnce(t, ids, outs)
	for _, o := range outs {
		switch causation(o.ev) {
		case poison:
			if f := failureOf(t, o.ev); f.Code != resolve.CodeDeliveryExhausted {
				t.Errorf("poison task: %s, want delivery_exhausted", f.Code)
			}
		case huge:
			if f := failureOf(t, o.ev); f.Code != resolve.CodeMaterializeFailed || f.Details["reason"] != "outcome_too_large" {
				t.Errorf("oversize task: %s %v, want materialize_failed/outcome_too_large", f.Code, f.Details)
			}
		default:
			if o.ev.Type() != events.TypeSpecResolved {
				t.Errorf("task %s: %s, want resolved", o.ev.Subject(), o.ev.Type())
			}
		}
	}
}

// TestFailureOutcomeTooLargeKeepsItsCode: a failure outcome over the specs
// stream's max_msg_size (its decision record holds the task, here with a
// large extra prompt or a long tools list) is published with its own code
// and no task in its record. It used to be refused on every delivery, and
// then its delivery_exhausted outcome too, which was retried forever: the
// task never got an outcome.
func TestFailureOutcomeTooLargeKeepsItsCode(t *testing.T) {
	tools := make([]string, 12000)
	for i := range tools {
		tools[i] = fmt.Sprintf(`"t%05d"`, i)
	}
	cases := []struct{ name, overrides string }{
		{"extra prompt", `"extra_prompt":"` + strings.Repeat("z", 100<<10) + `"`},
		{"tools", `"tools":[` + strings.Join(tools, ",") + `]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			srv := natstest.Start(t)
			nc := natstest.Connect(t, srv)
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
				Name: cfg.SpecsStream, Subjects: []string{"rolecall.specs.>"}, Duplicates: cfg.DuplicateWindow, MaxMsgSize: 64 << 10,
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
				t.Fatal(err)
			}
			h := &harness{t: t, nc: nc, js: js, cfg: cfg}
			h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
			id := h.submit(`{"task_id":"T-big","role":"no-such-role","overrides":{`+tc.overrides+`}}`, false)
			outs := h.waitOutcomes(1, 20*time.Second)
			exactlyOnce(t, []string{id}, outs)
			f := failureOf(t, outs[0].ev)
			if f.Code != resolve.CodeRoleUnknown || f.TaskID == nil || *f.TaskID != "T-big" || f.Decision == nil {
				t.Fatalf("got %s for task %v (decision %v), want role_unknown for T-big with a decision record", f.Code, f.TaskID, f.Decision != nil)
			}
			if string(f.Decision.Task) != "null" {
				t.Errorf("decision task %.200s, want null", f.Decision.Task)
			}
		})
	}
}

// The same at the connection's max payload, which EncodeOutcome checks
// before publishing (the service's preview encodes through it too).
func TestEncodeOutcomeFailureOverMaxPayload(t *testing.T) {
	prompt := strings.Repeat("z", 100<<10)
	task := events.Task{TaskID: "T-big", Role: "no-such-role", Override: &events.Overrides{ExtraPrompt: &prompt}}
	out := pipeline.Handle(loadSource(t, emptyRoot(t)).snap, task, resolve.RoleName(task.Role), nil)
	meta := events.OutcomeMeta{ID: events.OutcomeID("urn:test", "e-1")}
	m, err := pipeline.EncodeOutcome(pipeline.Config{}, meta, task, &out, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Data) > 64<<10 || out.Code() != resolve.CodeRoleUnknown || string(out.Failure.Decision.Task) != "null" {
		t.Errorf("outcome %s of %d bytes, decision task %.100s; want role_unknown under 64 KiB without the task", out.Code(), len(m.Data), out.Failure.Decision.Task)
	}
}
