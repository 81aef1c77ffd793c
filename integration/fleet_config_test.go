package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/bundle"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/integration/images"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
)

// TestFleetConfigBundles runs three worker processes with --config-from
// nats against an embedded 3-node cluster (no containers: the bundles are
// what is under test, and the binary is the one users run) and walks a
// bundle's life: push, a stale push refused, a bad bundle refused by the
// workers without losing a task, rollback, and a worker that starts while
// NATS holds a bundle.
func TestFleetConfigBundles(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	ctx := context.Background()
	cl := natstest.StartCluster(t, 3)
	urls := make([]string, 3)
	for i, s := range cl.Servers {
		urls[i] = s.ClientURL()
	}
	bin := buildWorker(t)
	nc, err := nats.Connect(strings.Join(urls, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	outs := collectOutcomes(t, nc)

	root := copyExamples(t)
	r1 := pushCLI(t, bin, urls[0], root, "first")

	// Three workers, one per node.
	ports := natstest.FreePorts(t, 4)
	var fleet []*procWorker
	for i := range 3 {
		fleet = append(fleet, startProcWorker(t, bin, urls[i], ports[i], fmt.Sprintf("w%d", i+1)))
	}
	for _, w := range fleet {
		w.waitRevision(t, r1.Revision, 60*time.Second)
	}
	before := runTasks(t, ctx, js, outs, "a", 12)
	for id, o := range before {
		if o.revision != strconv.FormatUint(r1.Revision, 10) {
			t.Fatalf("task %s: outcome cites revision %q, want %d", id, o.revision, r1.Revision)
		}
	}

	// The 2 s bound below is a steady-state figure: the streams the
	// workers created at start (R3, three workers at once) settle first,
	// or a replica still catching up times the broker, not the workers.
	cl.WaitStreamsCurrent(js)

	// Push while tasks keep arriving: every worker serves the new revision
	// within 2 s, and each task in flight gets one outcome, from the old
	// snapshot or the new one.
	editFile(t, root, "rolecall.yaml", "model: claude-sonnet-4-5", "model: claude-opus-4-1")
	type pushed struct {
		rec bundle.Record
		at  time.Time
	}
	pushDone := make(chan pushed, 1)
	pushArgs := []string{"config", "push", "--root", root, "--nats", urls[1], "--actor", "test", "-m", "opus by default", "--json", "--expect-revision", strconv.FormatUint(r1.Revision, 10)}
	go func() {
		// Not t.Fatal here: this is not the test's goroutine.
		var r bundle.Record
		out, err := exec.Command(bin, pushArgs...).CombinedOutput()
		if err == nil {
			err = json.Unmarshal(out, &r)
		}
		if err != nil {
			t.Errorf("config push: %v: %s", err, out)
		}
		pushDone <- pushed{r, time.Now()}
	}()
	var flying []string
	for i := range 10 {
		flying = append(flying, publishTasks(t, ctx, js, fmt.Sprintf("f%d-", i), 3)...)
		time.Sleep(30 * time.Millisecond)
	}
	p := <-pushDone
	if t.Failed() {
		t.FailNow()
	}
	r2 := p.rec
	for _, w := range fleet {
		w.waitRevisionBy(t, r2.Revision, p.at.Add(2*time.Second))
	}
	t.Logf("revision %d confirmed on all 3 workers %s after the push", r2.Revision, time.Since(p.at).Round(time.Millisecond))
	for id, o := range outs.wait(t, flying, 30*time.Second) {
		if o.revision != strconv.FormatUint(r1.Revision, 10) && o.revision != strconv.FormatUint(r2.Revision, 10) {
			t.Fatalf("task %s published during the push: revision %q", id, o.revision)
		}
	}
	after := runTasks(t, ctx, js, outs, "b", 12)
	changed := 0
	for id, o := range after {
		if o.revision != strconv.FormatUint(r2.Revision, 10) {
			t.Fatalf("task %s: outcome cites revision %q, want %d", id, o.revision, r2.Revision)
		}
		if !bytes.Equal(o.data, before["a"+strings.TrimPrefix(id, "b")].data) {
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no outcome changed with the new bundle")
	}

	// A stale --expect-revision is refused, and current stays.
	editFile(t, root, "rolecall.yaml", "model: claude-opus-4-1", "model: claude-haiku-4-5")
	out, code := runCLI(t, bin, "config", "push", "--root", root, "--nats", urls[2], "--expect-revision", strconv.FormatUint(r1.Revision, 10))
	if code != 1 || !strings.Contains(out, string(bundle.CodeRevisionConflict)) {
		t.Fatalf("stale push: exit %d, %s", code, out)
	}

	// A bad bundle pushed past the check (the test hook) is refused by
	// every worker: they stay ready on revision r2, say degraded, and
	// every task still gets its outcome from r2.
	editFile(t, root, "rolecall.yaml", "model: claude-haiku-4-5", "model: claude-opus-4-1\nno_such_key: true")
	store, err := bundle.Open(ctx, js, bundle.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := bundle.Pack(root)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := store.Push(ctx, a, bundle.PushOptions{Actor: "test", Message: "bad", Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range fleet {
		st := w.waitDegraded(t, bad.Record.Revision, 5*time.Second)
		if st.ConfigRevision != r2.Revision || st.ConfigError == nil || st.ConfigError.Code != string(bundle.CodeInvalid) {
			t.Fatalf("%s after the bad bundle: %+v %+v", w.name, st, st.ConfigError)
		}
		m := w.metrics(t)
		if !regexp.MustCompile(`(?m)^rolecall_config_degraded\{[^}]*rolecall_error_code="bundle_invalid"[^}]*\} 1$`).MatchString(m) ||
			!regexp.MustCompile(fmt.Sprintf(`(?m)^rolecall_config_revision(\{[^}]*\})? %d$`, r2.Revision)).MatchString(m) {
			t.Fatalf("%s gauges while degraded:\n%s", w.name, grepLines(m, "rolecall_config_"))
		}
	}
	during := runTasks(t, ctx, js, outs, "c", 12)
	for id, o := range during {
		if o.revision != strconv.FormatUint(r2.Revision, 10) {
			t.Fatalf("task %s during the bad bundle: revision %q, want %d", id, o.revision, r2.Revision)
		}
	}

	// Rollback to r1: outcomes equal those of r1 except the revision cited.
	out, code = runCLI(t, bin, "config", "rollback", strconv.FormatUint(r1.Revision, 10), "--nats", urls[0], "--json", "--actor", "test")
	if code != 0 {
		t.Fatalf("rollback: exit %d, %s", code, out)
	}
	var r4 bundle.Record
	if err := json.Unmarshal([]byte(out), &r4); err != nil {
		t.Fatalf("rollback output %q: %v", out, err)
	}
	for _, w := range fleet {
		st := w.waitRevision(t, r4.Revision, 5*time.Second)
		if st.Degraded {
			t.Fatalf("%s still degraded after the rollback: %+v", w.name, st)
		}
	}
	restored := runTasks(t, ctx, js, outs, "d", 12)
	for id, o := range restored {
		was := before["a"+strings.TrimPrefix(id, "d")]
		if o.revision != strconv.FormatUint(r4.Revision, 10) {
			t.Fatalf("task %s after rollback: revision %q, want %d", id, o.revision, r4.Revision)
		}
		if !bytes.Equal(withoutRevision(t, o.data), withoutRevision(t, was.data)) {
			t.Fatalf("task %s after rollback:\n%s\nunder revision %d:\n%s", id, o.data, r1.Revision, was.data)
		}
	}

	// A worker that starts while NATS holds a bundle loads it before its
	// first task: with the fleet stopped, tasks wait in the stream, and the
	// new worker's first outcomes already cite r4.
	for _, w := range fleet {
		w.stop(t)
	}
	pending := publishTasks(t, ctx, js, "e", 6)
	late := startProcWorker(t, bin, urls[2], ports[3], "w4")
	got := outs.wait(t, pending, 60*time.Second)
	for id, o := range got {
		if o.revision != strconv.FormatUint(r4.Revision, 10) {
			t.Fatalf("task %s taken by a starting worker: revision %q, want %d", id, o.revision, r4.Revision)
		}
	}
	late.stop(t)

	// Exactly one outcome per task event, whatever swapped meanwhile.
	published := 12*4 + len(flying) + len(pending)
	info, err := js.Stream(ctx, specsStream)
	if err != nil {
		t.Fatal(err)
	}
	if n := info.CachedInfo().State.Msgs; n != uint64(published) {
		t.Fatalf("%d outcomes stored for %d task events", n, published)
	}
}

// buildWorker compiles cmd/worker once for the test.
func buildWorker(t *testing.T) string {
	t.Helper()
	repo, err := images.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "worker")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/worker")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runCLI(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), 0
}

func pushCLI(t *testing.T, bin, url, root, msg string, extra ...string) bundle.Record {
	t.Helper()
	args := append([]string{"config", "push", "--root", root, "--nats", url, "--replicas", "3", "--actor", "test", "-m", msg, "--json"}, extra...)
	out, code := runCLI(t, bin, args...)
	if code != 0 {
		t.Fatalf("config push: exit %d, %s", code, out)
	}
	var r bundle.Record
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("config push output %q: %v", out, err)
	}
	return r
}

func copyExamples(t *testing.T) string {
	t.Helper()
	repo, err := images.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(repo, "examples")
	dst := filepath.Join(t.TempDir(), "root")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func editFile(t *testing.T, root, file, old, new string) {
	t.Helper()
	p := filepath.Join(root, file)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(p, bytes.Replace(data, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// procWorker is a worker process run by the test.
type procWorker struct {
	name string
	cmd  *exec.Cmd
	port int
	log  *bytes.Buffer
	once sync.Once
}

func startProcWorker(t *testing.T, bin, url string, port int, name string) *procWorker {
	t.Helper()
	w := &procWorker{name: name, port: port, log: &bytes.Buffer{}}
	w.cmd = exec.Command(bin, "run", "--root", t.TempDir(), "--nats", url, "--config-from", "nats",
		"--http", fmt.Sprintf("127.0.0.1:%d", port), "--replicas", "3", "--instance", name, "--log-level", "info")
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.stop(t)
		if t.Failed() {
			t.Logf("%s log:\n%s", name, tail(w.log.String(), 40))
		}
	})
	return w
}

func (w *procWorker) stop(t *testing.T) {
	w.once.Do(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- w.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = w.cmd.Process.Kill()
			t.Errorf("%s did not stop within 20s", w.name)
		}
	})
}

func (w *procWorker) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", w.port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// readyz is the part of /readyz this test reads.
type readyz struct {
	Ready          bool   `json:"ready"`
	ConfigRevision uint64 `json:"config_revision"`
	Degraded       bool   `json:"degraded"`
	ConfigError    *struct {
		Code     string `json:"code"`
		Revision uint64 `json:"revision"`
	} `json:"config_error"`
	code int
}

func (w *procWorker) readyz() (readyz, error) {
	var r readyz
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", w.port))
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	r.code = resp.StatusCode
	return r, json.NewDecoder(resp.Body).Decode(&r)
}

func (w *procWorker) waitFor(t *testing.T, what string, within time.Duration, ok func(readyz) bool) readyz {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r, err := w.readyz()
		if err == nil && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s within %s (last /readyz %+v, %v)", w.name, what, within, r, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *procWorker) waitRevision(t *testing.T, rev uint64, within time.Duration) readyz {
	t.Helper()
	return w.waitFor(t, fmt.Sprintf("ready on revision %d", rev), within, func(r readyz) bool {
		return r.code == http.StatusOK && r.Ready && r.ConfigRevision == rev
	})
}

// waitRevisionBy fails unless the worker serves rev by the deadline; when
// it misses, it waits on to say how late it was (or that it never came),
// so a failure tells a slow swap from a lost one.
func (w *procWorker) waitRevisionBy(t *testing.T, rev uint64, by time.Time) {
	t.Helper()
	on := func(r readyz) bool { return r.code == http.StatusOK && r.Ready && r.ConfigRevision == rev }
	var r readyz
	var err error
	for {
		r, err = w.readyz()
		if err == nil && on(r) {
			return
		}
		if time.Now().After(by) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for late := time.Now(); time.Since(late) < 30*time.Second; time.Sleep(50 * time.Millisecond) {
		if r2, err2 := w.readyz(); err2 == nil && on(r2) {
			t.Fatalf("%s: served revision %d %s after the deadline (at the deadline /readyz %+v, %v)", w.name, rev, time.Since(by).Round(time.Millisecond), r, err)
		}
	}
	t.Fatalf("%s: never served revision %d (30s past the deadline; at the deadline /readyz %+v, %v)", w.name, rev, r, err)
}

func (w *procWorker) waitDegraded(t *testing.T, bad uint64, within time.Duration) readyz {
	t.Helper()
	return w.waitFor(t, fmt.Sprintf("degraded by revision %d", bad), within, func(r readyz) bool {
		return r.code == http.StatusOK && r.Degraded && r.ConfigError != nil && r.ConfigError.Revision == bad
	})
}

// outcome is one outcome event seen on the specs subjects.
type outcome struct {
	revision string // the Rolecall-Config-Revision header
	data     []byte
}

// outcomes collects outcome events by their task event's id.
type outcomes struct {
	mu  sync.Mutex
	got map[string]outcome
}

func collectOutcomes(t *testing.T, nc *nats.Conn) *outcomes {
	t.Helper()
	o := &outcomes{got: map[string]outcome{}}
	sub, err := nc.Subscribe("rolecall.specs.>", func(m *nats.Msg) {
		e, err := events.DecodeOutcome(m.Header, m.Data)
		if err != nil {
			return
		}
		cause, _ := e.Extensions()["causationid"].(string)
		o.mu.Lock()
		o.got[cause] = outcome{revision: m.Header.Get(pipeline.HeaderConfigRevision), data: e.Data()}
		o.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return o
}

// wait returns the outcomes of the task events ids.
func (o *outcomes) wait(t *testing.T, ids []string, within time.Duration) map[string]outcome {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		o.mu.Lock()
		out := map[string]outcome{}
		for _, id := range ids {
			if v, ok := o.got[id]; ok {
				out[id] = v
			}
		}
		o.mu.Unlock()
		if len(out) == len(ids) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d outcomes within %s", len(out), len(ids), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// publishTasks publishes n task events with ids <phase>0…: the same
// task_ids in every phase, so outcomes compare across phases.
func publishTasks(t *testing.T, ctx context.Context, js jetstream.JetStream, phase string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		role := roles[i%len(roles)]
		ids[i] = fmt.Sprintf("%s%d", phase, i)
		data := fmt.Appendf(nil, `{"task_id":"T-%d","role":%q}`, i, role)
		h, body, err := events.EncodeTask(taskSource, ids[i], data, "", "", true)
		if err != nil {
			t.Fatal(err)
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err = js.PublishMsg(pctx, &nats.Msg{Subject: "rolecall.tasks." + role, Header: h, Data: body}, jetstream.WithMsgID(taskSource+"/"+ids[i]))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func runTasks(t *testing.T, ctx context.Context, js jetstream.JetStream, o *outcomes, phase string, n int) map[string]outcome {
	t.Helper()
	return o.wait(t, publishTasks(t, ctx, js, phase, n), 30*time.Second)
}

// withoutRevision drops every "revision" member and the decision
// record's outcome id: what a rollback's outcomes of other events may
// differ in.
func withoutRevision(t *testing.T, data []byte) []byte {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			delete(x, "revision")
			for _, e := range x {
				strip(e)
			}
		case []any:
			for _, e := range x {
				strip(e)
			}
		}
	}
	strip(v)
	// The decision record names its outcome, and the tasks compared are
	// different events.
	if m, ok := v.(map[string]any); ok {
		if d, ok := m["decision"].(map[string]any); ok {
			delete(d, "id")
		}
	}
	out, _ := json.Marshal(v)
	return out
}
