package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
)

// publishOutcome puts one binary-mode outcome event with body data on
// the outcome stream.
func publishOutcome(t *testing.T, js jetstream.JetStream, id string, data []byte) {
	t.Helper()
	h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {id}, "ce-source": {"test"},
		"ce-type": {"dev.rolecall.agentspec.resolved.v1"}, "content-type": {"application/json"}}
	if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: "rolecall.specs.test", Header: h, Data: data}); err != nil {
		t.Fatal(err)
	}
}

// TestTailPrintsNoControlCharacters: an outcome whose data holds a raw
// escape sequence (invalid JSON that the binary-mode decoder lets
// through) is skipped with a warning, and a C1 control (valid JSON) is
// printed escaped; both used to reach the terminal raw. Skipped messages
// do not count towards --count: --count 1 used to exit after one of them
// without printing any event.
func TestTailPrintsNoControlCharacters(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	if _, err := pipeline.Ensure(context.Background(), js, pipeline.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	url := srv.ClientURL()
	publishOutcome(t, js, "rc-raw", []byte("{\"a\":\"\x1b]0;owned\x07\x1b[2J\"}"))
	publishOutcome(t, js, "rc-c1", []byte("{\"a\":\"\u009b31m\"}"))
	publishOutcome(t, js, "rc-ok", []byte(`{"a":"ok"}`))

	var stdout, stderr syncBuffer
	code := runContext(context.Background(), []string{"tail", "--nats", url, "--from-start", "--count", "2"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	out := stdout.String()
	if strings.ContainsAny(out, "\x1b\x07\u009b") {
		t.Errorf("stdout holds a raw control character: %q", out)
	}
	if !strings.Contains(out, `"id":"rc-c1"`) || !strings.Contains(out, `\u009b31m`) {
		t.Errorf("stdout %q, want rc-c1 with its C1 control escaped", out)
	}
	if !strings.Contains(out, `"id":"rc-ok"`) {
		t.Errorf("stdout %q, want rc-ok: the skipped message counted towards --count", out)
	}
	if !strings.Contains(stderr.String(), "undecodable message") {
		t.Errorf("stderr %q, want a warning about rc-raw", stderr.String())
	}
}

// TestTailRefusesBadFlags: a negative --count and a filter that is no
// NATS subject are usage errors (exit 2) before connecting; --count -1
// used to exit 0 at once, and a bad filter was exit 1 with the client's
// error.
func TestTailRefusesBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--count=-1"}, {"--subject=a b"}, {"--subject=a..b"}, {"--prefix=x y"}} {
		var stdout, stderr syncBuffer
		// Nothing listens on port 1: a flag checked after connecting
		// fails with exit 1.
		code := runContext(context.Background(), append([]string{"tail", "--nats", "nats://127.0.0.1:1"}, args...), strings.NewReader(""), &stdout, &stderr)
		if code != 2 {
			t.Errorf("%v: exit %d, stderr %q; want 2", args, code, stderr.String())
		}
	}
}

// TestTailSaysWhatIsMissing: a stream that does not exist is named
// without the client's API error, and a filter no subject of the stream
// matches is a usage error; it used to wait forever in silence.
func TestTailSaysWhatIsMissing(t *testing.T) {
	srv := natstest.Start(t)
	url := srv.ClientURL()
	var stdout, stderr syncBuffer
	code := runContext(context.Background(), []string{"tail", "--nats", url, "--stream", "NOPE"}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || stderr.String() != "worker: tail: no stream NOPE (a worker creates it when it starts; --stream names another)\n" {
		t.Errorf("no stream: exit %d, stderr %q", code, stderr.String())
	}
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	if _, err := pipeline.Ensure(context.Background(), js, pipeline.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stderr = syncBuffer{}
	code = runContext(ctx, []string{"tail", "--nats", url, "--subject", "other.>"}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--subject other.>: stream ROLECALL_SPECS holds only rolecall.specs.>") {
		t.Errorf("filter outside the stream: exit %d, stderr %q", code, stderr.String())
	}
	// A wildcard inside the stream's subjects is fine.
	publishOutcome(t, js, "rc-ok", []byte(`{"a":"ok"}`))
	stderr = syncBuffer{}
	code = runContext(ctx, []string{"tail", "--nats", url, "--subject", "rolecall.*.test", "--from-start", "--count", "1"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), `"id":"rc-ok"`) {
		t.Errorf("wildcard filter: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestSubmitWaitPrintsNoControlCharacters: submit --wait prints an
// outcome's C1 controls escaped (they reached the terminal raw), and an
// outcome whose data is no JSON is a decode error that says so (it was
// the JSON encoder's error about the event type).
func TestSubmitWaitPrintsNoControlCharacters(t *testing.T) {
	c := &submitCmd{Source: "src", Timeout: 5 * time.Second}
	tasks := []submission{{from: "task.json", id: "1"}}
	msg := func(data string) *nats.Msg {
		return &nats.Msg{Header: nats.Header{nats.MsgIdHdr: {events.OutcomeID("src", "1")},
			"ce-specversion": {"1.0"}, "ce-id": {events.OutcomeID("src", "1")}, "ce-source": {"rolecall"},
			"ce-type": {events.TypeSpecResolved}, "content-type": {"application/json"}}, Data: []byte(data)}
	}

	ch := make(chan *nats.Msg, 1)
	ch <- msg("{\"a\":\"\u009b31m\"}")
	var stdout bytes.Buffer
	g := &globals{stdout: &stdout}
	if err := c.wait(context.Background(), g, tasks, &outcomeWaiter{ch: ch}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout.String(), "\u009b") || !strings.Contains(stdout.String(), `"a": "\u009b31m"`) {
		t.Errorf("stdout %q, want the C1 control escaped", stdout.String())
	}

	ch <- msg("{\"a\":\"\x1b[2J\"}")
	stdout.Reset()
	err := c.wait(context.Background(), g, tasks, &outcomeWaiter{ch: ch})
	if err == nil || !strings.Contains(err.Error(), "task.json: decode outcome: event_invalid: data is not valid JSON") || stdout.Len() > 0 {
		t.Errorf("err %v, stdout %q; want the outcome refused", err, stdout.String())
	}
}

// TestTailOnASourcingStream: a stream that sources others may hold any
// subject, so a filter outside its own subjects is not refused.
func TestTailOnASourcingStream(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pipeline.Ensure(ctx, js, pipeline.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AGG", Subjects: []string{"agg.>"}, Sources: []*jetstream.StreamSource{{Name: pipeline.DefaultConfig().SpecsStream}}}); err != nil {
		t.Fatal(err)
	}
	publishOutcome(t, js, "rc-ok", []byte(`{"a":"ok"}`))
	var stdout, stderr syncBuffer
	code := runContext(ctx, []string{"tail", "--nats", srv.ClientURL(), "--stream", "AGG", "--from-start", "--count", "1"}, strings.NewReader(""), &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), `"id":"rc-ok"`) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestTailEndsWhenItsStreamIsDeleted: tail ends (exit 1) naming its
// stream when the stream is deleted under it; it waited in silence
// forever.
func TestTailEndsWhenItsStreamIsDeleted(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	publishOutcome(t, js, "rc-ok", []byte(`{"a":"ok"}`))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan int, 1)
	var stdout, stderr syncBuffer
	go func() {
		done <- runContext(ctx, []string{"tail", "--nats", srv.ClientURL(), "--from-start"}, strings.NewReader(""), &stdout, &stderr)
	}()
	for !strings.Contains(stdout.String(), `"id":"rc-ok"`) {
		if ctx.Err() != nil {
			t.Fatalf("tail printed nothing\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := js.DeleteStream(context.Background(), cfg.SpecsStream); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 1 || !strings.Contains(stderr.String(), "worker: tail: stream ROLECALL_SPECS was deleted") {
		t.Errorf("exit %d (ctx %v), stderr %q", code, ctx.Err(), stderr.String())
	}
}
