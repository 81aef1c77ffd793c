package pipeline_test

import (
	"context"
	"errors"
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
