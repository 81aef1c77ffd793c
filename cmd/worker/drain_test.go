package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
)

// TestSIGTERMDrainsUnderLoad runs the built binary with its embedded
// server, sends SIGTERM while tasks are flowing, and checks that it exits 0
// with no task left delivered-but-unacknowledged, and that every task it
// acknowledged has its outcome.
func TestSIGTERMDrainsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the worker binary; skipped with -short")
	}
	dir := t.TempDir()
	bin := buildWorker(t, dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	var stderr strings.Builder
	cmd := exec.Command(bin, "run", "--root", "../../examples", "--listen", addr, "--store", filepath.Join(dir, "nats"), "--concurrency", "4")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})

	var nc *nats.Conn
	for deadline := time.Now().Add(20 * time.Second); ; {
		if nc, err = nats.Connect("nats://" + addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker's embedded server never came up: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := js.Consumer(ctx, "ROLECALL_TASKS", "rolecall-workers"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer never appeared\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	const n = 3000
	for i := 0; i < n; i++ {
		hdr, body, err := events.EncodeTask("drain-test", fmt.Sprint("d-", i), []byte(fmt.Sprintf(`{"task_id":"D-%d","role":"architect"}`, i)), "", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: "rolecall.tasks.drain", Header: hdr, Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("task publishes not acknowledged")
	}
	specs, err := js.Stream(ctx, "ROLECALL_SPECS")
	if err != nil {
		t.Fatal(err)
	}
	// SIGTERM once the worker is busy, well before it is done.
	for {
		info, err := specs.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= 100 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("worker exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("worker did not drain within 40s\n%s", stderr.String())
	}
	// The embedded server went down with the worker: reopen the store with
	// a fresh worker process and check the state it left.
	if !strings.Contains(stderr.String(), "worker stopped") {
		t.Errorf("no 'worker stopped' line in the log:\n%s", stderr.String())
	}
	nc.Close()

	cmd2 := exec.Command(bin, "run", "--root", "../../examples", "--listen", addr, "--store", filepath.Join(dir, "nats"), "--concurrency", "4")
	var stderr2 strings.Builder
	cmd2.Stderr = &stderr2
	if err := cmd2.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd2.Process.Signal(syscall.SIGTERM)
		_ = cmd2.Wait()
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if nc, err = nats.Connect("nats://" + addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("second worker never came up: %v\n%s", err, stderr2.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer nc.Close()
	js, _ = jetstream.New(nc)
	specs, err = js.Stream(ctx, "ROLECALL_SPECS")
	if err != nil {
		t.Fatal(err)
	}
	// The successor finishes the rest: exactly one outcome per task.
	var info *jetstream.StreamInfo
	for deadline := time.Now().Add(60 * time.Second); ; {
		if info, err = specs.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Give a would-be duplicate time to land, then count per task.
	time.Sleep(500 * time.Millisecond)
	cons, err := specs.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for len(seen) < n {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			ev, err := events.DecodeOutcome(m.Headers(), m.Data())
			if err != nil {
				t.Fatal(err)
			}
			id, _ := ev.Extensions()["taskid"].(string)
			seen[id]++
		}
		if got == 0 {
			break
		}
	}
	for i := 0; i < n; i++ {
		if c := seen[fmt.Sprint("D-", i)]; c != 1 {
			t.Errorf("task D-%d has %d outcomes, want 1", i, c)
		}
	}
}

// buildWorker builds the worker binary into dir.
func buildWorker(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "worker")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		t.Fatalf("go build: %v", err)
	}
	return bin
}

// TestSecondSignalEndsTheDrain: a second SIGTERM during a drain ends the
// process at once. Here the drain waits for a broker that has gone silent
// while the connection stays up (a partition; the client notices only at
// its next ping), so it would take nats.go's 10 s flush; the operator who
// signals again does not wait.
func TestSecondSignalEndsTheDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the worker binary; skipped with -short")
	}
	bin := buildWorker(t, t.TempDir())
	srv := natstest.Start(t)
	addr, freeze := silentProxy(t, srv.Addr().String())
	var stderr syncBuffer
	cmd := exec.Command(bin, "run", "--root", "../../examples", "--nats", "nats://"+addr, "--service=false", "--audit=false", "--drain-timeout", "60s")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitLog := func(line string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !strings.Contains(stderr.String(), line); {
			if time.Now().After(deadline) {
				t.Fatalf("no %q line in the log:\n%s", line, stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Up: its consumer exists. Then the broker goes silent.
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := js.Consumer(context.Background(), "ROLECALL_TASKS", "rolecall-workers"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer never appeared\n%s", stderr.String())
		}
	}
	freeze()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitLog("draining")
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-exited:
		t.Fatalf("the drain ended by itself (%v): nothing held it, so the second signal is not tested\n%s", err, stderr.String())
	default:
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("exit after the second SIGTERM: %v, want killed by SIGTERM\n%s", err, stderr.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the worker still ran 5s after a second SIGTERM\n%s", stderr.String())
	}
}

// silentProxy forwards TCP connections to target until freeze is called;
// from then on it passes nothing either way and keeps the connections
// open, as a partitioned broker looks to its clients.
func silentProxy(t *testing.T, target string) (addr string, freeze func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	frozen, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	pipe := func(dst, src net.Conn) {
		defer dst.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-frozen:
				<-done
				return
			default:
			}
			if err != nil {
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go pipe(s, c)
			go pipe(c, s)
		}
	}()
	return ln.Addr().String(), sync.OnceFunc(func() { close(frozen) })
}
