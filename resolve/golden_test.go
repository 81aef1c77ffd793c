package resolve_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/resolve"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

const goldenPreamble = "You are part of a rolecall fleet."

// goldenScenarios are the named end-to-end cases whose full output is kept
// in testdata/<name>.json. Regenerate with: go test ./resolve -update
func goldenScenarios() []struct {
	name string
	ref  resolve.RoleRef
	in   resolve.Inputs
} {
	tuned := overlay("tuned-architect", "architect", func(p *resolve.ExternalProfile) {
		p.Description = "Architect tuned for this repo."
		p.Model, p.Effort = ptr("profile-model"), ptr("profile-effort")
		p.Yolo, p.Bypass, p.FastMode, p.LionSystem = ptr(true), ptr(false), nil, ptr(false)
		p.ArtifactDefaults = map[string]any{"format": "adr", "path": "docs/adr", "review": map[string]any{"required": true}}
		p.Timeout, p.ResumeOnTimeout = ptr(900), true
		p.Body = "Prefer boring technology.\nCite the ADR you change."
	})
	return []struct {
		name string
		ref  resolve.RoleRef
		in   resolve.Inputs
	}{
		{"casts-pack-defaults", casts("architect"), inputs()},
		{"casts-task-overrides", casts("reviewer"), inputs(func(in *resolve.Inputs) { in.PackSelection = resolve.PackFromTask }, withTask(func(t *resolve.TaskOverrides) {
			t.Model, t.Effort = ptr("task-model"), ptr("low")
			t.Modes = []string{"adversarial", "premortem"}
			t.ExtraPrompt = ptr("Review only the migration.")
			t.Tools = []string{"read", "diff"}
			t.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionRules,
				Allow: map[string][]string{"read": {"**"}}, Deny: map[string][]string{"bash": {"rm *", "git push*"}}, Escalate: map[string][]string{}}
			t.Yolo, t.Bypass, t.FastMode, t.LionSystem = ptr(false), ptr(true), ptr(true), ptr(false)
		}))},
		{"casts-explicit-empty-modes-and-tools", casts("architect"), inputs(taskModes(), withTask(func(t *resolve.TaskOverrides) { t.Tools = []string{} }))},
		{"overlay-full", casts("architect"), inputs(withProfile(tuned), taskModes("premortem"), extra("Decide by Friday."),
			withDefaults(func(d *resolve.RuntimeDefaults) { d.Yolo, d.Bypass, d.FastMode = false, true, true }))},
		{"replacement", external("ghostwriter"), inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) {
			p.Model = ptr("writer-model")
			p.Timeout = ptr(120)
		})))},
		{"replacement-extra-prompt", external("ghostwriter"), inputs(withProfile(replacement("ghostwriter")), extra("Write the release notes."))},
		{"replacement-named-like-a-role", external("architect"), inputs(withProfile(replacement("architect")))},
		{"legacy-replacement", external("oldtimer"), inputs(withProfile(legacy("oldtimer")))},
		{"tier-fallback", casts("architect"), inputs(withModels(func(m *resolve.ModelCatalog) {
			m.AllowFallback, m.Tiers["strong"] = true, nil
		}), withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("tier:strong") }))},
		{"skills-narrowed-by-task", casts("architect"), inputs(withSkills("adr-writing", "code-review", "diagramming"),
			withEntry("architect", func(e *resolve.PackEntry) { e.Skills = []string{"adr-*", "diagram*"} }),
			withTask(func(t *resolve.TaskOverrides) { t.Skills = []string{"diagramming"} }))},
		{"variant-by-model", casts("architect"), inputs(withEntry("architect", func(e *resolve.PackEntry) {
			e.Variants = []resolve.Variant{
				{When: []resolve.Condition{{Key: resolve.WhenModel, Value: "claude-*", Glob: true}}, Set: resolve.VariantSet{Effort: ptr("high")}},
				{When: []resolve.Condition{{Key: resolve.WhenModel, Value: "gpt-*", Glob: true}}, Set: resolve.VariantSet{Effort: ptr("medium")}},
				{When: []resolve.Condition{{Key: resolve.WhenRole, Value: "architect"}}, Set: resolve.VariantSet{Authority: []string{"Own the design."}}},
			}
		}), withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("claude-sonnet-4-5") }))},
		{"fail-tier-unsupported", casts("architect"), inputs(withModels(), withEntry("architect", func(e *resolve.PackEntry) { e.Tiers = []string{"strong"} }),
			withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("tier:cheap") }))},
		{"fail-skill-overlap", casts("architect"), inputs(withSkills("adr-writing"), withEntry("architect", func(e *resolve.PackEntry) { e.Skills = []string{"adr-*", "*"} }))},
		{"fail-role-unknown", casts("ghost"), inputs()},
		{"fail-replacement-requires-external-ref", casts("architect"), inputs(withProfile(replacement("ghostwriter")))},
		{"fail-profile-disposition-required", external("oldtimer"), inputs(withProfile(legacy("oldtimer")), rejectLegacy)},
		{"fail-role-inactive", casts("dormant"), inputs()},
		{"fail-model-unresolved", casts("reviewer"), inputs(noModel)},
		{"fail-mode-disallowed", casts("reviewer"), inputs(taskModes("socratic"))},
		{"fail-mode-conflict", casts("architect"), inputs(taskModes("slow", "premortem", "fast"))},
		{"fail-pack-default-invalid", casts("scout"), inputs(withEntry("scout", func(e *resolve.PackEntry) { e.DefaultModes = []string{"fast", "systematic"} }))},
		{"fail-resume-without-timeout", casts("architect"), inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.ResumeOnTimeout = true })))},
	}
}

// golden is the file layout: the scenario, its inputs digest, and either
// the resolved spec (with the materialized system message) or the failure
// payload of docs/CONFIG.md.
type golden struct {
	Scenario      string                     `json:"scenario"`
	Role          string                     `json:"role"`
	InputsDigest  string                     `json:"inputs_digest"`
	Resolved      *resolve.ResolvedAgentSpec `json:"resolved,omitzero"`
	SystemMessage *string                    `json:"system_message,omitzero"`
	Failure       *goldenFailure             `json:"failure,omitzero"`
}

type goldenFailure struct {
	Code    resolve.Code   `json:"code"`
	Stage   resolve.Stage  `json:"stage"`
	Subject *string        `json:"subject"`
	Details map[string]any `json:"details"`
	Message string         `json:"message"`
}

func renderGolden(t *testing.T, name string, ref resolve.RoleRef, in resolve.Inputs) []byte {
	t.Helper()
	g := golden{Scenario: name, Role: ref.Token(), InputsDigest: resolve.InputsDigest(ref, in)}
	spec, err := resolve.Resolve(ref, in)
	var re *resolve.ResolutionError
	switch {
	case err == nil:
		m, err := materialize.Materialize(&spec, goldenPreamble)
		if err != nil {
			t.Fatalf("Materialize: %v", err)
		}
		g.Resolved, g.SystemMessage = &spec, &m.SystemMessage
	case errors.As(err, &re):
		f := &goldenFailure{Code: re.Code, Stage: re.Code.Stage(), Details: re.Details, Message: re.Message}
		if re.Subject != "" {
			f.Subject = &re.Subject
		}
		g.Failure = f
	default:
		t.Fatalf("Resolve returned an untyped error: %v", err)
	}
	b, err := json.Marshal(g, nilAsNull, json.Deterministic(true), jsontext.Multiline(true), jsontext.WithIndent("  "))
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestGolden(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range goldenScenarios() {
		names[sc.name+".json"] = true
		t.Run(sc.name, func(t *testing.T) {
			path := filepath.Join("testdata", sc.name+".json")
			got := renderGolden(t, sc.name, sc.ref, sc.in)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./resolve -update to create it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s differs from the resolver's output (-file +resolver):\n%s", path, cmp.Diff(string(want), string(got)))
			}
		})
	}
	// Every file in testdata/ belongs to a scenario, so a renamed scenario
	// cannot leave a stale file behind.
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !names[filepath.Base(f)] && !*update {
			t.Errorf("stale golden file %s has no scenario", f)
		}
	}
	if len(files) == 0 && !*update {
		t.Errorf("no golden files found")
	}
}
