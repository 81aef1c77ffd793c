package discover_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// TestOrigin renders `worker resolve --explain`-style lines (field, source,
// origin) for a few tasks against the full root and compares them with a
// golden file.
func TestOrigin(t *testing.T) {
	s := mustLoad(t, copyRoot(t, "full"))
	tasks := []struct {
		name string
		req  discover.Request
	}{
		{"casts architect from the default pack", discover.Request{Ref: resolve.RoleName("architect")}},
		{"overlay with task model and pack", discover.Request{
			Ref: resolve.RoleName("architect"), Profile: ptr("arch-notes"), Pack: ptr("team"),
			Task: resolve.TaskOverrides{Model: ptr("task-model"), Modes: []string{}, Yolo: ptr(false)},
		}},
		{"bound overlay on reviewer", discover.Request{Ref: resolve.RoleName("reviewer")}},
		{"overlay model without task overrides", discover.Request{Ref: resolve.RoleName("architect"), Profile: ptr("arch-notes")}},
		{"replacement scribe", discover.Request{Ref: resolve.ExternalRef{Name: "scribe"}}},
		{"embedded default pack chosen by the task", discover.Request{Ref: resolve.RoleName("critic"), Pack: ptr("default")}},
	}
	var b strings.Builder
	for _, task := range tasks {
		in, err := s.Inputs(task.req)
		if err != nil {
			t.Fatalf("%s: %v", task.name, err)
		}
		in.Explain = true
		spec, err := resolve.Resolve(task.req.Ref, in)
		if err != nil {
			t.Fatalf("%s: %v", task.name, err)
		}
		fmt.Fprintf(&b, "# %s\n", task.name)
		for _, f := range spec.Sources.Fields() {
			line := fmt.Sprintf("%-18s %-22s %s", f[0], f[1], s.Origin(in, &spec, f[0]))
			fmt.Fprintln(&b, strings.TrimRight(line, " "))
		}
	}
	got := b.String()
	golden(t, "origin-full.txt", got)

	for _, want := range []string{
		"model              pack                   packs/team.yaml:5",
		"model              task                   task",
		"model              external_profile       agents/arch-notes.md:5",
		"timeout            external_profile       agents/arch-notes.md:6",
		"prompt             external_overlay       agents/arch-notes.md:10",
		"active             external_profile       agents/scribe.md",
		"effort             runtime_default        rolecall.yaml:5",
		"tools              runtime_default        rolecall.yaml:6",
		"yolo               external_profile       agents/review-tone/review-tone.md:5",
		"lion_system        runtime_default        rolecall.yaml:13",
		"prompt             casts                  builtin:catalog/roles/architect.md:6",
		"artifact_defaults  role                   builtin:catalog/roles/critic.md:5",
		"pack               worker_default         rolecall.yaml:2",
		"artifact_defaults  none",
	} {
		if !hasLine(got, want) {
			t.Errorf("explain output lacks the line %q", want)
		}
	}
}

func TestOriginWithoutConfig(t *testing.T) {
	s := mustLoad(t, copyRoot(t, ""))
	in, _ := s.Inputs(discover.Request{Ref: resolve.RoleName("planner")})
	in.Explain = true
	spec, err := resolve.Resolve(resolve.RoleName("planner"), in)
	if err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]discover.Origin{
		"lion_system": {File: "builtin"},
		"pack":        {File: "builtin"},
		"permissions": {},
		"identity":    {File: "builtin:catalog/roles/planner.md"},
		"nonexistent": {},
	} {
		if got := s.Origin(in, &spec, field); got != want {
			t.Errorf("Origin(%s) = %+v, want %+v", field, got, want)
		}
	}
}

// TestOriginThroughComposition prints every candidate of every field's
// explain chain with the file and line discovery maps it to, for a pack
// that extends a pack that extends another and has variants: each pack
// value points at the mixin or variant that wrote it, shadowed ones
// included.
func TestOriginThroughComposition(t *testing.T) {
	dir := writeRoot(t, files{
		"rolecall.yaml": "defaults:\n  model: runtime-model\n  effort: low\n",
		"packs/base.yaml": `roles:
  architect:
    model: claude-opus-4-1
    effort: medium
    default_modes: [systematic]
    authority: [Decide boundaries]
`,
		"packs/mid.yaml": "extends: [base]\nroles:\n  architect:\n    boundaries: [\"${file:prompts/boundary.txt}\"]\n",
		"packs/team.yaml": `extends: [mid]
roles:
  architect:
    default_modes: [systematic, framing]
    variants:
      - when: {model: {matches: "claude-opus-*"}}
        set: {effort: high}
      - when: {role: architect}
        set: {escalations: [Budget exceeded]}
`,
		"prompts/boundary.txt": "Stay out of production\n",
	})
	s := mustLoad(t, dir)
	var b strings.Builder
	for _, task := range []struct {
		name string
		req  discover.Request
	}{
		{"the pack's values, one variant's effort", discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("team")}},
		{"a task model the first variant does not match", discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("team"), Task: resolve.TaskOverrides{Model: ptr("claude-sonnet-4-5")}}},
	} {
		in, err := s.Inputs(task.req)
		if err != nil {
			t.Fatal(err)
		}
		in.Explain = true
		spec, err := resolve.Resolve(task.req.Ref, in)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# %s (variants %v)\n", task.name, spec.Pack.Variants)
		for _, f := range spec.Explain {
			fmt.Fprintf(&b, "%s: %s from %s\n", f.Field, f.Source, s.FieldOrigin(in, &spec, f))
			for _, c := range f.Candidates {
				line := fmt.Sprintf("  %-9s %-22s %-45s %s", c.Status, c.Source, c.Key, s.CandidateOrigin(in, &spec, c))
				fmt.Fprintln(&b, strings.TrimRight(line, " "))
			}
		}
	}
	got := b.String()
	golden(t, "origin-composed.txt", got)
	for _, want := range []string{
		"effort: pack_variant from packs/team.yaml:7",
		"model: pack from packs/base.yaml:3",
		"modes: pack from packs/team.yaml:4",
		"  selected  pack_variant           roles.architect.variants[1].set.escalations   packs/team.yaml:9",
		"  selected  pack                   roles.architect.boundaries                    packs/mid.yaml:4",
		"  shadowed  runtime_default        defaults.effort                               rolecall.yaml:3",
		"effort: pack from packs/base.yaml:4",
	} {
		if !hasLine(got, want) {
			t.Errorf("the chains lack the line %q", want)
		}
	}
}
