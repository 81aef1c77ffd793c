package reliability_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer collects a process's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is one child process with its output kept in memory.
type proc struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{}
	state  *os.ProcessState
}

type procOpts struct {
	env  []string // added to a clean environment
	cred *syscall.Credential
	dir  string
}

// cleanEnv is the test's environment without the variables that would
// reconfigure the worker behind the test's back.
func cleanEnv(extra []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ROLECALL_") || strings.HasPrefix(kv, "OTEL_") || strings.HasPrefix(kv, "NATS_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

func startProc(t testing.TB, name, path string, args []string, opt procOpts) *proc {
	t.Helper()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = cleanEnv(opt.env)
	p.cmd.Dir = opt.dir
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if opt.cred != nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: opt.cred}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- %s (pid %d) stderr, last 6 KiB:\n%s", name, p.cmd.Process.Pid, tail(p.stderr.String(), 6<<10))
			if out := p.stdout.String(); out != "" {
				t.Logf("--- %s stdout, last 2 KiB:\n%s", name, tail(out, 2<<10))
			}
		}
	})
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL (kill -9) and waits for the process to be gone.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// terminate sends SIGTERM and waits up to d, then kills.
func (p *proc) terminate(d time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		if !p.state.Success() {
			return fmt.Errorf("%s exited with %v", p.name, p.state)
		}
		return nil
	case <-time.After(d):
		p.kill()
		return fmt.Errorf("%s did not exit within %s of SIGTERM", p.name, d)
	}
}

// logs is everything the process wrote, stdout then stderr.
func (p *proc) logs() string { return p.stdout.String() + p.stderr.String() }

// statusKB reads a "Vm…:" line of /proc/<pid>/status in KiB (VmHWM is the
// peak resident set: the memory bound the suite asserts).
func (p *proc) statusKB(field string) int64 {
	p.t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		p.t.Fatalf("%s: %v", p.name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				p.t.Fatalf("%s: %s: %v", p.name, field, err)
			}
			return kb
		}
	}
	p.t.Fatalf("%s: no %s in /proc/%d/status", p.name, field, p.pid())
	return 0
}

// maxRSSKB is the peak resident set of an exited process (getrusage).
func (p *proc) maxRSSKB() int64 {
	if ru, ok := p.state.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}

// wait waits for the process to exit on its own, up to d.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return nil
	case <-time.After(d):
		p.kill()
		return fmt.Errorf("%s still running after %s (killed)", p.name, d)
	}
}

// freePort asks the kernel for an unused loopback port.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// openDir is a directory any uid can enter, for workers started as
// another user; t.TempDir's directories are 0700.
func openDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp(bin.dir, "t-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// natsServer is a separately started nats-server with its own store.
type natsServer struct {
	t      testing.TB
	dir    string
	port   int
	scheme string // nats or tls
	conf   string
	proc   *proc
	starts int
}

// startNATS starts nats-server with JetStream on a free port; extra is
// appended to its configuration file (auth, TLS, accounts).
func startNATS(t testing.TB, extra string) *natsServer {
	t.Helper()
	return startNATSWith(t, "", extra)
}

// startNATSWith also adds jsExtra inside the jetstream block.
func startNATSWith(t testing.TB, jsExtra, extra string) *natsServer {
	t.Helper()
	s := &natsServer{t: t, dir: openDir(t), port: freePort(t), scheme: "nats"}
	s.conf = filepath.Join(s.dir, "nats.conf")
	body := fmt.Sprintf("server_name: rc-test-%d\nlisten: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n  %s\n}\n%s\n",
		s.port, s.port, filepath.Join(s.dir, "store"), jsExtra, extra)
	if err := os.WriteFile(s.conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s.start()
	return s
}

func (s *natsServer) url() string { return fmt.Sprintf("%s://127.0.0.1:%d", s.scheme, s.port) }

// start runs the server on its store and waits for "Server is ready".
func (s *natsServer) start() {
	s.t.Helper()
	s.starts++
	s.proc = startProc(s.t, fmt.Sprintf("nats-server#%d", s.starts), bin.natsServer, []string{"-c", s.conf}, procOpts{})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(s.proc.stderr.String(), "Server is ready") {
		if s.proc.exited() || time.Now().After(deadline) {
			s.t.Fatalf("nats-server did not become ready:\n%s", s.proc.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// kill9 kills the server with SIGKILL; restart starts it again on the
// same store and port.
func (s *natsServer) kill9()   { s.proc.kill() }
func (s *natsServer) restart() { s.start() }

// worker is the real worker binary, running `worker run`.
type worker struct {
	*proc
	httpAddr string
}

type readiness struct {
	code          int
	NATSConnected bool    `json:"nats_connected"`
	ConsumerBound bool    `json:"consumer_bound"`
	Snapshot      string  `json:"snapshot"`
	SnapshotError *string `json:"snapshot_error"`
	Ready         bool    `json:"ready"`
}

type workerOpts struct {
	name string
	args []string // after `run --nats URL --root ROOT --http ADDR`
	env  []string
	cred *syscall.Credential
	// noWait returns at once instead of waiting for /readyz to say ready.
	noWait bool
}

func startWorker(t testing.TB, natsURL, root string, o workerOpts) *worker {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	args := []string{"run", "--root", root, "--http", addr}
	if natsURL != "" {
		args = append(args, "--nats", natsURL)
	}
	args = append(args, o.args...)
	if o.name == "" {
		o.name = "worker"
	}
	w := &worker{proc: startProc(t, o.name, bin.worker, args, procOpts{env: o.env, cred: o.cred}), httpAddr: addr}
	if !o.noWait {
		w.waitReady(30 * time.Second)
	}
	return w
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

// readyz asks the worker's /readyz; ok is false when it did not answer.
func (w *worker) readyz() (readiness, bool) {
	resp, err := httpClient.Get("http://" + w.httpAddr + "/readyz")
	if err != nil {
		return readiness{}, false
	}
	defer resp.Body.Close()
	var r readiness
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &r); err != nil {
		w.t.Fatalf("%s: /readyz is not JSON: %v: %s", w.name, err, body)
	}
	r.code = resp.StatusCode
	return r, true
}

func (w *worker) waitReady(within time.Duration) readiness {
	w.t.Helper()
	return w.waitReadiness(within, "ready", func(r readiness) bool { return r.code == http.StatusOK && r.Ready })
}

// waitReadiness polls /readyz until cond holds.
func (w *worker) waitReadiness(within time.Duration, what string, cond func(readiness) bool) readiness {
	w.t.Helper()
	deadline := time.Now().Add(within)
	var last readiness
	for {
		if w.exited() {
			w.t.Fatalf("%s exited (%v) while waiting for %s", w.name, w.state, what)
		}
		if r, ok := w.readyz(); ok {
			last = r
			if cond(r) {
				return r
			}
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: not %s within %s; last /readyz %+v", w.name, what, within, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runWorkerCmd runs a one-shot subcommand (resolve, validate, …) of the
// worker binary and returns its exit code with the finished process.
func runWorkerCmd(t testing.TB, within time.Duration, stdin []byte, args ...string) (int, *proc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	p := &proc{t: t, name: "worker " + strings.Join(args, " "), done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin.worker, args...)
	p.cmd.Env = cleanEnv(nil)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if stdin != nil {
		p.cmd.Stdin = bytes.NewReader(stdin)
	}
	err := p.cmd.Run()
	p.state = p.cmd.ProcessState
	close(p.done)
	if ctx.Err() != nil {
		t.Fatalf("%s: did not finish within %s", p.name, within)
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", p.name, err)
	}
	return p.state.ExitCode(), p
}
