package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
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

// transientLog signals each "transient fault" the worker logs, with its
// error.
type transientLog struct {
	slog.Handler
	errs chan string
}

func (h transientLog) Enabled(context.Context, slog.Level) bool { return true }

func (h transientLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "transient fault") {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "error" {
				select {
				case h.errs <- a.Value.String():
				default:
				}
			}
			return true
		})
	}
	return nil
}

// An outcome no stream answers is not resent by the client: the task is
// nak'ed, and its redelivery, once the stream is back, stores one intact
// outcome.
func TestOutcomeWithoutStreamIsRedelivered(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDeliver = 5
	cfg.Backoff = []time.Duration{300 * time.Millisecond}
	h := newHarness(t, cfg)
	logs := transientLog{Handler: slog.DiscardHandler, errs: make(chan string, 16)}
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Logger: slog.New(logs)})
	// The worker is consuming once a first task has its outcome.
	h.submit(`{"task_id":"T-1","role":"architect"}`, false)
	h.waitOutcomes(1, 10*time.Second)

	ctx := context.Background()
	if err := h.js.DeleteStream(ctx, cfg.SpecsStream); err != nil {
		t.Fatal(err)
	}
	second := h.submit(`{"task_id":"T-2","role":"critic"}`, false)
	select {
	case msg := <-logs.errs:
		if !strings.Contains(msg, jetstream.ErrNoStreamResponse.Error()) {
			t.Fatalf("transient fault %q, want %q", msg, jetstream.ErrNoStreamResponse)
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

// Bodies are reused as soon as they are published: under load every
// stored outcome must still be its own task's.
func TestManyOutcomesKeepTheirBodies(t *testing.T) {
	cfg := testConfig()
	cfg.Concurrency = 4
	h := newHarness(t, cfg)
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
	roles := []string{"architect", "analyst", "critic", "tester"}
	want := map[string]string{} // event id -> task id
	var ids []string
	for i := range 1000 {
		taskID := fmt.Sprintf("T-%d", i)
		// An extra prompt of its own makes each body differ beyond its ids.
		id := h.submit(fmt.Sprintf(`{"task_id":%q,"role":%q,"overrides":{"extra_prompt":"Ticket %s."}}`, taskID, roles[i%len(roles)], taskID), i%2 == 0)
		want[id] = taskID
		ids = append(ids, id)
	}
	outs := h.waitOutcomes(len(ids), 60*time.Second)
	exactlyOnce(t, ids, outs)
	for _, o := range outs {
		id := causation(o.ev)
		var data events.ResolvedData
		if err := json.Unmarshal(o.ev.Data(), &data); err != nil {
			t.Fatalf("outcome of %s: %v", id, err)
		}
		if data.TaskID != want[id] || !strings.HasSuffix(data.PromptBody, "Ticket "+want[id]+".") {
			t.Fatalf("outcome of %s (task %s) holds task %q with a prompt ending %q", id, want[id], data.TaskID, tail(data.PromptBody, 20))
		}
	}
}

func tail(s string, n int) string { return s[max(len(s)-n, 0):] }
