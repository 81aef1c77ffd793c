package pipeline_test

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// writeFiles writes content by root-relative path under root.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// resolvedOf is the data of a resolved outcome event; any other fails
// the test.
func resolvedOf(t *testing.T, ev event.Event) events.ResolvedData {
	t.Helper()
	if ev.Type() != events.TypeSpecResolved {
		t.Fatalf("outcome type %s, want resolved; data %s", ev.Type(), ev.Data())
	}
	var r events.ResolvedData
	if err := json.Unmarshal(ev.Data(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCompositionHotReload: one running worker; editing a mixin, then a
// ${file:…} target, changes the next task's outcome. The worker is never
// restarted.
func TestCompositionHotReload(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"packs/base.yaml":       "roles:\n  architect:\n    model: model-one\n",
		"packs/team.yaml":       "extends: [base]\nroles:\n  architect:\n    authority: [\"${file:prompts/authority.txt}\"]\n    variants:\n      - when: {model: {matches: \"model-two*\"}}\n        set: {effort: high}\n",
		"prompts/authority.txt": "Decide the boundaries\n",
	})
	src := watchedSource(t, root, discover.Options{})
	h := newHarness(t, testConfig())
	h.start(src, pipeline.Options{})

	type want struct{ model, effort, authority string }
	check := func(n int, w want) {
		t.Helper()
		h.submit(`{"task_id":"T-`+string(rune('a'+n))+`","role":"architect","pack":"team"}`, false)
		r := resolvedOf(t, h.waitOutcomes(n+1, 10*time.Second)[n].ev)
		effort := "<none>"
		if r.Effort != nil {
			effort = *r.Effort
		}
		authority := ""
		if i := strings.Index(r.PromptBody, "## Authority\n- "); i >= 0 {
			authority = strings.SplitN(r.PromptBody[i+len("## Authority\n- "):], "\n", 2)[0]
		}
		if got := (want{r.Model, effort, authority}); got != w {
			t.Errorf("task %d: got %+v, want %+v", n, got, w)
		}
	}
	check(0, want{"model-one", "<none>", "Decide the boundaries"})

	// A different size and a later mtime, so any stat-based check sees it.
	prev := src.Snapshot()
	replaceFile(t, root, "packs/base.yaml", "roles:\n  architect:\n    model: model-two-longer\n")
	prev = awaitNewSnapshot(t, src, prev)
	check(1, want{"model-two-longer", "high", "Decide the boundaries"})

	replaceFile(t, root, "prompts/authority.txt", "Decide the boundaries and the budget\n")
	awaitNewSnapshot(t, src, prev)
	check(2, want{"model-two-longer", "high", "Decide the boundaries and the budget"})
}

// TestBrokenPacksFailTheirTasksOnly: every composition error becomes one
// typed failure outcome for a task that selects that pack, at stage
// discover with the file and line; a good pack in the same root serves
// its tasks; nothing crashes and no task is lost.
func TestBrokenPacksFailTheirTasksOnly(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"rolecall.yaml":      "placeholders:\n  env: [TEAM_*]\n",
		"packs/good.yaml":    "extends: [base]\n",
		"packs/base.yaml":    "roles:\n  architect:\n    model: m\n",
		"packs/cycle.yaml":   "extends: [loop]\n",
		"packs/loop.yaml":    "extends: [cycle]\n",
		"packs/orphan.yaml":  "extends: [ghost]\n",
		"packs/dollar.yaml":  "roles:\n  $keep: {}\n",
		"packs/env.yaml":     "roles:\n  architect:\n    model: ${env:HOME}\n",
		"packs/unset.yaml":   "roles:\n  architect:\n    model: ${env:TEAM_UNSET}\n",
		"packs/nofile.yaml":  "roles:\n  architect:\n    model: ${file:none.txt}\n",
		"packs/escape.yaml":  "roles:\n  architect:\n    model: ${file:../x}\n",
		"packs/variant.yaml": "roles:\n  architect:\n    model: m\n    variants:\n      - set: {model: other}\n",
		"packs/above.yaml":   "extends: [dollar]\n",
	})
	lookup := func(string) (string, bool) { return "", false }
	src, err := discover.NewSource(root, discover.Options{LookupEnv: lookup}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, testConfig())
	h.start(src, pipeline.Options{})

	cases := []struct {
		pack  string
		code  resolve.Code
		file  string
		line  int
		extra string // a details member that must be present
	}{
		{"good", "", "", 0, ""},
		{"cycle", resolve.CodePackInvalid, "packs/loop.yaml", 1, "cycle"},
		{"orphan", resolve.CodePackNotFound, "packs/orphan.yaml", 1, ""},
		{"dollar", resolve.CodePackInvalid, "packs/dollar.yaml", 2, ""},
		{"env", resolve.CodePlaceholderForbidden, "packs/env.yaml", 3, "placeholder"},
		{"unset", resolve.CodePlaceholderUnresolved, "packs/unset.yaml", 3, "placeholder"},
		{"nofile", resolve.CodePlaceholderUnresolved, "packs/nofile.yaml", 3, "placeholder"},
		{"escape", resolve.CodePathEscape, "packs/escape.yaml", 3, "placeholder"},
		{"variant", resolve.CodePackInvalid, "packs/variant.yaml", 5, ""},
		{"above", resolve.CodePackInvalid, "packs/dollar.yaml", 2, "paths"},
	}
	var ids []string
	for _, c := range cases {
		ids = append(ids, h.submit(`{"task_id":"T-`+c.pack+`","role":"architect","pack":"`+c.pack+`"}`, false))
	}
	outs := h.waitOutcomes(len(cases), 20*time.Second)
	exactlyOnce(t, ids, outs)
	byTask := map[string]outcome{}
	for _, o := range outs {
		var d struct {
			TaskID string `json:"task_id"`
		}
		if err := json.Unmarshal(o.ev.Data(), &d, json.RejectUnknownMembers(false)); err != nil {
			t.Fatal(err)
		}
		byTask[d.TaskID] = o
	}
	for _, c := range cases {
		o := byTask["T-"+c.pack]
		if c.code == "" {
			if r := resolvedOf(t, o.ev); r.Model != "m" {
				t.Errorf("%s: model %q", c.pack, r.Model)
			}
			continue
		}
		f := failureOf(t, o.ev)
		if f.Code != c.code || f.Stage != resolve.StageDiscover || f.Details["file"] != c.file || f.Details["line"] != float64(c.line) {
			t.Errorf("%s: %s/%s at %v:%v, want %s/discover at %s:%d (%s)", c.pack, f.Stage, f.Code, f.Details["file"], f.Details["line"], c.code, c.file, c.line, f.Message)
		}
		if _, ok := f.Details[c.extra]; c.extra != "" && !ok {
			t.Errorf("%s: details lack %q: %v", c.pack, c.extra, f.Details)
		}
		if !strings.HasSuffix(o.subject, ".failed."+string(c.code)) {
			t.Errorf("%s: subject %s", c.pack, o.subject)
		}
	}
}
