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

// BenchmarkResolveCasts: a casts identity with two requested Modes and the
// pack's directive block.
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

// BenchmarkResolveVariants: the casts task of BenchmarkResolveCasts with
// its pack entry as discovery leaves a composed pack — flat, with two
// compiled variants, one of which matches — against the same entry with
// none: what matching variants adds per task.
func BenchmarkResolveVariants(b *testing.B) {
	for _, withVariants := range []bool{false, true} {
		name := "flat"
		in := benchInputs()
		in.Task.Modes = []string{"mode03", "mode07"}
		if withVariants {
			name = "two-variants"
			e := in.Pack.Roles["role04"]
			e.Variants = []resolve.Variant{
				{When: []resolve.Condition{{Key: resolve.WhenModel, Value: "gpt-*", Glob: true}}, Set: resolve.VariantSet{Effort: ptr("medium")}},
				{When: []resolve.Condition{{Key: resolve.WhenModel, Value: "claude-*", Glob: true}}, Set: resolve.VariantSet{Effort: ptr("high"), Authority: []string{"Own the design."}}},
			}
			roles := map[string]resolve.PackEntry{}
			for k, v := range in.Pack.Roles {
				roles[k] = v
			}
			roles["role04"] = e
			p := resolve.Pack{Name: in.Pack.Name, Roles: roles}.Seal()
			in.Pack = &p
		}
		b.Run(name, func(b *testing.B) { benchResolve(b, resolve.RoleName("role04"), in) })
	}
}
