package resolve_test

import (
	"github.com/rolecall/rolecall/resolve"
)

// This file holds the fixture every table test starts from, and small
// option functions that change one thing each, so a case reads as "the
// fixture, plus this".
//
// The fixture catalog has five Roles and seven Modes; the pack "team" has
// entries that each exercise one shape:
//
//	architect  model+effort, default_modes [systematic premortem], no allowlist, all three directive sections
//	reviewer   no model/effort, no defaults, modes_allow [adversarial premortem fast slow], only boundaries
//	scout      the empty entry {}
//	dormant    active: false
//	(orphan is in the catalog but not in the pack)
//
// Runtime defaults: model "runtime-model", no effort, tools [read grep], no
// permissions, flags false, lion_system true.

func ptr[T any](v T) *T { return &v }

func fixtureCatalog() *resolve.Catalog {
	return &resolve.Catalog{
		Roles: map[string]resolve.Role{
			"architect": {
				Name: "architect", Description: "Designs systems.",
				Body:             "You are the architect.",
				Emits:            []string{"design_doc", "adr"},
				ArtifactDefaults: map[string]any{"format": "markdown", "sections": []any{"context", "decision"}},
			},
			"reviewer": {Name: "reviewer", Description: "Reviews changes.", Body: "You are the reviewer.", Emits: []string{"review"}},
			"scout":    {Name: "scout", Description: "Explores.", Body: "You are the scout."},
			"dormant":  {Name: "dormant", Description: "Inactive in team.", Body: "You are dormant.", Emits: []string{"nothing"}},
			"orphan":   {Name: "orphan", Description: "Not in the pack.", Body: "You are the orphan."},
		},
		Modes: map[string]resolve.Mode{
			"systematic":  {Name: "systematic", Behaviors: "Work step by step."},
			"premortem":   {Name: "premortem", Behaviors: "Assume the plan failed; explain why."},
			"adversarial": {Name: "adversarial", Behaviors: "Attack the proposal."},
			"fast":        {Name: "fast", Behaviors: "Answer quickly.", ConflictsWith: []string{"slow", "systematic"}},
			"slow":        {Name: "slow", Behaviors: "Take your time."},
			"socratic":    {Name: "socratic", Behaviors: "Ask before you tell.", ConflictsWith: []string{}},
			"blank":       {Name: "blank", Behaviors: " \n\t "},
		},
	}
}

func fixturePack() *resolve.Pack {
	return &resolve.Pack{
		Name: "team",
		Roles: map[string]resolve.PackEntry{
			"architect": {
				Model:        ptr("pack-model"),
				Effort:       ptr("pack-effort"),
				DefaultModes: []string{"systematic", "premortem"},
				Authority:    []string{"Choose the design.", "Record the decision."},
				Boundaries:   []string{"Do not write production code."},
				Escalations:  []string{"Requirements conflict."},
			},
			"reviewer": {
				ModesAllow: []string{"adversarial", "premortem", "fast", "slow"},
				Boundaries: []string{"Do not merge."},
			},
			"scout":   {},
			"dormant": {Active: ptr(false)},
		},
	}
}

// inputs returns fresh fixture inputs (no sharing between calls) with opts
// applied in order.
func inputs(opts ...func(*resolve.Inputs)) resolve.Inputs {
	in := resolve.Inputs{
		Catalog:       fixtureCatalog(),
		Pack:          fixturePack(),
		PackSelection: resolve.PackFromWorkerDefault,
		Defaults: resolve.RuntimeDefaults{
			Model:      ptr("runtime-model"),
			Tools:      []string{"read", "grep"},
			LionSystem: true,
		},
	}
	for _, o := range opts {
		o(&in)
	}
	return in
}

func withProfile(p *resolve.ExternalProfile) func(*resolve.Inputs) {
	return func(in *resolve.Inputs) { in.Profile = p }
}

func withTask(f func(*resolve.TaskOverrides)) func(*resolve.Inputs) {
	return func(in *resolve.Inputs) { f(&in.Task) }
}

func withDefaults(f func(*resolve.RuntimeDefaults)) func(*resolve.Inputs) {
	return func(in *resolve.Inputs) { f(&in.Defaults) }
}

func withEntry(role string, f func(*resolve.PackEntry)) func(*resolve.Inputs) {
	return func(in *resolve.Inputs) {
		e := in.Pack.Roles[role]
		f(&e)
		in.Pack.Roles[role] = e
	}
}

func withMode(name string, f func(*resolve.Mode)) func(*resolve.Inputs) {
	return func(in *resolve.Inputs) {
		m := in.Catalog.Modes[name]
		f(&m)
		in.Catalog.Modes[name] = m
	}
}

func rejectLegacy(in *resolve.Inputs) { in.Policy.RejectLegacyProfiles = true }

func taskModes(modes ...string) func(*resolve.Inputs) {
	return withTask(func(t *resolve.TaskOverrides) {
		t.Modes = append([]string{}, modes...) // non-nil even when empty
	})
}

func overlay(name, base string, mods ...func(*resolve.ExternalProfile)) *resolve.ExternalProfile {
	p := &resolve.ExternalProfile{
		Name: name, Disposition: resolve.DispositionOverlay, BaseRole: ptr(base),
		Body: "Overlay for " + base + ".",
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func replacement(name string, mods ...func(*resolve.ExternalProfile)) *resolve.ExternalProfile {
	p := &resolve.ExternalProfile{
		Name: name, Disposition: resolve.DispositionReplacement,
		Body: "You are " + name + ", a raw identity.",
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func legacy(name string, mods ...func(*resolve.ExternalProfile)) *resolve.ExternalProfile {
	p := replacement(name, mods...)
	p.Disposition = resolve.DispositionLegacy
	return p
}

func casts(role string) resolve.RoleRef    { return resolve.RoleName(role) }
func external(name string) resolve.RoleRef { return resolve.ExternalRef{Name: name} }

// mustResolve resolves and fails the test on error.
func mustResolve(t interface {
	Helper()
	Fatalf(string, ...any)
}, ref resolve.RoleRef, in resolve.Inputs) resolve.ResolvedAgentSpec {
	t.Helper()
	got, err := resolve.Resolve(ref, in)
	if err != nil {
		t.Fatalf("Resolve(%s): unexpected error: %v", ref.Token(), err)
	}
	return got
}

// withModels installs the fixture model catalog: strong, balanced and
// cheap each with a model, fallback in that order, fallback not allowed.
func withModels(mods ...func(*resolve.ModelCatalog)) func(*resolve.Inputs) {
	return func(in *resolve.Inputs) {
		m := &resolve.ModelCatalog{
			Tiers:    map[string]*string{"strong": ptr("model-strong"), "balanced": ptr("model-balanced"), "cheap": ptr("model-cheap")},
			Fallback: []string{"strong", "balanced", "cheap"},
		}
		for _, f := range mods {
			f(m)
		}
		in.Models = m
	}
}

// withSkills makes skills of these names available, each from source
// "root" with a digest made from its name.
func withSkills(names ...string) func(*resolve.Inputs) {
	return func(in *resolve.Inputs) {
		for _, n := range names {
			in.Skills = append(in.Skills, resolve.Skill{Name: n, Source: "root", Digest: "sha256:" + n})
		}
	}
}
