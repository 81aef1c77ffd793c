package pipeline_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/schematest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

var update = flag.Bool("update", false, "rewrite the golden outcomes under testdata/decision")

// decisionRoot holds one file of every kind discovery reads: rolecall.yaml,
// catalog Roles and Modes, a pack with a mixin, a ${file:} target and an
// ${env:} placeholder, an overlay profile, skills of two sources, a
// preamble.
const decisionRoot = "testdata/decision/root"

var decisionEnv = discover.Options{LookupEnv: func(name string) (string, bool) {
	if name == "RC_OWNER" {
		return "ada", true
	}
	return "", false
}}

func loadDecisionRoot(t *testing.T, root string) *discover.Snapshot {
	t.Helper()
	snap, err := discover.Load(root, decisionEnv)
	if err != nil {
		t.Fatalf("load %s: %v", root, err)
	}
	return snap
}

// TestDecisionGolden: the encoded outcome events, decision record
// included, of a resolved task and of a failed one. `go test ./pipeline
// -run TestDecisionGolden -update` rewrites them.
func TestDecisionGolden(t *testing.T) {
	snap := loadDecisionRoot(t, decisionRoot)
	for _, c := range []struct{ name, task string }{
		{"resolved", `{"task_id":"T-1","role":"architect","modes":["systematic"],"overrides":{"extra_prompt":"Mind the budget.","model":null}}`},
		{"failed", `{"task_id":"T-2","role":"ghost"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			task, ref, err := events.DecodeTaskData([]byte(c.task), events.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			out := pipeline.Handle(snap, task, ref, nil)
			meta := events.OutcomeMeta{ID: "rc-golden-" + c.name, Source: "fleet", CausationID: "ev-" + c.name,
				Time: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), WorkerVersion: "1.2.3"}
			var body []byte
			schema := events.SchemaResolved
			if out.Resolved != nil {
				_, _, body, err = events.EncodeResolved("", meta, out.Resolved)
			} else {
				schema = events.SchemaFailed
				_, _, body, err = events.EncodeFailed("", meta, out.Failure)
			}
			if err != nil {
				t.Fatal(err)
			}
			var ev struct {
				Data jsontext.Value `json:"data"`
			}
			if err := json.Unmarshal(body, &ev); err != nil {
				t.Fatal(err)
			}
			if err := schematest.Validate(schema, ev.Data); err != nil {
				t.Errorf("outcome data does not match %s: %v", schema, err)
			}
			var dec struct {
				Decision events.Decision `json:"decision"`
			}
			if err := json.Unmarshal(ev.Data, &dec); err != nil {
				t.Fatal(err)
			}
			if d := dec.Decision; d.ID != meta.ID || d.WorkerVersion != "1.2.3" || d.Config.Digest != snap.Digest || d.Config.Source != "files" || d.Config.Revision != nil {
				t.Errorf("decision names %q %q %+v, want the outcome id, version and snapshot", d.ID, d.WorkerVersion, d.Config)
			}
			pretty := jsontext.Value(body)
			if err := pretty.Indent(jsontext.WithIndent("  ")); err != nil {
				t.Fatal(err)
			}
			// The snapshot digest covers the fixture's bytes, which git
			// may check out with other line endings: keep it out of the
			// golden (it is checked above).
			got := strings.ReplaceAll(string(pretty), snap.Digest, "sha256:SNAPSHOT") + "\n"
			golden := filepath.Join("testdata", "decision", c.name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("outcome differs from %s (rerun with -update to accept):\n%s", golden, got)
			}
		})
	}
}

// decisionTasks between them read every file of the decision root: the
// architect in the default pack team (its mixin base, a ${file:} target,
// an ${env:} placeholder, the overlay profile, a Mode, both skills), the
// tester in base, and the tester in the embedded default pack.
var decisionTasks = []string{
	`{"task_id":"T-1","role":"architect"}`,
	`{"task_id":"T-3","role":"tester","pack":"base"}`,
	`{"task_id":"T-4","role":"tester","pack":"default"}`,
}

// decide handles a task and returns its decision's inputs.
func decide(t *testing.T, snap *discover.Snapshot, data string) []events.DecisionInput {
	t.Helper()
	task, ref, err := events.DecodeTaskData([]byte(data), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := pipeline.Handle(snap, task, ref, nil)
	d := out.Decision()
	if d == nil {
		t.Fatalf("%s: no decision", data)
	}
	return d.Inputs
}

// TestDecisionInputsCoverEveryFile: each file of the root is listed, with
// the sha256 of its bytes, by the decision of a task that reads it, and
// editing that file changes only that input's digest in that decision.
func TestDecisionInputsCoverEveryFile(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(decisionRoot)); err != nil {
		t.Fatal(err)
	}
	snap := loadDecisionRoot(t, root)
	readBy := map[string][]string{} // origin → the tasks whose decision lists it
	kinds := map[string]bool{}
	for _, task := range decisionTasks {
		for _, in := range decide(t, snap, task) {
			kinds[in.Kind] = true
			if in.Kind == resolve.InputPlaceholderEnv {
				if in.Digest != nil {
					t.Errorf("env placeholder %s has a digest", in.Name)
				}
				continue
			}
			if !slices.Contains(readBy[in.Origin], task) {
				readBy[in.Origin] = append(readBy[in.Origin], task)
			}
			if p, ok := diskPath(root, in.Origin); ok {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if sum := sha256.Sum256(b); *in.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
					t.Errorf("%s: digest %s is not the sha256 of its bytes", in.Origin, *in.Digest)
				}
			}
		}
	}
	for _, f := range snap.Files {
		if len(readBy[f.File]) == 0 {
			t.Errorf("file %s was read but no decision lists it", f.File)
		}
	}
	for _, k := range []string{resolve.InputConfig, resolve.InputCatalogRole, resolve.InputCatalogMode, resolve.InputPack, resolve.InputMixin,
		resolve.InputProfile, resolve.InputPreamble, resolve.InputSkill, resolve.InputPlaceholderFile, resolve.InputPlaceholderEnv} {
		if !kinds[k] {
			t.Errorf("no input of kind %s", k)
		}
	}

	edited := 0
	for _, f := range snap.Files {
		p, ok := diskPath(root, f.File)
		if !ok {
			continue // embedded
		}
		t.Run(f.File, func(t *testing.T) {
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(p, orig, 0o644)
			if err := os.WriteFile(p, edit(f.File, orig), 0o644); err != nil {
				t.Fatal(err)
			}
			next := loadDecisionRoot(t, root)
			for _, task := range readBy[f.File] {
				before, after := decide(t, snap, task), decide(t, next, task)
				if len(after) != len(before) {
					t.Fatalf("%s: %d inputs after the edit, %d before", task, len(after), len(before))
				}
				for i, b := range before {
					a := after[i]
					if a.Kind != b.Kind || a.Name != b.Name || a.Origin != b.Origin {
						t.Errorf("%s: input %d: %+v became %+v", task, i, b, a)
					}
					same := (a.Digest == nil) == (b.Digest == nil) && (a.Digest == nil || *a.Digest == *b.Digest)
					if (b.Origin == f.File && b.Kind != resolve.InputPlaceholderEnv) == same {
						t.Errorf("%s: input %s: digest changed %v after editing %s", task, b.Origin, !same, f.File)
					}
				}
			}
		})
		edited++
	}
	if edited < 10 {
		t.Errorf("only %d files edited", edited)
	}
}

// TestDecisionInputsAreTheDecisions: a decision lists what it read and
// nothing of the rest of the root: no other Role, pack or profile.
func TestDecisionInputsAreTheDecisions(t *testing.T) {
	snap := loadDecisionRoot(t, decisionRoot)
	origins := func(task string) []string {
		var out []string
		for _, in := range decide(t, snap, task) {
			out = append(out, in.Kind+" "+in.Origin)
		}
		return out
	}
	for _, c := range []struct {
		task string
		want []string
	}{
		{decisionTasks[1], []string{
			"catalog_role catalog/roles/tester.md", "pack packs/base.yaml", "preamble prompts/preamble.md", "config rolecall.yaml",
		}},
		{decisionTasks[2], []string{
			"pack builtin:packs/default.yaml", "catalog_role catalog/roles/tester.md", "preamble prompts/preamble.md", "config rolecall.yaml",
		}},
		// A failure lists what the request names that exists: the default
		// pack with its chain, but no Role ("ghost" is none) and no profile.
		{`{"task_id":"T-2","role":"ghost"}`, []string{
			"mixin packs/base.yaml", "pack packs/team.yaml", "placeholder_env packs/team.yaml",
			"placeholder_file prompts/authority.txt", "preamble prompts/preamble.md", "config rolecall.yaml",
		}},
		// An overlay named as a replacement fails; the profile the role
		// token names is listed, and no catalog Role.
		{`{"task_id":"T-5","role":"external:house-style"}`, []string{
			"profile agents/house-style.md", "mixin packs/base.yaml", "pack packs/team.yaml", "placeholder_env packs/team.yaml",
			"placeholder_file prompts/authority.txt", "preamble prompts/preamble.md", "config rolecall.yaml",
		}},
	} {
		if got := origins(c.task); !slices.Equal(got, c.want) {
			t.Errorf("%s lists\n%q\nwant\n%q", c.task, got, c.want)
		}
	}
	arch := origins(decisionTasks[0])
	for _, not := range []string{"catalog_role catalog/roles/tester.md", "pack builtin:packs/default.yaml"} {
		if slices.Contains(arch, not) {
			t.Errorf("the architect's decision lists %s", not)
		}
	}
	if !slices.Contains(arch, "mixin packs/base.yaml") {
		t.Errorf("the architect's decision does not list team's mixin base: %q", arch)
	}
}

// TestDecisionInputsStaySmall: on a root of thousands of profiles,
// hundreds of Roles and packs, an outcome lists the dozen inputs its
// decision read and stays a few KB, where a list of every file would put
// megabytes in each.
func TestDecisionInputsStaySmall(t *testing.T) {
	// The root of the bug report; -short makes it a tenth.
	roles, packs, profiles := 2000, 500, 10000
	if testing.Short() {
		roles, packs, profiles = 200, 50, 1000
	}
	root := t.TempDir()
	write := func(name, body string) {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("catalog/modes/careful.md", "---\nname: careful\ndescription: Careful.\nconflicts_with: []\n---\nBe careful.\n")
	for i := range roles {
		write(fmt.Sprintf("catalog/roles/role-%d.md", i), fmt.Sprintf("---\nname: role-%d\ndescription: Role %d.\n---\nYou are role %d.\n", i, i, i))
	}
	write("packs/base.yaml", "roles: {}\n")
	for i := range packs {
		write(fmt.Sprintf("packs/pack-%d.yaml", i), fmt.Sprintf("extends: [base]\nroles:\n  role-%d:\n    model: m-%d\n    default_modes: [careful]\n", i, i))
	}
	for i := range profiles {
		write(fmt.Sprintf("agents/p-%d.md", i), fmt.Sprintf("---\ndisposition: overlay\nbase_role: role-%d\ndescription: P %d.\n---\nProfile %d.\n", i%roles, i, i))
	}
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(snap.Files); n < roles+packs+profiles {
		t.Fatalf("the root has %d files", n)
	}
	task, ref, err := events.DecodeTaskData([]byte(fmt.Sprintf(`{"task_id":"T-1","role":"role-7","pack":"pack-7","profile":"p-%d"}`, roles+7)), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := pipeline.Handle(snap, task, ref, nil)
	if out.Resolved == nil {
		t.Fatalf("failed: %+v", out.Failure)
	}
	var got []string
	for _, in := range out.Resolved.Decision.Inputs {
		got = append(got, in.Kind+" "+in.Origin)
	}
	want := []string{
		fmt.Sprintf("profile agents/p-%d.md", roles+7), "preamble builtin:preamble.md", "catalog_mode catalog/modes/careful.md",
		"catalog_role catalog/roles/role-7.md", "mixin packs/base.yaml", "pack packs/pack-7.yaml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("inputs\n%q\nwant\n%q", got, want)
	}
	_, _, body, err := events.EncodeResolved("", events.OutcomeMeta{ID: "rc-1", Source: "fleet", CausationID: "ev-1"}, out.Resolved)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d files in the root; the outcome lists %d inputs in %d bytes", len(snap.Files), len(got), len(body))
	if len(body) > 8<<10 {
		t.Errorf("the outcome is %d bytes", len(body))
	}
}

// diskPath maps an input's origin to its file under root (false for an
// embedded file). The skill source "team" is vendor/team.
func diskPath(root, origin string) (string, bool) {
	if strings.HasPrefix(origin, discover.BuiltinPrefix) {
		return "", false
	}
	if rest, ok := strings.CutPrefix(origin, "team:/"); ok {
		origin = "vendor/team/" + rest
	}
	return filepath.Join(root, filepath.FromSlash(origin)), true
}

// edit changes a file's bytes and keeps it valid.
func edit(name string, b []byte) []byte {
	switch filepath.Ext(name) {
	case ".yaml":
		return append(b, "# edited\n"...)
	case ".txt":
		return []byte("Decide the boundaries, edited\n")
	default:
		return append(b, "\nEdited.\n"...)
	}
}

// TestDecisionOfUndecodableTask: a decision of a task that could not be
// decoded records a null task and no inputs.
func TestDecisionOfUndecodableTask(t *testing.T) {
	snap := loadDecisionRoot(t, decisionRoot)
	d := pipeline.NewDecision(snap, nil, nil, nil)
	if string(d.Task) != "null" || len(d.Inputs) != 0 || d.Inputs == nil || d.PromptDigest != nil || d.Config.Digest != snap.Digest {
		t.Errorf("got %+v", d)
	}
}

// TestOutcomeTooLargeKeepsItsRecord: an outcome over the server's max
// payload becomes the typed failure; its decision record holds the task
// with the extra prompt replaced by its digest, and the task gets exactly
// that one outcome and is acked (nothing pending, nothing lost).
func TestOutcomeTooLargeKeepsItsRecord(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDataBytes = 900 << 10
	h := newHarness(t, cfg)
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Version: "9.9.9"})
	prompt := strings.Repeat("z", 400<<10)
	id := h.submit(`{"task_id":"T-huge","role":"architect","overrides":{"extra_prompt":"`+prompt+`"}}`, false)
	outs := h.waitOutcomes(1, 10*time.Second)
	exactlyOnce(t, []string{id}, outs)
	f := failureOf(t, outs[0].ev)
	if f.Code != resolve.CodeMaterializeFailed || f.Details["reason"] != "outcome_too_large" {
		t.Fatalf("got %s %v, want materialize_failed/outcome_too_large", f.Code, f.Details)
	}
	d := f.Decision
	if d == nil {
		t.Fatal("the too-large failure has no decision record")
	}
	var task events.Task
	if err := json.Unmarshal(d.Task, &task); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(prompt))
	if task.Override == nil || task.Override.ExtraPrompt == nil || *task.Override.ExtraPrompt != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("recorded task %s, want extra_prompt replaced by its digest", d.Task)
	}
	if d.ID != outs[0].msgID || d.WorkerVersion != "9.9.9" || len(d.Inputs) == 0 || d.PromptDigest == nil {
		t.Errorf("record %q %q, %d inputs, prompt digest %v", d.ID, d.WorkerVersion, len(d.Inputs), d.PromptDigest)
	}
	if err := schematest.Validate(events.SchemaFailed, outs[0].ev.Data()); err != nil {
		t.Errorf("schema: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		c, err := h.js.Consumer(ctx, cfg.TasksStream, cfg.Consumer)
		if err != nil {
			t.Fatal(err)
		}
		info, err := c.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 && info.NumPending == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the task is still pending: %+v", info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLargePromptFits: a 200 KiB extra prompt, which the outcome carries
// four times (prompt_body, system_message, prompt_overlays, the decision's
// task), still fits the server's default max payload of 1 MiB.
func TestLargePromptFits(t *testing.T) {
	h := newHarness(t, testConfig())
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
	h.submit(`{"task_id":"T-big","role":"architect","overrides":{"extra_prompt":"`+strings.Repeat("y", 200<<10)+`"}}`, false)
	o := h.waitOutcomes(1, 10*time.Second)[0]
	r := resolvedOf(t, o.ev)
	if r.Decision == nil || !strings.Contains(string(r.Decision.Task), strings.Repeat("y", 200<<10)) {
		t.Errorf("the decision does not record the task as decoded")
	}
	if n := len(o.ev.Data()); n > 1<<20 {
		t.Errorf("outcome data %d bytes", n)
	}
}
