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
