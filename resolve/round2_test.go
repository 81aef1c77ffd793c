package resolve_test

import (
	"path"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/resolve"
)

// Tables for model tiers, variants and skills: each case is the fixture
// plus the changes its name says, and what the spec must then hold.

func modelIs(s string) func(*resolve.TaskOverrides) {
	return func(t *resolve.TaskOverrides) { t.Model = ptr(s) }
}

func TestTiers(t *testing.T) {
	noTier := (*resolve.ModelTier)(nil)
	tier := func(sym, via string) *resolve.ModelTier { return &resolve.ModelTier{Symbol: sym, ResolvedVia: via} }
	cases := []struct {
		name   string
		ref    resolve.RoleRef
		in     resolve.Inputs
		model  string
		tier   *resolve.ModelTier
		source string
	}{
		{"a literal model is itself, with no tier", casts("architect"), inputs(withModels(), withTask(modelIs("claude-x"))), "claude-x", noTier, "task"},
		{"tier strong is its model", casts("architect"), inputs(withModels(), withTask(modelIs("tier:strong"))), "model-strong", tier("tier:strong", "tier"), "task"},
		{"tier balanced is its model", casts("architect"), inputs(withModels(), withTask(modelIs("tier:balanced"))), "model-balanced", tier("tier:balanced", "tier"), "task"},
		{"tier cheap is its model", casts("architect"), inputs(withModels(), withTask(modelIs("tier:cheap"))), "model-cheap", tier("tier:cheap", "tier"), "task"},
		{"a null tier falls back to the next in order", casts("architect"),
			inputs(withModels(func(m *resolve.ModelCatalog) { m.AllowFallback, m.Tiers["strong"] = true, nil }), withTask(modelIs("tier:strong"))),
			"model-balanced", tier("tier:strong", "fallback:balanced"), "task"},
		{"the walk skips null tiers", casts("architect"),
			inputs(withModels(func(m *resolve.ModelCatalog) {
				m.AllowFallback, m.Tiers["strong"], m.Tiers["balanced"] = true, nil, nil
			}), withTask(modelIs("tier:strong"))),
			"model-cheap", tier("tier:strong", "fallback:cheap"), "task"},
		{"the walk goes on from the tier's place, not from the start", casts("architect"),
			inputs(withModels(func(m *resolve.ModelCatalog) { m.AllowFallback, m.Tiers["balanced"] = true, nil }), withTask(modelIs("tier:balanced"))),
			"model-cheap", tier("tier:balanced", "fallback:cheap"), "task"},
		{"the walk skips tiers the role does not support", casts("architect"),
			inputs(withModels(func(m *resolve.ModelCatalog) {
				m.AllowFallback, m.Tiers["strong"], m.Fallback = true, nil, []string{"strong", "cheap", "balanced"}
			}), withEntry("architect", func(e *resolve.PackEntry) { e.Tiers = []string{"strong", "balanced"} }), withTask(modelIs("tier:strong"))),
			"model-balanced", tier("tier:strong", "fallback:balanced"), "task"},
		{"a supported tier passes the entry's list", casts("architect"),
			inputs(withModels(), withEntry("architect", func(e *resolve.PackEntry) { e.Tiers = []string{"cheap"} }), withTask(modelIs("tier:cheap"))),
			"model-cheap", tier("tier:cheap", "tier"), "task"},
		{"a symbol from the overlay profile", casts("architect"),
			inputs(withModels(), withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.Model = ptr("tier:balanced") }))),
			"model-balanced", tier("tier:balanced", "tier"), "external_profile"},
		{"a symbol from the pack entry", casts("architect"),
			inputs(withModels(), withEntry("architect", func(e *resolve.PackEntry) { e.Model = ptr("tier:cheap") })),
			"model-cheap", tier("tier:cheap", "tier"), "pack"},
		{"a symbol from the runtime default", casts("scout"),
			inputs(withModels(), withDefaults(func(d *resolve.RuntimeDefaults) { d.Model = ptr("tier:strong") })),
			"model-strong", tier("tier:strong", "tier"), "runtime_default"},
		{"a replacement's symbol, with no entry to restrict it", external("ghostwriter"),
			inputs(withModels(), withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.Model = ptr("tier:cheap") }))),
			"model-cheap", tier("tier:cheap", "tier"), "external_profile"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustResolve(t, tc.ref, tc.in)
			if got.Model != tc.model || got.Sources.Model != tc.source {
				t.Errorf("model %q from %s, want %q from %s", got.Model, got.Sources.Model, tc.model, tc.source)
			}
			if tc.tier != nil {
				tc.tier.CatalogDigest = resolve.ModelsDigest(tc.in.Models)
			}
			if diff := cmp.Diff(tc.tier, got.ModelTier); diff != "" {
				t.Errorf("model_tier (-want +got):\n%s", diff)
			}
		})
	}
}

func when(key, value string) resolve.Condition { return resolve.Condition{Key: key, Value: value} }
func glob(key, value string) resolve.Condition {
	return resolve.Condition{Key: key, Value: value, Glob: true}
}

func withVariants(vs ...resolve.Variant) func(*resolve.Inputs) {
	return withEntry("architect", func(e *resolve.PackEntry) { e.Variants = vs })
}

func TestVariants(t *testing.T) {
	effort := func(s string) resolve.VariantSet { return resolve.VariantSet{Effort: ptr(s)} }
	cases := []struct {
		name     string
		in       resolve.Inputs
		effort   string
		source   string
		variants []int
	}{
		{"no variant matches: the entry's own value", inputs(withVariants(resolve.Variant{When: []resolve.Condition{when("model", "other")}, Set: effort("v")})),
			"pack-effort", "pack", []int{}},
		{"an exact model condition", inputs(withTask(modelIs("claude-opus")), withVariants(resolve.Variant{When: []resolve.Condition{when("model", "claude-opus")}, Set: effort("high")})),
			"high", "pack_variant", []int{0}},
		{"a glob model condition", inputs(withTask(modelIs("claude-opus")), withVariants(resolve.Variant{When: []resolve.Condition{glob("model", "claude-*")}, Set: effort("high")})),
			"high", "pack_variant", []int{0}},
		{"two matching variants apply in order, the later winning", inputs(withTask(modelIs("claude-opus")), withVariants(
			resolve.Variant{When: []resolve.Condition{glob("model", "claude-*")}, Set: effort("first")},
			resolve.Variant{When: []resolve.Condition{glob("model", "*-opus")}, Set: effort("second")})),
			"second", "pack_variant", []int{0, 1}},
		{"every condition must hold", inputs(withTask(modelIs("claude-opus")), withVariants(
			resolve.Variant{When: []resolve.Condition{glob("model", "claude-*"), when("pack", "other")}, Set: effort("no")})),
			"pack-effort", "pack", []int{}},
		{"pack and role conditions", inputs(withVariants(
			resolve.Variant{When: []resolve.Condition{when("pack", "team"), when("role", "architect")}, Set: effort("yes")})),
			"yes", "pack_variant", []int{0}},
		{"a condition on the tier symbol as written", inputs(withModels(), withTask(modelIs("tier:cheap")), withVariants(
			resolve.Variant{When: []resolve.Condition{when("tier", "tier:cheap")}, Set: effort("thrifty")})),
			"thrifty", "pack_variant", []int{0}},
		{"the selector's model is the tier's model", inputs(withModels(), withTask(modelIs("tier:strong")), withVariants(
			resolve.Variant{When: []resolve.Condition{when("model", "model-strong")}, Set: effort("deep")})),
			"deep", "pack_variant", []int{0}},
		{"a tier condition never holds for a literal model", inputs(withTask(modelIs("model-cheap")), withVariants(
			resolve.Variant{When: []resolve.Condition{glob("tier", "*")}, Set: effort("no")})),
			"pack-effort", "pack", []int{}},
		{"the task's effort still ranks above a variant", inputs(withTask(func(t *resolve.TaskOverrides) { t.Model, t.Effort = ptr("claude-opus"), ptr("task-effort") }),
			withVariants(resolve.Variant{When: []resolve.Condition{glob("model", "claude-*")}, Set: effort("high")})),
			"task-effort", "task", []int{0}},
		{"the profile's effort ranks above a variant", inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.Effort = ptr("profile-effort") })),
			withVariants(resolve.Variant{Set: effort("high")})),
			"profile-effort", "external_profile", []int{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustResolve(t, casts("architect"), tc.in)
			if got.Effort == nil || *got.Effort != tc.effort || got.Sources.Effort != tc.source {
				t.Errorf("effort %v from %s, want %q from %s", got.Effort, got.Sources.Effort, tc.effort, tc.source)
			}
			if !slices.Equal(got.Pack.Variants, tc.variants) || got.Pack.Variants == nil {
				t.Errorf("pack.variants %v, want %v", got.Pack.Variants, tc.variants)
			}
		})
	}
}

func TestVariantsSetModesDirectivesAndSkills(t *testing.T) {
	in := inputs(withSkills("adr-writing", "diagramming"), withTask(modelIs("claude-opus")), withVariants(resolve.Variant{
		When: []resolve.Condition{glob("model", "claude-*")},
		Set: resolve.VariantSet{
			DefaultModes: []string{"premortem"}, ModesAllow: []string{"premortem", "socratic"},
			Authority: []string{"Own it."}, Skills: []string{"diagram*"},
		},
	}))
	got := mustResolve(t, casts("architect"), in)
	if !slices.Equal(got.Identity.Modes, []string{"premortem"}) || got.Sources.Modes != "pack_variant" {
		t.Errorf("modes %v from %s, want [premortem] from pack_variant", got.Identity.Modes, got.Sources.Modes)
	}
	if !slices.Equal(got.Directives.Authority, []string{"Own it."}) || !slices.Equal(got.Directives.Boundaries, []string{"Do not write production code."}) {
		t.Errorf("directives %+v: the variant's authority and the entry's boundaries expected", got.Directives)
	}
	if len(got.Skills) != 1 || got.Skills[0].Name != "diagramming" || got.Sources.Skills != "pack_variant" {
		t.Errorf("skills %v from %s, want [diagramming] from pack_variant", got.Skills, got.Sources.Skills)
	}
	// The variant's allowlist applies to the task's Modes.
	in.Task.Modes = []string{"systematic"}
	if _, err := resolve.Resolve(casts("architect"), in); !isCode(err, resolve.CodeModeDisallowed) {
		t.Errorf("a Mode outside the variant's allowlist: %v, want mode_disallowed", err)
	}
	// Invalid default Modes set by a variant name it.
	in.Task.Modes = nil
	in.Pack.Roles["architect"].Variants[0].Set.DefaultModes = []string{"ghost"}
	_, err := resolve.Resolve(casts("architect"), in)
	if re, ok := err.(*resolve.ResolutionError); !ok || re.Code != resolve.CodePackDefaultInvalid || re.Details["variant"] != 0 {
		t.Errorf("invalid variant default Modes: %v, want pack_default_invalid naming variant 0", err)
	}
}

func isCode(err error, c resolve.Code) bool {
	re, ok := err.(*resolve.ResolutionError)
	return ok && re.Code == c
}

func TestSkills(t *testing.T) {
	avail := withSkills("adr-writing", "code-review", "diagramming")
	entry := func(p ...string) func(*resolve.Inputs) {
		return withEntry("architect", func(e *resolve.PackEntry) { e.Skills = append([]string{}, p...) })
	}
	task := func(p ...string) func(*resolve.Inputs) {
		return withTask(func(t *resolve.TaskOverrides) { t.Skills = append([]string{}, p...) })
	}
	cases := []struct {
		name   string
		in     resolve.Inputs
		want   []string
		source string
	}{
		{"no patterns: no skills", inputs(avail), []string{}, "none"},
		{"admit by exact name", inputs(avail, entry("code-review")), []string{"code-review"}, "pack"},
		{"admit by glob, lexically", inputs(avail, entry("*-*")), []string{"adr-writing", "code-review"}, "pack"},
		{"several patterns, lexical result", inputs(avail, entry("diagramming", "adr-*")), []string{"adr-writing", "diagramming"}, "pack"},
		{"the task narrows", inputs(avail, entry("*"), task("adr-*")), []string{"adr-writing"}, "task"},
		{"absent task skills: everything admitted", inputs(avail, entry("*")), []string{"adr-writing", "code-review", "diagramming"}, "pack"},
		{"task skills []: none", inputs(avail, entry("*"), task()), []string{}, "task"},
		{"an explicit empty entry list admits none", inputs(avail, entry()), []string{}, "pack"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustResolve(t, casts("architect"), tc.in)
			var names []string
			for _, s := range got.Skills {
				names = append(names, s.Name)
				if s.Source != "root" || s.Digest != "sha256:"+s.Name {
					t.Errorf("skill %+v lost its source or digest", s)
				}
			}
			if names == nil {
				names = []string{}
			}
			if !slices.Equal(names, tc.want) || got.Skills == nil || got.Sources.Skills != tc.source {
				t.Errorf("skills %v from %s, want %v from %s", names, got.Sources.Skills, tc.want, tc.source)
			}
		})
	}
}

// FuzzSkillPatterns: any patterns over any skill names resolve without a
// panic, and a success selects only available skills that an entry
// pattern and (when given) a task pattern match: a pattern never selects
// outside what its list may reach.
func FuzzSkillPatterns(f *testing.F) {
	f.Add("adr-*", "*", "adr-writing", "code-review", "adr-writing")
	f.Add("[", "*", "a", "b", "")
	f.Add("*", "\\", "x", "x", "x*")
	f.Add("c*", "?ode-review", "code-review", "coder", "c*")
	f.Fuzz(func(t *testing.T, p1, p2, n1, n2, taskPattern string) {
		in := inputs(withSkills(n1, n2), withEntry("architect", func(e *resolve.PackEntry) { e.Skills = []string{p1, p2} }))
		if taskPattern != "" {
			in.Task.Skills = []string{taskPattern}
		}
		got, err := resolve.Resolve(casts("architect"), in)
		if err != nil {
			if !isCode(err, resolve.CodeSkillUnmatched) && !isCode(err, resolve.CodeSkillOverlap) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		for _, s := range got.Skills {
			if s.Name != n1 && s.Name != n2 {
				t.Fatalf("skill %q is not available", s.Name)
			}
			if !anyMatch([]string{p1, p2}, s.Name) {
				t.Fatalf("skill %q is not admitted by %q, %q", s.Name, p1, p2)
			}
			if taskPattern != "" && !anyMatch([]string{taskPattern}, s.Name) {
				t.Fatalf("skill %q is outside the task's %q", s.Name, taskPattern)
			}
		}
	})
}

func anyMatch(patterns []string, name string) bool {
	for _, p := range patterns {
		if m, err := path.Match(p, name); err == nil && m {
			return true
		}
	}
	return false
}
