package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Renamed over the old file, as an editor or a config sync does: a
	// worker's watcher that sweeps while a file is written in place can
	// serve it half written (or briefly missing) until its next sweep.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// updateSpecs changes the outcome stream's limits as an operator would.
func (c *client) updateSpecs(change func(*jetstream.StreamConfig)) {
	c.t.Helper()
	ctx, cancel := ctxT(5 * time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, defaults.SpecsStream)
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	change(&cfg)
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		c.t.Fatalf("update %s: %v", cfg.Name, err)
	}
}

// TestOutcomeStreamRefusesPublishes: ROLECALL_SPECS is set to max_msgs 1
// with discard new, so every outcome publish is refused. Each delivery
// retries in place for --retry-for (1 s here), then the task is nak'ed
// and retried with backoff, again and again; nothing is acknowledged
// while no outcome can be stored. When the limit is raised,
// every task (those retried and those still queued behind them) ends with
// exactly one outcome, and none went to the dead-letter path.
func TestOutcomeStreamRefusesPublishes(t *testing.T) {
	// Every task out at once has a runner of its own: a delivery holds its
	// runner while it retries in place.
	const tasks, concurrency = 200, 256
	srv := startNATS(t, "")
	root := openDir(t)
	writeFile(t, filepath.Join(root, "rolecall.yaml"), "nats:\n  backoff: [100ms]\n")
	c := connect(t, srv.url())
	w := startWorker(t, srv.url(), root, workerOpts{args: []string{"--ack-wait", "2s", "--max-deliver", "50", "--retry-for", "1s",
		"--concurrency", fmt.Sprint(concurrency), "--log-level", "warn"}})
	acks := c.watchAcks(defaults.TasksStream, defaults.Consumer)

	warm := []string{"warm-0"}
	c.publishTask(warm[0], `{"task_id":"T-warm","role":"architect"}`, false)
	c.waitSpecs(1, 10*time.Second)
	c.updateSpecs(func(sc *jetstream.StreamConfig) { sc.MaxMsgs, sc.Discard = 1, jetstream.DiscardNew })

	// The tasks out at once: MaxAckPending bounds them, not the queue.
	ctx, cancel := ctxT(5 * time.Second)
	cons, err := c.js.Consumer(ctx, defaults.TasksStream, defaults.Consumer)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	window := min(tasks, cons.CachedInfo().Config.MaxAckPending)

	ids := c.submitMany("r", tasks, loadTask)
	// Refuse for two seconds at least, and until every task the consumer
	// lets out at once was refused and retried three times or more.
	refusing := time.Now()
	deadline := refusing.Add(30 * time.Second)
	for {
		acks.mu.Lock()
		retried := 0
		for _, n := range acks.naks {
			if n >= 3 {
				retried++
			}
		}
		acks.mu.Unlock()
		if retried >= window && time.Since(refusing) >= 2*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s only %d tasks were nak'ed three times, want %d (stats %+v)", retried, window, acks.stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	during := acks.stats()
	if n := c.specsCount(); n != 1 {
		t.Fatalf("ROLECALL_SPECS holds %d outcomes while refusing, want 1", n)
	}
	if during.acked != 1 {
		t.Fatalf("%d tasks acknowledged while no outcome could be stored, want only the warm-up task", during.acked-1)
	}
	if !strings.Contains(w.stderr.String(), "maximum messages exceeded") {
		t.Errorf("the worker did not log the refusal; stderr:\n%s", tail(w.stderr.String(), 2000))
	}

	c.updateSpecs(func(sc *jetstream.StreamConfig) { sc.MaxMsgs = -1 })
	refused := time.Since(refusing)
	c.waitSpecs(tasks+1, 60*time.Second)
	time.Sleep(500 * time.Millisecond)
	outs := c.outcomes()
	exactlyOnce(t, append(warm, ids...), outs)
	checkLoadAnswers(t, outs[1:])
	for _, o := range outs {
		if o.ev.Type() == events.TypeSpecFailed && o.failure(t).Code == resolve.CodeDeliveryExhausted {
			t.Errorf("task %s went to the dead-letter path", o.ext(events.ExtTaskID))
		}
	}
	after := acks.stats()
	if after.acked != tasks+1 {
		t.Errorf("%d tasks acknowledged, want %d", after.acked, tasks+1)
	}
	t.Logf("figures: tasks=%d tasks_out_at_once=%d refusal=%s refused_publishes(naks)=%d tasks_nakd=%d max_delivery=%d outcomes=%d acked=%d worker_VmHWM=%dKiB",
		tasks, window, refused.Round(time.Millisecond), during.nakMsgs, during.naked, after.maxDelivered, len(outs)-1, after.acked-1, w.statusKB("VmHWM"))
}

// TestSlowStageKeepsTasksAlive: the publish stage of two in-process
// runners (pipeline.New, Concurrency 4 each, against the separately
// started server) sleeps 2 s, longer than ack_wait (1.5 s), with the
// consumer's MaxAckPending reached.
//
//   - MaxAckPending 4, one runner's concurrency: every task a runner holds
//     is being processed, and InProgress keeps each alive: no task is
//     redelivered at all.
//   - MaxAckPending 6: one runner may hold more tasks than it processes
//     at once; those wait in its fetch buffer without InProgress and can
//     be redelivered to the other runner after ack_wait. Then two runners
//     process one task at the same time, and the promise is what is left:
//     both produce the same outcome, and only one is stored.
func TestSlowStageKeepsTasksAlive(t *testing.T) {
	t.Run("max_ack_pending=concurrency", func(t *testing.T) {
		st := runSlowStage(t, 4)
		if st.deliveries != st.tasks {
			t.Errorf("%d deliveries for %d tasks: tasks in progress were redelivered despite InProgress", st.deliveries, st.tasks)
		}
		if st.acks.maxDelivered != 1 || st.acks.redeliveredAcked != 0 {
			t.Errorf("a task was answered on delivery %d (%d redelivered tasks acked)", st.acks.maxDelivered, st.acks.redeliveredAcked)
		}
		for id, n := range st.processed {
			if n != 1 {
				t.Errorf("task %s processed %d times", id, n)
			}
		}
	})
	t.Run("max_ack_pending>concurrency", func(t *testing.T) {
		st := runSlowStage(t, 6)
		t.Logf("tasks processed by two runners at once: %d (redeliveries %d); each pair produced one outcome", st.concurrentDup, st.deliveries-st.tasks)
	})
}

type slowStats struct {
	tasks, deliveries, concurrentDup int
	processed                        map[string]int
	acks                             ackStats
}

func runSlowStage(t *testing.T, maxAckPending int) slowStats {
	const tasks = 8
	const slow = 2 * time.Second
	srv := startNATS(t, "")
	c := connect(t, srv.url())
	cfg := pipeline.DefaultConfig()
	cfg.AckWait = 1500 * time.Millisecond
	cfg.MaxDeliver = 3
	cfg.Backoff = []time.Duration{50 * time.Millisecond}
	cfg.RetryFor = time.Second
	cfg.DuplicateWindow = cfg.RequiredDuplicateWindow() + time.Minute
	cfg.Concurrency = 4
	cfg.MaxAckPending = maxAckPending
	src, err := discover.NewSource(t.TempDir(), discover.Options{ReloadInterval: time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	seen := map[string][]*events.ResolvedData{} // task id → what each processing produced
	running := map[string]int{}                 // task id → processings under way now
	concurrentDup := 0
	var inStage, peak atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 2 {
		nc, err := nats.Connect(srv.url())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		w, err := pipeline.New(js, src, cfg, pipeline.Options{
			Logger: slog.New(slog.DiscardHandler),
			Hooks: pipeline.Hooks{BeforePublish: func(_ context.Context, o *pipeline.Outcome, _ uint64) error {
				id := o.Resolved.TaskID
				mu.Lock()
				seen[id] = append(seen[id], o.Resolved)
				running[id]++
				if running[id] > 1 {
					concurrentDup++
				}
				mu.Unlock()
				n := inStage.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(slow)
				inStage.Add(-1)
				mu.Lock()
				running[id]--
				mu.Unlock()
				return nil
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Run(ctx); err != nil {
				t.Errorf("runner %d: %v", i, err)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	c.waitStream(defaults.TasksStream)
	acks := c.watchAcks(defaults.TasksStream, defaults.Consumer)

	ids := c.submitMany("slow", tasks, func(i int) string { return fmt.Sprintf(`{"task_id":"T-%05d","role":"architect"}`, i) })
	maxPending := 0
	deadline := time.Now().Add(60 * time.Second)
	for c.specsCount() < tasks {
		ctx, cc := ctxT(2 * time.Second)
		cons, err := c.js.Consumer(ctx, defaults.TasksStream, defaults.Consumer)
		if err == nil {
			if info, err := cons.Info(ctx); err == nil {
				maxPending = max(maxPending, info.NumAckPending)
			}
		}
		cc()
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d outcomes after 60s", c.specsCount(), tasks)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Let every processing (a late duplicate included) finish.
	for inStage.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	wg.Wait()

	outs := c.outcomes()
	exactlyOnce(t, ids, outs)
	if maxPending != maxAckPending {
		t.Errorf("peak NumAckPending %d, want MaxAckPending %d to be reached", maxPending, maxAckPending)
	}
	st := slowStats{tasks: tasks, deliveries: int(c.consumerDeliveries()), processed: map[string]int{}, acks: acks.stats()}
	if st.acks.wpi == 0 {
		t.Error("no +WPI (InProgress) reply was sent")
	}
	mu.Lock()
	defer mu.Unlock()
	st.concurrentDup = concurrentDup
	for id, rs := range seen {
		st.processed[id] = len(rs)
		for _, r := range rs[1:] {
			if diff := cmp.Diff(rs[0], r); diff != "" {
				t.Errorf("task %s: two processings produced different outcomes:\n%s", id, diff)
			}
		}
	}
	t.Logf("figures: tasks=%d slow_stage=%s ack_wait=%s concurrency=2x%d max_ack_pending=%d peak_ack_pending=%d peak_in_stage=%d in_progress_replies=%d deliveries=%d concurrent_duplicates=%d",
		tasks, slow, cfg.AckWait, cfg.Concurrency, maxAckPending, maxPending, peak.Load(), st.acks.wpi, st.deliveries, concurrentDup)
	return st
}

// asNobody runs the worker as an unprivileged uid when the suite runs as
// root, so that a file's mode bits deny it as they would in production.
// ok is false when the suite runs as root but cannot switch uid (a
// container without CAP_SETUID): then mode bits cannot deny the worker.
func asNobody(t testing.TB) (cred *syscall.Credential, ok bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil, true
	}
	cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	cmd := exec.Command(bin.worker, "version")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Logf("cannot run the worker as uid 65534 (%v: %s)", err, out)
		return nil, false
	}
	return cred, true
}

// TestConfigRootFaults breaks the live config root of a running worker in
// every way discovery must survive. Each time the last good snapshot keeps
// serving (every task resolves with the last good pack's model), /readyz
// answers 503 with the typed error in snapshot_error, and a repaired root
// is picked up without a restart.
func TestConfigRootFaults(t *testing.T) {
	srv := startNATS(t, "")
	root := openDir(t)
	outside := openDir(t)
	writeFile(t, filepath.Join(outside, "stolen.yaml"), "roles:\n  architect:\n    model: stolen-model\n")
	pack := filepath.Join(root, "packs", "team.yaml")
	good := 0
	writeGood := func() string {
		good++
		model := fmt.Sprintf("good-model-%d", good)
		// writeFile renames over the broken file; only a directory must
		// go first, since rename cannot replace it.
		if fi, err := os.Lstat(pack); err == nil && fi.IsDir() {
			_ = os.RemoveAll(pack)
		}
		writeFile(t, pack, "roles:\n  architect:\n    model: "+model+"\n")
		return model
	}
	model := writeGood()
	cred, canDeny := asNobody(t)
	w := startWorker(t, srv.url(), root, workerOpts{cred: cred, args: []string{"--reload-interval", "50ms", "--log-level", "warn"}})
	c := connect(t, srv.url())

	// A fault of the pack file stays with that pack: the worker installs the
	// new snapshot and stays ready, tasks selecting the pack fail with the
	// typed problem, the other packs serve. A fault of the root (the packs
	// directory, the root itself) keeps the last good snapshot instead.
	cases := []struct {
		name   string
		break_ func(t *testing.T)
		code   resolve.Code
		msg    string
		pack   bool // the fault is the pack's alone
	}{
		{"unreadable file", func(t *testing.T) {
			if err := os.Chmod(pack, 0); err != nil {
				t.Fatal(err)
			}
		}, resolve.CodePackInvalid, "permission denied", true},
		{"unreadable packs dir", func(t *testing.T) {
			if err := os.Chmod(filepath.Dir(pack), 0); err != nil {
				t.Fatal(err)
			}
		}, resolve.CodePackInvalid, "permission denied", false},
		{"unreadable config root", func(t *testing.T) {
			if err := os.Chmod(root, 0); err != nil {
				t.Fatal(err)
			}
		}, resolve.CodeConfigInvalid, "permission denied", false},
		{"FIFO", func(t *testing.T) {
			mustRemove(t, pack)
			if err := syscall.Mkfifo(pack, 0o644); err != nil {
				t.Fatal(err)
			}
		}, resolve.CodePackInvalid, "not a regular file", true},
		{"directory", func(t *testing.T) {
			mustRemove(t, pack)
			if err := os.Mkdir(pack, 0o755); err != nil {
				t.Fatal(err)
			}
		}, resolve.CodePackInvalid, "not a regular file", true},
		{"broken YAML", func(t *testing.T) {
			writeFile(t, pack, "roles:\n  architect:\n    model: [unclosed\n")
		}, resolve.CodePackInvalid, "", true},
		{"YAML bomb", func(t *testing.T) {
			writeFile(t, pack, hostileFile(t, "billion-laughs.yaml"))
		}, resolve.CodePackInvalid, "anchors", true},
		{"100 MB file", func(t *testing.T) {
			mustRemove(t, pack)
			sparse(t, pack, 100<<20)
		}, resolve.CodePackInvalid, "larger than", true},
		{"symlink out of the root", func(t *testing.T) {
			mustRemove(t, pack)
			if err := os.Symlink(filepath.Join(outside, "stolen.yaml"), pack); err != nil {
				t.Fatal(err)
			}
		}, resolve.CodePathEscape, "", true},
		{"placeholder file is a FIFO", func(t *testing.T) {
			fifo := filepath.Join(root, "prompts", "pipe.txt")
			_ = os.Remove(fifo)
			mkdir(t, filepath.Dir(fifo))
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			writeFile(t, pack, "roles:\n  architect:\n    model: x\n    authority: [\"${file:prompts/pipe.txt}\"]\n")
		}, resolve.CodePlaceholderUnresolved, "not a regular file", true},
		{"config root removed", func(t *testing.T) {
			if err := os.Rename(root, root+".away"); err != nil {
				t.Fatal(err)
			}
		}, resolve.CodeConfigInvalid, "no such file", false},
	}
	var peakKB int64
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !canDeny && strings.HasPrefix(tc.name, "unreadable") {
				t.Skip("running as root without the right to switch uid: mode bits cannot deny the worker")
			}
			before := w.waitReady(10 * time.Second)
			tc.break_(t)
			ids := func() []string {
				return c.submitMany(fmt.Sprintf("cf%d", i), 20, func(j int) string {
					return fmt.Sprintf(`{"task_id":"T-%d-%d","role":"architect","pack":"team"}`, i, j)
				})
			}
			broken := before.Snapshot
			if tc.pack {
				broken = w.waitReadiness(10*time.Second, "ready with a new snapshot", func(r readiness) bool {
					return r.code == http.StatusOK && r.SnapshotError == nil && r.Snapshot != before.Snapshot
				}).Snapshot
				// Each task selecting the broken pack gets its typed
				// failure; the default pack still serves.
				assertFailure(t, c, ids(), tc.code, tc.msg, root)
				id := fmt.Sprintf("cf%d-default", i)
				c.publishTask(id, fmt.Sprintf(`{"task_id":"T-%d-default","role":"architect"}`, i), false)
				assertModel(t, c, []string{id}, "claude-opus-4-1", root)
			} else {
				r := w.waitReadiness(10*time.Second, "reporting "+string(tc.code), func(r readiness) bool {
					return r.code == http.StatusServiceUnavailable && r.SnapshotError != nil && strings.Contains(*r.SnapshotError, string(tc.code))
				})
				if !strings.Contains(*r.SnapshotError, tc.msg) {
					t.Errorf("snapshot_error %q does not say %q", *r.SnapshotError, tc.msg)
				}
				if r.Snapshot != before.Snapshot {
					t.Errorf("snapshot changed from %s to %s on a broken root", before.Snapshot, r.Snapshot)
				}
				if !r.NATSConnected || !r.ConsumerBound {
					t.Errorf("readiness %+v: the worker stopped consuming", r)
				}
				// The last good snapshot keeps answering, with the right model.
				assertModel(t, c, ids(), model, root)
			}

			// Repair: put everything back, with a new model, and see it served.
			_ = os.Rename(root+".away", root)
			for _, p := range []string{root, filepath.Dir(pack)} {
				if err := os.Chmod(p, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_ = os.Remove(filepath.Join(root, "prompts", "pipe.txt"))
			model = writeGood()
			w.waitReadiness(10*time.Second, "ready again", func(r readiness) bool {
				return r.code == http.StatusOK && r.SnapshotError == nil && r.Snapshot != before.Snapshot && r.Snapshot != broken
			})
			id := fmt.Sprintf("cf%d-fixed", i)
			c.publishTask(id, fmt.Sprintf(`{"task_id":"T-%d-fixed","role":"architect","pack":"team"}`, i), false)
			assertModel(t, c, []string{id}, model, root)
			peakKB = max(peakKB, w.statusKB("VmHWM"))
		})
	}
	t.Logf("figures: faults=%d worker_uid=%s worker_VmHWM=%dKiB", len(cases), uidName(cred), peakKB)
	if peakKB > 256<<10 {
		t.Errorf("worker peak RSS %d KiB, over the 256 MiB bound", peakKB)
	}
}

func uidName(c *syscall.Credential) string {
	if c == nil {
		return fmt.Sprint(os.Geteuid())
	}
	return fmt.Sprint(c.Uid)
}

func mustRemove(t testing.TB, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// sparse creates a file of size bytes that takes no disk space.
func sparse(t testing.TB, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// assertModel waits for the outcomes of ids and checks each resolved
// with model (the last good snapshot's); it also checks that no outcome
// names a path outside the config root.
// assertFailure waits for exactly one outcome per id and checks that each
// is the typed failure code, at stage discover, saying msg.
func assertFailure(t testing.TB, c *client, ids []string, code resolve.Code, msg, root string) {
	t.Helper()
	for id, o := range awaitOutcomes(t, c, ids) {
		if o.ev.Type() != events.TypeSpecFailed {
			t.Errorf("task %s: %s, want the failure %s", id, o.ev.Type(), code)
			continue
		}
		if f := o.failure(t); f.Code != code || f.Stage != resolve.StageDiscover || !strings.Contains(f.Message, msg) {
			t.Errorf("task %s: %s/%s %q, want discover/%s saying %q", id, f.Stage, f.Code, f.Message, code, msg)
		}
		assertNoHostPath(t, o.body, root)
	}
}

func assertModel(t testing.TB, c *client, ids []string, model, root string) {
	t.Helper()
	for id, o := range awaitOutcomes(t, c, ids) {
		if o.ev.Type() != events.TypeSpecResolved {
			t.Errorf("task %s: %s %s", id, o.ev.Type(), o.ev.Data())
			continue
		}
		if r := o.resolved(t); r.Model != model {
			t.Errorf("task %s resolved with model %q, want %q (the last good snapshot's)", id, r.Model, model)
		}
		assertNoHostPath(t, o.body, root)
	}
}

// awaitOutcomes waits until every id has its outcome and none has two.
func awaitOutcomes(t testing.TB, c *client, ids []string) map[string]outcome {
	t.Helper()
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.Now().Add(20 * time.Second)
	got := map[string]outcome{}
	for len(got) < len(ids) {
		for _, o := range c.outcomes() {
			if cause := o.ext(events.ExtCausationID); want[cause] {
				if _, dup := got[cause]; dup {
					t.Fatalf("task %s has two outcomes", cause)
				}
				got[cause] = o
			}
		}
		if len(got) < len(ids) {
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d outcomes after 20s", len(got), len(ids))
			}
			got = map[string]outcome{}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return got
}
