package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/telemetry"
)

// syncBuffer is a log sink the client's goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSlowConsumerWarningsAreThrottled: a burst of slow-consumer reports
// is logged once per interval, the next line saying how many were left
// out, while the counter sees every report. Other errors are logged each
// time.
func TestSlowConsumerWarningsAreThrottled(t *testing.T) {
	var buf syncBuffer
	log := telemetry.NewLogger(&buf, slog.LevelInfo, true)
	var counted atomic.Int64
	clock := time.Unix(1_700_000_000, 0)
	h := asyncErrorsAt(log, func(context.Context) { counted.Add(1) }, func() time.Time { return clock })

	for range 1000 {
		h(nil, nil, nats.ErrSlowConsumer)
		clock = clock.Add(time.Millisecond) // a burst of one second
	}
	clock = clock.Add(slowConsumerEvery)
	h(nil, nil, nats.ErrSlowConsumer)
	h(nil, nil, errors.New("permissions violation"))
	h(nil, nil, errors.New("permissions violation"))

	if n := counted.Load(); n != 1001 {
		t.Errorf("counted %d slow consumers, want 1001", n)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var slow []string
	others := 0
	for _, l := range lines {
		switch {
		case strings.Contains(l, "nats slow consumer"):
			slow = append(slow, l)
		case strings.Contains(l, "permissions violation"):
			others++
		}
	}
	if len(slow) != 2 {
		t.Fatalf("%d slow-consumer lines for 1001 reports over %s, want 2:\n%s", len(slow), slowConsumerEvery, buf.String())
	}
	if strings.Contains(slow[0], "suppressed") || !strings.Contains(slow[1], `"suppressed":999`) {
		t.Errorf("want the second line to count the 999 left out:\n%s\n%s", slow[0], slow[1])
	}
	if others != 2 {
		t.Errorf("%d lines for 2 other errors, want 2", others)
	}
}

// TestSlowConsumerIsCountedOnARealConnection: the handler connect installs
// sees the client's own slow-consumer reports.
func TestSlowConsumerIsCountedOnARealConnection(t *testing.T) {
	srv := natstest.Start(t)
	var buf syncBuffer
	log := telemetry.NewLogger(&buf, slog.LevelInfo, true)
	var counted atomic.Int64
	nc, err := natsFlags{NATS: srv.ClientURL()}.connect("slow-test", log, nats.ErrorHandler(asyncErrors(log, func(context.Context) { counted.Add(1) })))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	release := make(chan struct{})
	sub, err := nc.Subscribe("slow", func(*nats.Msg) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	defer close(release)
	if err := sub.SetPendingLimits(1, 1<<20); err != nil {
		t.Fatal(err)
	}
	pub := natstest.Connect(t, srv)
	for range 50 {
		if err := pub.Publish("slow", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	// The handler counts a report before it logs it, so wait for both.
	deadline := time.Now().Add(5 * time.Second)
	for (counted.Load() == 0 || !strings.Contains(buf.String(), "nats slow consumer")) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if counted.Load() == 0 {
		t.Fatal("no slow consumer counted")
	}
	if n := strings.Count(buf.String(), "nats slow consumer"); n != 1 {
		t.Errorf("%d slow-consumer lines, want 1:\n%s", n, buf.String())
	}
}

// TestConnectErrorHidesURLCredentials: a server URL that does not parse
// fails with its fault, never with the URL and the password in it.
func TestConnectErrorHidesURLCredentials(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, u := range []string{
		"nats://u:s3cret@127.0.0.1:xx",
		"nats://u:s3cret@[::1",
		"nats://u:s3cret%zz@127.0.0.1:1",
		"nats://127.0.0.1:1,nats://u:s3cret@127.0.0.1:xx",
	} {
		nc, err := natsFlags{NATS: u}.connect("test", log)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error shows the password: %v", u, err)
		}
		if !strings.Contains(err.Error(), "malformed server URL") {
			t.Errorf("%s: error %q does not say the URL is malformed", u, err)
		}
	}
}

// TestPasswordNeedsAUser: a password without a user (--user,
// ROLECALL_NATS_USER, nats.user, or the server URL's) is a usage error
// before anything starts; connect ignored it without a word. A password
// that goes with a user still connects.
func TestPasswordNeedsAUser(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "ana", "s3cret" })
	url := srv.ClientURL()
	t.Setenv("ROLECALL_NATS_PASSWORD", "s3cret")
	withUser := t.TempDir()
	writeRootFile(t, withUser, "rolecall.yaml", "nats:\n  user: ana\n")
	store := filepath.Join(t.TempDir(), "store")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"tail", "--nats", url, "--stream", "NOPE"}, 2},
		{[]string{"config", "log", "--nats", url}, 2},
		{[]string{"explain", "--root", t.TempDir(), "--nats", url, "--id", "x"}, 2},
		{[]string{"run", "--root", t.TempDir(), "--store", store, "--listen", freeAddr(t)}, 2},
		{[]string{"run", "--root", t.TempDir(), "--store", store, "--nats", url}, 2},
		// With a user, the password is used: the server lets tail in.
		{[]string{"tail", "--nats", url, "--user", "ana", "--stream", "NOPE"}, 1},
		{[]string{"tail", "--nats", strings.Replace(url, "nats://", "nats://ana:s3cret@", 1), "--stream", "NOPE"}, 1},
		{[]string{"explain", "--root", withUser, "--nats", url, "--id", "x"}, 1},
	} {
		var stdout, stderr syncBuffer
		// Bounded: a worker that takes the password runs until stopped.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		code := runContext(ctx, c.args, strings.NewReader(""), &stdout, &stderr)
		cancel()
		if code != c.code {
			t.Errorf("%v: exit %d, want %d\nstdout %s\nstderr %s", c.args, code, c.code, stdout.String(), stderr.String())
		}
		if needs := strings.Contains(stderr.String(), "worker: --password (or ROLECALL_NATS_PASSWORD, nats.password) needs a user"); needs != (c.code == 2) {
			t.Errorf("%v: stderr %q", c.args, stderr.String())
		}
		if strings.Contains(stderr.String(), "uthorization") {
			t.Errorf("%v: the server refused the password: %s", c.args, stderr.String())
		}
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("the store %s exists (%v): run went on starting", store, err)
	}
}
