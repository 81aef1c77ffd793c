package pipeline_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/pipeline"
)

// watchedSource is a Source whose watcher runs for the test, sweeping
// every 10 ms, as `worker run` starts one.
func watchedSource(t *testing.T, root string, opts discover.Options) *discover.Source {
	t.Helper()
	opts.ReloadInterval = 10 * time.Millisecond
	src, err := discover.NewSource(root, opts, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	src.Start(t.Context())
	t.Cleanup(src.Stop)
	return src
}

// awaitNewSnapshot waits until the watcher serves a snapshot other than
// prev, and returns it.
func awaitNewSnapshot(t *testing.T, src *discover.Source, prev *discover.Snapshot) *discover.Snapshot {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s := src.Snapshot(); s != prev {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher served no new snapshot within 10s (err %v)", src.Err())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTaskDuringReload: a task that arrives while the worker's Source is
// in the middle of a reload is answered at once from the old snapshot,
// and one that arrives after the swap from the new one; each gets exactly
// one outcome, whose decision record cites the snapshot it was made from.
// The reload is held open inside the load itself: the pack
// names an ${env:…} placeholder, and the lookup blocks until the test
// lets it go.
func TestTaskDuringReload(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"rolecall.yaml":   "placeholders:\n  env: [TEAM_*]\n",
		"packs/team.yaml": "roles:\n  architect:\n    model: model-old\n    effort: ${env:TEAM_EFFORT}\n",
	})
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var blocking atomic.Bool
	lookup := func(name string) (string, bool) {
		if blocking.Load() {
			select {
			case entered <- struct{}{}:
			default: // a later reload; the test waits for the first only
			}
			<-release
		}
		return "medium", true
	}
	src := watchedSource(t, root, discover.Options{LookupEnv: lookup})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the watcher's Stop, which waits for the reload
	old := src.Snapshot()
	h := newHarness(t, testConfig())
	h.start(src, pipeline.Options{})

	blocking.Store(true)
	time.Sleep(20 * time.Millisecond)
	writeFiles(t, root, map[string]string{"packs/team.yaml": "roles:\n  architect:\n    model: model-new-longer\n    effort: ${env:TEAM_EFFORT}\n"})
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the watcher did not start a reload")
	}

	// The reload is under way and cannot finish: this task must not wait.
	during := h.submit(`{"task_id":"T-during","role":"architect","pack":"team"}`, false)
	outs := h.waitOutcomes(1, 10*time.Second)
	if got := resolvedOf(t, outs[0].ev).Model; got != "model-old" {
		t.Errorf("task during the reload: model %q, want model-old (the snapshot being served)", got)
	}
	checkCitedDigest(t, outs[0], old.Digest)

	free()
	next := awaitNewSnapshot(t, src, old)
	after := h.submit(`{"task_id":"T-after","role":"architect","pack":"team"}`, false)
	outs = h.waitOutcomes(2, 10*time.Second)
	if got := resolvedOf(t, outs[1].ev).Model; got != "model-new-longer" {
		t.Errorf("task after the reload: model %q, want model-new-longer", got)
	}
	checkCitedDigest(t, outs[1], next.Digest)
	time.Sleep(200 * time.Millisecond) // room for a second outcome, were there one
	exactlyOnce(t, []string{during, after}, h.outcomes())
}

// TestTasksDuringContinuousEdits: tasks published while a pack is edited
// over and over each get exactly one outcome, made from one whole
// snapshot: the model and the effort written together in one edit are
// always seen together.
func TestTasksDuringContinuousEdits(t *testing.T) {
	root := t.TempDir()
	pack := func(i int) string {
		return "roles:\n  architect:\n    model: model-" + strconv.Itoa(i) + "\n    authority: [\"edit " + strconv.Itoa(i) + "\"]\n"
	}
	writeFiles(t, root, map[string]string{"packs/team.yaml": pack(0)})
	src := watchedSource(t, root, discover.Options{})
	h := newHarness(t, testConfig())
	h.start(src, pipeline.Options{})

	var ids []string
	for i := range 40 {
		if i%4 == 0 {
			replaceFile(t, root, "packs/team.yaml", pack(i))
		}
		ids = append(ids, h.submit(`{"task_id":"T-`+strconv.Itoa(i)+`","role":"architect","pack":"team"}`, false))
		time.Sleep(3 * time.Millisecond)
	}
	h.waitOutcomes(len(ids), 20*time.Second)
	time.Sleep(200 * time.Millisecond) // room for a second outcome, were there one
	outs := h.outcomes()
	exactlyOnce(t, ids, outs)
	for _, o := range outs {
		r := resolvedOf(t, o.ev)
		n := r.Model[len("model-"):]
		if want := "edit " + n; !strings.Contains(r.PromptBody, want) {
			t.Errorf("task %s: model %s with a prompt from another edit (no %q)", r.TaskID, r.Model, want)
		}
	}
}

// replaceFile writes rel the way an editor or a config sync should: a
// temporary file renamed over it, so no reader sees it half written (a
// sweep that caught a truncated file would serve an empty pack until the
// next sweep).
func replaceFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// checkCitedDigest checks that the outcome's decision record names the
// snapshot that made it.
func checkCitedDigest(t *testing.T, o outcome, want string) {
	t.Helper()
	var data struct {
		Decision *struct {
			Config struct {
				Digest string `json:"digest"`
			} `json:"config"`
		} `json:"decision"`
		Rest jsontext.Value `json:",unknown"`
	}
	if err := json.Unmarshal(o.ev.Data(), &data); err != nil {
		t.Fatal(err)
	}
	switch {
	case data.Decision == nil:
		t.Errorf("the outcome carries no decision record: %s", o.ev.Data())
	case data.Decision.Config.Digest != want:
		t.Errorf("the decision cites config %s, want %s", data.Decision.Config.Digest, want)
	}
}
