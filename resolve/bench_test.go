package resolve_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/resolve"
)

// benchInputs is a realistic snapshot: a sealed catalog of 12 Roles with
// ~1.5 KB bodies and 14 Modes with ~500 B behaviors, and a sealed pack whose
// entries carry all three directive sections — what discovery hands the
// resolver per task.
func benchInputs() resolve.Inputs {
	para := "Work from the evidence in front of you, state your assumptions, and keep the reader in mind. "
	cat := resolve.Catalog{Roles: map[string]resolve.Role{}, Modes: map[string]resolve.Mode{}}
	pack := resolve.Pack{Name: "default", Roles: map[string]resolve.PackEntry{}}
	for i := range 12 {
		name := fmt.Sprintf("role%02d", i)
		cat.Roles[name] = resolve.Role{
			Name: name, Description: "A built-in Role.",
			Body:             "# " + name + "\n\n" + strings.Repeat(para, 16), // ~1.5 KB
			Emits:            []string{"report", "decision"},
			ArtifactDefaults: map[string]any{"format": "markdown", "sections": []any{"context", "decision"}},
		}
		pack.Roles[name] = resolve.PackEntry{
			Model: ptr("claude-opus-4-1"), Effort: ptr("high"),
			DefaultModes: []string{"mode00", "mode01"},
			Authority:    []string{"Define component boundaries and interfaces.", "Select among design alternatives and record the decision."},
			Boundaries:   []string{"Do not write or merge production code.", "Do not override security requirements."},
			Escalations:  []string{"Requirements conflict and no design satisfies all of them.", "A decision is costly to reverse."},
		}
	}
	for i := range 14 {
		name := fmt.Sprintf("mode%02d", i)
		cat.Modes[name] = resolve.Mode{Name: name, Description: "A Mode.", Behaviors: strings.Repeat(para, 5)} // ~500 B
	}
	sc, sp := cat.Seal(), pack.Seal()
	return resolve.Inputs{
		Catalog: &sc, Pack: &sp, PackSelection: resolve.PackFromWorkerDefault,
		Defaults: resolve.RuntimeDefaults{Model: ptr("claude-sonnet-4-5"), Tools: []string{"read", "grep", "edit"}, LionSystem: true,
			Permissions: &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Allow: map[string][]string{"read": {"**"}}, Deny: map[string][]string{"bash": {"rm *"}}}},
	}
}

func benchResolve(b *testing.B, ref resolve.RoleRef, in resolve.Inputs) {
	b.Helper()
	if _, err := resolve.Resolve(ref, in); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := resolve.Resolve(ref, in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveSharedCasts is BenchmarkResolveCasts as the worker
// resolves: ResolveShared with a preamble, its text from an arena.
func BenchmarkResolveSharedCasts(b *testing.B) {
	in := benchInputs()
	in.Task.Modes = []string{"mode03", "mode07"}
	ref, arena := resolve.RoleName("role04"), new(resolve.TextArena)
	if _, _, err := resolve.ResolveShared(ref, in, "You are part of a fleet.", arena); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := resolve.ResolveShared(ref, in, "You are part of a fleet.", arena); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResolveCasts: a casts identity with two requested Modes and the
// pack's directive block (target: < 5 µs, < 40 allocs).
func BenchmarkResolveCasts(b *testing.B) {
	in := benchInputs()
	in.Task.Modes = []string{"mode03", "mode07"}
	benchResolve(b, resolve.RoleName("role04"), in)
}

// BenchmarkResolveOverlay: an overlay profile plus a task extra prompt, on
// the pack's default Modes.
func BenchmarkResolveOverlay(b *testing.B) {
	in := benchInputs()
	in.Profile = &resolve.ExternalProfile{
		Name: "tuned", Disposition: resolve.DispositionOverlay, BaseRole: ptr("role04"),
		Effort: ptr("medium"), Yolo: ptr(true), Timeout: ptr(900),
		ArtifactDefaults: map[string]any{"format": "adr"},
		Body:             strings.Repeat("Prefer boring technology and write down why. ", 10),
	}
	in.Task.ExtraPrompt = ptr("Review only the storage migration and report by Friday.")
	benchResolve(b, resolve.RoleName("role04"), in)
}

// BenchmarkResolveReplacement: an explicit replacement identity.
func BenchmarkResolveReplacement(b *testing.B) {
	in := benchInputs()
	in.Profile = &resolve.ExternalProfile{
		Name: "ghostwriter", Disposition: resolve.DispositionReplacement, Model: ptr("writer-model"),
		Body: strings.Repeat("You write release notes for engineers; be precise and brief. ", 25),
	}
	in.Task.ExtraPrompt = ptr("Cover version 2.3.")
	benchResolve(b, resolve.ExternalRef{Name: "ghostwriter"}, in)
}

// BenchmarkInputsDigest: the per-task digest over a sealed catalog and pack
// and a task with every override set.
func BenchmarkInputsDigest(b *testing.B) {
	in := benchInputs()
	in.Task = resolve.TaskOverrides{
		Model: ptr("task-model"), Effort: ptr("low"), Modes: []string{"mode03", "mode07"},
		ExtraPrompt: ptr("Review only the storage migration."), Tools: []string{"read", "diff"},
		Permissions: &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Allow: map[string][]string{"read": {"**"}}},
		Yolo:        ptr(false), Bypass: ptr(true), FastMode: ptr(false), LionSystem: ptr(true),
	}
	in.Profile = &resolve.ExternalProfile{Name: "tuned", Disposition: resolve.DispositionOverlay, BaseRole: ptr("role04"),
		ArtifactDefaults: map[string]any{"format": "adr"}, Body: "Prefer boring technology."}
	ref := resolve.RoleName("role04")
	b.ReportAllocs()
	for b.Loop() {
		_ = resolve.InputsDigest(ref, in)
	}
}

// BenchmarkPlanCasts is BenchmarkResolveSharedCasts plus the inputs
// digest, finished from a plan as the worker does for a task whose
// configuration it has seen: ResolveShared and InputsDigest side by side
// first, then the plan's Resolve (or ResolveApart) and InputsDigest with
// the task's extra prompt.
func BenchmarkPlanCasts(b *testing.B) {
	in := benchInputs()
	in.Task.Modes = []string{"mode03", "mode07"}
	in.Task.ExtraPrompt = ptr("Design the storage layer for the audit stream (ticket T-1234).")
	ref, arena := resolve.RoleName("role04"), new(resolve.TextArena)
	const preamble = "You are part of a fleet."
	b.Run("unplanned", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := resolve.ResolveShared(ref, in, preamble, arena); err != nil {
				b.Fatal(err)
			}
			_ = resolve.InputsDigest(ref, in)
		}
	})
	b.Run("planned", func(b *testing.B) {
		plan := resolve.NewPlan(ref, in, preamble)
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := plan.Resolve(in.Task.ExtraPrompt, arena); err != nil {
				b.Fatal(err)
			}
			_ = plan.InputsDigest(in.Task.ExtraPrompt)
		}
	})
	// What the worker runs since session 10: the extra prompt kept apart.
	b.Run("planned-apart", func(b *testing.B) {
		plan := resolve.NewPlan(ref, in, preamble)
		b.ReportAllocs()
		for b.Loop() {
			if _, _, tail, err := plan.ResolveApart(in.Task.ExtraPrompt, arena); err != nil || tail == "" {
				b.Fatal(err, tail)
			}
			_ = plan.InputsDigest(in.Task.ExtraPrompt)
		}
	})
	b.Run("new-plan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = resolve.NewPlan(ref, in, preamble)
		}
	})
}
