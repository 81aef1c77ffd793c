package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/bundle"
	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

const replayPack = "roles:\n  architect:\n    model: arch-model\n  tester:\n    model: test-model\n"

// replayFleet is a server with the fleet's streams and 1,000 outcomes
// decided by a worker from root: four kinds of task in turn (an architect
// of pack team, a tester of pack team, an architect with a task model,
// an unknown role).
func replayFleet(t *testing.T) (url, root string, js jetstream.JetStream, cfg pipeline.Config) {
	t.Helper()
	root = t.TempDir()
	writeRootFile(t, root, "packs/team.yaml", replayPack)
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	if js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	cfg = pipeline.DefaultConfig()
	w, err := pipeline.New(js, staticSnapshot{snap}, cfg, pipeline.Options{Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !w.Ready() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	const n = 1000
	for i := range n {
		var data string
		switch i % 4 {
		case 0:
			data = fmt.Sprintf(`{"task_id": "T-%d", "role": "architect", "pack": "team"}`, i)
		case 1:
			data = fmt.Sprintf(`{"task_id": "T-%d", "role": "tester", "pack": "team"}`, i)
		case 2:
			data = fmt.Sprintf(`{"task_id": "T-%d", "role": "architect", "pack": "team", "overrides": {"model": "task-model"}}`, i)
		default:
			data = fmt.Sprintf(`{"task_id": "T-%d", "role": "ghost"}`, i)
		}
		h, body, err := events.EncodeTask("planner", fmt.Sprintf("ev-%d", i), []byte(data), "", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsgAsync(&nats.Msg{Subject: events.TasksSubject(cfg.Prefix, "replay"), Header: h, Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	specs, err := js.Stream(context.Background(), cfg.SpecsStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		info, err := specs.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d outcomes after 60s, want %d", info.State.Msgs, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return srv.ClientURL(), root, js, cfg
}

func runReplay(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runContext(context.Background(), append([]string{"replay"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestReplay: 1,000 recorded decisions replay byte-equal against their
// own root (exit 0); against an edited root the diff names exactly the
// decisions and the field the edit changes (exit 3); a non-deterministic
// resolver makes replay exit 1.
func TestReplay(t *testing.T) {
	url, root, js, cfg := replayFleet(t)
	nf, r := "--nats="+url, "--root="+root

	code, out, errs := runReplay(t, nf, r)
	if code != 0 || !strings.Contains(out, "replayed 1000: 1000 equal, 0 changed, 0 nondeterministic, 0 skipped, 0 invalid") {
		t.Fatalf("same root: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "replay: done, 1000 outcomes, 0 not equal") {
		t.Errorf("no progress line on stderr: %q", errs)
	}

	t.Run("limit and filter", func(t *testing.T) {
		code, out, _ := runReplay(t, nf, r, "--limit=10", "--filter=rolecall.specs.failed.>")
		if code != 0 || !strings.Contains(out, "replayed 10: 10 equal") {
			t.Errorf("exit %d\n%s", code, out)
		}
		code, out, _ = runReplay(t, nf, r, "--since=1h", "--json", "--limit=3")
		if code != 0 || !strings.Contains(out, `"replayed": 3`) || !strings.Contains(out, `"status": "equal"`) {
			t.Errorf("exit %d\n%s", code, out)
		}
	})

	t.Run("edited root", func(t *testing.T) {
		edited := t.TempDir()
		writeRootFile(t, edited, "packs/team.yaml", strings.Replace(replayPack, "test-model", "test-model-2", 1))
		code, out, errs := runReplay(t, nf, "--root="+edited)
		if code != 3 {
			t.Fatalf("exit %d, want 3\n%s\n%s", code, out, errs)
		}
		line := regexp.MustCompile(`^T-(\d+) tester model: "test-model" → "test-model-2"  \(packs/team\.yaml:5\)$`)
		seen := map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.HasPrefix(l, "replayed ") || strings.HasPrefix(l, "  ") {
				continue
			}
			m := line.FindStringSubmatch(l)
			if m == nil {
				t.Errorf("unexpected line %q", l)
				continue
			}
			var i int
			fmt.Sscan(m[1], &i)
			if i%4 != 1 || seen[m[1]] {
				t.Errorf("line %q names a decision the edit does not change (or twice)", l)
			}
			seen[m[1]] = true
		}
		if len(seen) != 250 {
			t.Errorf("%d changed decisions named, want 250", len(seen))
		}
		for _, want := range []string{"replayed 1000: 750 equal, 250 changed, 0 nondeterministic", "  field model: 250", "  code resolved → resolved: 250"} {
			if !strings.Contains(out, want) {
				t.Errorf("summary lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("non-deterministic resolver", func(t *testing.T) {
		replayHandle = func(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef) pipeline.Outcome {
			out := pipeline.Handle(snap, task, ref, nil)
			if out.Resolved != nil && rand.IntN(2) == 0 {
				out.Resolved.Model += "-" + fmt.Sprint(rand.Int())
			}
			return out
		}
		defer func() { replayHandle = nil }()
		code, out, errs := runReplay(t, nf, r, "--limit=40")
		if code != 1 || !strings.Contains(out, "NONDETERMINISTIC T-") || !strings.Contains(errs, "determinism bug") {
			t.Errorf("exit %d, want 1\n%s\n%s", code, out, errs)
		}
	})

	t.Run("corrupted outcome", func(t *testing.T) {
		if _, err := js.Publish(context.Background(), cfg.Prefix+".specs.resolved.junk", []byte(`{"not": "an event"}`)); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runReplay(t, nf, r, "--filter=rolecall.specs.resolved.junk")
		if code != exitReplayCannot || !strings.Contains(out, "invalid ") || !strings.Contains(errs, "could not be read") {
			t.Errorf("exit %d, want %d\n%s\n%s", code, exitReplayCannot, out, errs)
		}
	})

	t.Run("bad filter", func(t *testing.T) {
		code, out, errs := runReplay(t, nf, r, "--json", "--filter=elsewhere.>")
		if code != exitReplayCannot || !strings.Contains(out, `"code": "filter_invalid"`) {
			t.Errorf("exit %d\n%s\n%s", code, out, errs)
		}
	})

	t.Run("stream gone", func(t *testing.T) {
		if err := js.DeleteStream(context.Background(), cfg.SpecsStream); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runReplay(t, nf, r, "--json")
		if code != exitReplayCannot || !strings.Contains(out, `"code": "outcomes_unavailable"`) || !strings.Contains(errs, "outcomes_unavailable") {
			t.Errorf("exit %d\n%s\n%s", code, out, errs)
		}
	})

	t.Run("usage", func(t *testing.T) {
		if code, _, _ := runReplay(t, nf, r, "--limit=-1"); code != 2 {
			t.Errorf("exit %d, want 2", code)
		}
		if code, _, errs := runReplay(t, nf, "--root="+filepath.Join(root, "missing")); code != exitReplayCannot {
			t.Errorf("missing root: exit %d\n%s", code, errs)
		}
	})
}

// TestReplayFromBundle: decisions made from a config bundle replay
// against the revision they cite, loaded from the bundle store, whatever
// --root holds; without a bundle store that is exit 4.
func TestReplayFromBundle(t *testing.T) {
	root := t.TempDir()
	writeRootFile(t, root, "packs/team.yaml", replayPack)
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	ctx := context.Background()
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	nf, other := "--nats="+srv.ClientURL(), "--root="+t.TempDir()

	if code, out, errs := runReplay(t, nf, other, "--from-bundle", "--json"); code != exitReplayCannot || !strings.Contains(out, `"code": "config_unavailable"`) {
		t.Errorf("no bundle store: exit %d\n%s\n%s", code, out, errs)
	}

	a, err := bundle.Pack(root)
	if err != nil {
		t.Fatal(err)
	}
	st, err := bundle.Open(ctx, js, bundle.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Push(ctx, a, bundle.PushOptions{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := st.LoadRevision(ctx, res.Record.Revision)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "planner", ID: fmt.Sprintf("ev-%d", i),
			Task: fmt.Sprintf(`{"task_id": "T-%d", "role": "tester", "pack": "team"}`, i)})
	}
	if code, out, errs := runReplay(t, nf, other, "--from-bundle"); code != 0 || !strings.Contains(out, "replayed 3: 3 equal") {
		t.Errorf("from the bundle: exit %d\n%s\n%s", code, out, errs)
	}
	// Against the (empty) root instead, the pack is gone: every decision
	// would change.
	if code, out, _ := runReplay(t, nf, other); code != 3 || !strings.Contains(out, "replayed 3: 0 equal, 3 changed") {
		t.Errorf("against the root: exit %d\n%s", code, out)
	}
}
