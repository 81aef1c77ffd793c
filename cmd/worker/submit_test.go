package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
)

// TestSubmitWaitNamesMissingOutcomes: when --wait times out, the message
// names every task without an outcome and what to check, and the exit
// status is 1.
func TestSubmitWaitNamesMissingOutcomes(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	// The streams exist; no worker consumes.
	if _, err := pipeline.Ensure(context.Background(), js, pipeline.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	tasks := filepath.Join("..", "..", "examples", "tasks")
	var stdout, stderr syncBuffer
	code := runContext(context.Background(), []string{"submit", "--nats", srv.ClientURL(), "--wait", "--timeout", "300ms",
		filepath.Join(tasks, "incident.json"), filepath.Join(tasks, "architect.json")}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr.String())
	}
	want := regexp.MustCompile(`^worker: no outcome within 300ms for 2 of 2 tasks: \S+incident.json \(rolecall-cli/[0-9a-f]{24}\), \S+architect.json \(rolecall-cli/[0-9a-f]{24}\) \(is a worker running\? worker tail shows outcomes as they arrive\)\n$`)
	if !want.MatchString(stderr.String()) {
		t.Errorf("stderr %q, want it to match %s", stderr.String(), want)
	}
	if stdout.String() != "" {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
}

// TestSubmitWithoutStreamSaysWhy: before any worker created the tasks
// stream, a publish has no taker; the error says so.
func TestSubmitWithoutStreamSaysWhy(t *testing.T) {
	srv := natstest.Start(t)
	var stdout, stderr syncBuffer
	code := runContext(context.Background(), []string{"submit", "--nats", srv.ClientURL(), filepath.Join("..", "..", "examples", "tasks", "incident.json")},
		strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "a worker creates the tasks stream when it starts") {
		t.Errorf("exit %d, stderr %q; want 1 and the reason", code, stderr.String())
	}
}

// TestSubmitWaitRefusesTimeoutNotPositive: --wait with a timeout of 0 is
// a usage error (exit 2) and publishes nothing; it used to publish the
// task and then fail at once for want of its outcome.
func TestSubmitWaitRefusesTimeoutNotPositive(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	if _, err := pipeline.Ensure(context.Background(), js, pipeline.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	code := runContext(context.Background(), []string{"submit", "--nats", srv.ClientURL(), "--wait", "--timeout=0s",
		filepath.Join("..", "..", "examples", "tasks", "incident.json")}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "worker: --timeout 0s: --wait needs a positive timeout") {
		t.Errorf("exit %d, stderr %q; want 2 and the reason", code, stderr.String())
	}
	st, err := js.Stream(context.Background(), pipeline.DefaultConfig().TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("the tasks stream holds %d message(s), want 0: the task was published", n)
	}
}

// TestSubmitChecksEveryTaskBeforePublishing: a task that cannot be sent
// (here a file that is not JSON) fails the submission before any task is
// published; the good tasks before it used to be sent, and a second run
// after fixing the file sent them again under new ids.
func TestSubmitChecksEveryTaskBeforePublishing(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	if _, err := pipeline.Ensure(context.Background(), js, pipeline.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"role":"analyst"`), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr syncBuffer
	code := runContext(context.Background(), []string{"submit", "--nats", srv.ClientURL(),
		filepath.Join("..", "..", "examples", "tasks", "incident.json"), bad}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "bad.json: encode task event") {
		t.Errorf("exit %d, stderr %q; want 2 and the bad file named", code, stderr.String())
	}
	st, err := js.Stream(context.Background(), pipeline.DefaultConfig().TasksStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 0 {
		t.Errorf("the tasks stream holds %d message(s), want 0; stdout %q", n, stdout.String())
	}
}

// TestSubmitRefusesSubjectsNotLiteral: a --subject or --prefix that makes
// no literal subject (a space, a wildcard, an empty token) is a usage
// error before anything is published; it used to fail at the publish, a
// wildcard with a message blaming a missing stream.
func TestSubmitRefusesSubjectsNotLiteral(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	if _, err := pipeline.Ensure(context.Background(), js, pipeline.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	task := filepath.Join("..", "..", "examples", "tasks", "incident.json")
	for _, flag := range []string{"--subject=rolecall.tasks.*", "--subject=rolecall.tasks.>", "--subject=a b", "--subject=a..b", "--prefix=a b", "--prefix=x.>"} {
		var stdout, stderr syncBuffer
		code := runContext(context.Background(), []string{"submit", "--nats", srv.ClientURL(), flag, task}, strings.NewReader(""), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "is not a literal NATS subject") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and the reason", flag, code, stderr.String())
		}
	}
}

// TestSubmitWaitInterruptedNamesMissingOutcomes: an interrupted --wait
// names the tasks without an outcome, as a timeout does; it printed
// "context canceled".
func TestSubmitWaitInterruptedNamesMissingOutcomes(t *testing.T) {
	c := &submitCmd{Source: "src", Timeout: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := c.wait(ctx, &globals{stdout: io.Discard}, []submission{{from: "a.json", id: "1"}}, &outcomeWaiter{ch: make(chan *nats.Msg)})
	want := "interrupted: no outcome yet for 1 of 1 tasks: a.json (src/1) (the tasks were published; worker tail shows outcomes as they arrive)"
	if err == nil || err.Error() != want {
		t.Errorf("err %v, want %s", err, want)
	}
}

// TestSubmitWaitAmidOtherOutcomes: --wait finds its outcome among many
// others of a busy fleet; it subscribed to every outcome with a buffer of
// 64, so a burst of others made the client drop its own, and it timed
// out.
func TestSubmitWaitAmidOtherOutcomes(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	js := natstest.JetStream(t, nc)
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	var stdout, stderr syncBuffer
	go func() {
		done <- runContext(context.Background(), []string{"submit", "--nats", srv.ClientURL(), "--wait", "--timeout", "10s", "--id", "mine",
			filepath.Join("..", "..", "examples", "tasks", "incident.json")}, strings.NewReader(""), &stdout, &stderr)
	}()
	// submit subscribes before it publishes: once the task is in, the
	// outcomes flow.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st, err := js.Stream(context.Background(), cfg.TasksStream)
		if err == nil && st.CachedInfo().State.Msgs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no task published: %v\n%s", err, stderr.String())
		}
	}
	outcome := func(id string) *nats.Msg {
		return &nats.Msg{Subject: "rolecall.specs.resolved.other", Data: []byte(`{"a":"ok"}`), Header: nats.Header{nats.MsgIdHdr: {id},
			"ce-specversion": {"1.0"}, "ce-id": {id}, "ce-source": {"rolecall"}, "ce-type": {events.TypeSpecResolved}, "content-type": {"application/json"}}}
	}
	for i := range 40000 {
		if i == 20000 {
			if err := nc.PublishMsg(outcome(events.OutcomeID("rolecall-cli", "mine"))); err != nil {
				t.Fatal(err)
			}
		}
		if err := nc.PublishMsg(outcome(fmt.Sprintf("other-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 0 || !strings.Contains(stdout.String(), `"a": "ok"`) {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, stdout.String(), stderr.String())
	}
}

// TestSubmitWaitAgainFindsTheOutcome: the same event submitted again with
// --wait prints the outcome it already has. The worker answers a re-sent
// event with no second outcome (the tasks stream drops it within its
// duplicate window, the outcome store after), so --wait, which only
// listened for new outcomes, waited out its timeout.
func TestSubmitWaitAgainFindsTheOutcome(t *testing.T) {
	srv := natstest.Start(t)
	startWorker(t, "--root", filepath.Join("..", "..", "examples"), "--nats", srv.ClientURL(), "--service=false", "--audit=false", "--http", "")
	task := filepath.Join("..", "..", "examples", "tasks", "incident.json")
	var first string
	for i := range 2 {
		var stdout, stderr syncBuffer
		start := time.Now()
		code := runContext(context.Background(), []string{"submit", "--nats", srv.ClientURL(), "--wait", "--timeout", "20s", "--id", "again", task},
			strings.NewReader(""), &stdout, &stderr)
		if code != 0 || !strings.Contains(stdout.String(), `"type": "dev.rolecall.agentspec.resolved.v1"`) || time.Since(start) > 10*time.Second {
			t.Fatalf("submit %d: exit %d after %s\nstdout %s\nstderr %s", i+1, code, time.Since(start).Round(time.Millisecond), stdout.String(), stderr.String())
		}
		if i == 0 {
			first = stdout.String()
		} else if stdout.String() != first {
			t.Errorf("second submit printed\n%s\nwant the first outcome again:\n%s", stdout.String(), first)
		}
	}
}

// TestSubmitWaitLooksAgainAfterAReconnect: an outcome that never reached
// --wait's subscription (published while its connection was
// reconnecting) is found in the outcome store after the reconnect.
func TestSubmitWaitLooksAgainAfterAReconnect(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	js := natstest.JetStream(t, nc)
	ctx := context.Background()
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	store, err := pipeline.OpenOutcomes(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := events.OutcomeID("src", "1")
	reconnected := make(chan struct{}, 1)
	w := &outcomeWaiter{want: map[string]bool{id: true}, ch: make(chan *nats.Msg, 1), store: store, reconnected: reconnected}
	var stdout syncBuffer
	c := &submitCmd{Source: "src", Timeout: 20 * time.Second}
	done := make(chan error, 1)
	go func() { done <- c.wait(ctx, &globals{stdout: &stdout}, []submission{{from: "a.json", id: "1"}}, w) }()

	// The outcome is stored and recorded, but not sent to the waiter.
	time.Sleep(100 * time.Millisecond)
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: "rolecall.specs.resolved.architect", Data: []byte(`{"a":"ok"}`), Header: nats.Header{
		nats.MsgIdHdr: {id}, "ce-specversion": {"1.0"}, "ce-id": {id}, "ce-source": {"rolecall"},
		"ce-type": {events.TypeSpecResolved}, "content-type": {"application/json"}}})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, cfg.OutcomesBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, id, fmt.Sprintf(`{"seq":%d,"subject":"rolecall.specs.resolved.architect"}`, ack.Sequence)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("wait ended before the reconnect: %v, stdout %q", err, stdout.String())
	case <-time.After(300 * time.Millisecond):
	}
	reconnected <- struct{}{}
	select {
	case err := <-done:
		if err != nil || !strings.Contains(stdout.String(), `"a": "ok"`) {
			t.Errorf("err %v, stdout %q; want the stored outcome", err, stdout.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the outcome in the store was not found after the reconnect")
	}
}
