package discover_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// Variants: written on a role entry, compiled in discovery, matched by the
// resolver against the task's selector (model, tier, pack, role) computed
// from the unchanged base, below the task's overrides.

// variantPack is a team pack whose architect entry has model
// claude-opus-4-1, effort medium and the given variants.
func variantPack(variants string) files {
	return files{"packs/team.yaml": "roles:\n  architect:\n    model: claude-opus-4-1\n    effort: medium\n    default_modes: [systematic]\n    variants:\n" + variants}
}

// tiers is a model catalog for the tier conditions (rolecall.yaml does
// not configure one in this package yet, so the test supplies it).
var tiers = &resolve.ModelCatalog{Tiers: map[string]*string{"cheap": ptr("claude-haiku-4-5"), "strong": ptr("claude-opus-4-1")}}

func TestVariants(t *testing.T) {
	cases := []struct {
		name     string
		variants string
		task     resolve.TaskOverrides
		models   bool
		// the outcome
		effort   string
		modes    []string
		matched  []int
		sources  [2]string // sources.effort, sources.modes
		effortAt string    // where the winning effort is written
	}{
		{
			name:     "an exact model condition",
			variants: "      - when: {model: claude-opus-4-1}\n        set: {effort: high}\n",
			effort:   "high", modes: []string{"systematic"}, matched: []int{0},
			sources: [2]string{"pack_variant", "pack"}, effortAt: "packs/team.yaml:8",
		},
		{
			name:     "a glob condition on the model family",
			variants: "      - when: {model: {matches: \"claude-opus-*\"}}\n        set:\n          effort: high\n          default_modes: [adversarial]\n",
			effort:   "high", modes: []string{"adversarial"}, matched: []int{0},
			sources: [2]string{"pack_variant", "pack_variant"}, effortAt: "packs/team.yaml:9",
		},
		{
			name:     "no variant matches: the entry's own values",
			variants: "      - when: {model: {matches: \"gpt-*\"}}\n        set: {effort: low}\n",
			effort:   "medium", modes: []string{"systematic"}, matched: []int{},
			sources: [2]string{"pack", "pack"}, effortAt: "packs/team.yaml:4",
		},
		{
			name:     "two matching variants apply in order, the later winning",
			variants: "      - when: {model: {matches: \"claude-*\"}}\n        set: {effort: low, default_modes: [evidential]}\n      - when: {model: {matches: \"*-opus-*\"}}\n        set: {effort: high}\n",
			effort:   "high", modes: []string{"evidential"}, matched: []int{0, 1},
			sources: [2]string{"pack_variant", "pack_variant"}, effortAt: "packs/team.yaml:10",
		},
		{
			name:     "every condition must hold",
			variants: "      - when: {model: claude-opus-4-1, pack: other}\n        set: {effort: high}\n      - when: {model: claude-opus-4-1, pack: team, role: architect}\n        set: {effort: max}\n",
			effort:   "max", modes: []string{"systematic"}, matched: []int{1},
			sources: [2]string{"pack_variant", "pack"}, effortAt: "packs/team.yaml:10",
		},
		{
			name:     "the task's own model selects, and the task's effort still wins",
			variants: "      - when: {model: {matches: \"claude-haiku-*\"}}\n        set: {effort: low, default_modes: [fast]}\n",
			task:     resolve.TaskOverrides{Model: ptr("claude-haiku-4-5"), Effort: ptr("task-effort")},
			effort:   "task-effort", modes: []string{"fast"}, matched: []int{0},
			sources: [2]string{"task", "pack_variant"}, effortAt: "task",
		},
		{
			name:     "a condition on the tier symbol as written",
			variants: "      - when: {tier: \"tier:cheap\"}\n        set: {effort: low}\n      - when: {model: claude-haiku-4-5}\n        set: {default_modes: [fast]}\n",
			task:     resolve.TaskOverrides{Model: ptr("tier:cheap")}, models: true,
			effort: "low", modes: []string{"fast"}, matched: []int{0, 1},
			sources: [2]string{"pack_variant", "pack_variant"}, effortAt: "packs/team.yaml:8",
		},
		{
			name:     "a tier condition does not hold for a literal model",
			variants: "      - when: {tier: {matches: \"tier:*\"}}\n        set: {effort: low}\n",
			effort:   "medium", modes: []string{"systematic"}, matched: []int{},
			sources: [2]string{"pack", "pack"}, effortAt: "packs/team.yaml:4",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustLoad(t, writeRoot(t, variantPack(tc.variants)))
			in, err := s.Inputs(discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("team"), Task: tc.task})
			if err != nil {
				t.Fatal(err)
			}
			if tc.models {
				in.Models = tiers
			}
			in.Explain = true
			spec, err := resolve.Resolve(resolve.RoleName("architect"), in)
			if err != nil {
				t.Fatal(err)
			}
			if spec.Effort == nil || *spec.Effort != tc.effort {
				t.Errorf("effort = %v, want %q", spec.Effort, tc.effort)
			}
			if !reflect.DeepEqual(spec.Identity.Modes, tc.modes) {
				t.Errorf("modes = %v, want %v", spec.Identity.Modes, tc.modes)
			}
			if !reflect.DeepEqual(spec.Pack.Variants, tc.matched) {
				t.Errorf("pack.variants = %v, want %v", spec.Pack.Variants, tc.matched)
			}
			if got := [2]string{spec.Sources.Effort, spec.Sources.Modes}; got != tc.sources {
				t.Errorf("sources effort, modes = %v, want %v", got, tc.sources)
			}
			if got := s.Origin(in, &spec, "effort").String(); got != tc.effortAt {
				t.Errorf("effort written at %s, want %s", got, tc.effortAt)
			}
		})
	}
}

// A variant compiles to exactly what the resolver matches.
func TestVariantCompiles(t *testing.T) {
	pf := packOf(t, variantPack(`      - when:
          model: {matches: "claude-*"}
          tier: "tier:strong"
          pack: team
          role: architect
        set:
          effort: high
          default_modes: [slow]
          modes_allow: [slow, systematic]
          authority: [a]
          boundaries: []
          escalations: [e]
          skills: ["go-*", "review"]
      - set: {effort: low}
`), nil, "team")
	want := []resolve.Variant{
		{
			When: []resolve.Condition{
				{Key: "model", Value: "claude-*", Glob: true}, {Key: "tier", Value: "tier:strong"},
				{Key: "pack", Value: "team"}, {Key: "role", Value: "architect"},
			},
			Set: resolve.VariantSet{
				Effort: ptr("high"), DefaultModes: []string{"slow"}, ModesAllow: []string{"slow", "systematic"},
				Authority: []string{"a"}, Boundaries: []string{}, Escalations: []string{"e"}, Skills: []string{"go-*", "review"},
			},
		},
		{When: nil, Set: resolve.VariantSet{Effort: ptr("low")}},
	}
	if got := pf.Pack.Roles["architect"].Variants; !reflect.DeepEqual(got, want) {
		t.Errorf("variants:\n got %+v\nwant %+v", got, want)
	}
}

func TestVariantErrors(t *testing.T) {
	cases := []compositionError{
		{
			name:  "a variant may not set the model",
			files: variantPack("      - when: {model: {matches: \"claude-*\"}}\n        set:\n          effort: high\n          model: claude-haiku-4-5\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:10",
			msg:     `key "roles.architect.variants[0].set.model": a variant cannot set the model`,
			details: map[string]any{"key": "roles.architect.variants[0].set.model"},
		},
		{
			name:  "a variant may not set active",
			files: variantPack("      - when: {pack: team}\n        set: {active: false}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:8", msg: "a variant cannot set active",
		},
		{
			name:  "an unknown when key",
			files: variantPack("      - when: {effort: high}\n        set: {effort: low}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `key "roles.architect.variants[0].when.effort": unknown key (allowed: model, tier, pack, role)`,
		},
		{
			name:  "an unknown key in set",
			files: variantPack("      - set: {colour: red}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `unknown key`,
		},
		{
			name:  "an unknown key in a variant",
			files: variantPack("      - if: {model: x}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `key "roles.architect.variants[0].if": unknown key (allowed: when, set)`,
		},
		{
			name:  "a malformed glob",
			files: variantPack("      - when: {model: {matches: \"claude-[\"}}\n        set: {effort: low}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `invalid glob pattern "claude-["`,
		},
		{
			name:  "a condition is a string or {matches}",
			files: variantPack("      - when: {model: [a, b]}\n        set: {effort: low}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `must be a string or {matches: <glob>}`,
		},
		{
			name:  "{matches} needs its pattern",
			files: variantPack("      - when: {model: {}}\n        set: {effort: low}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `must be a string or {matches: <glob>}`,
		},
		{
			name:  "a tier is written as the symbol",
			files: variantPack("      - when: {tier: cheap}\n        set: {effort: low}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `must be a tier symbol`,
		},
		{
			name:  "a malformed skill pattern",
			files: variantPack("      - set: {skills: [\"[go\"]}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `invalid skill pattern`,
		},
		{
			name:  "variants is a list",
			files: variantPack("      when: {model: x}\n"),
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:7", msg: `must be a list of {when, set} mappings`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

// Validate checks every variant against the catalog, at the variant's own
// file and line, through mixins.
func TestValidateVariants(t *testing.T) {
	dir := writeRoot(t, files{
		"packs/base.yaml": `roles:
  architect:
    model: m
    default_modes: [systematic]
    variants:
      - when: {model: {matches: "m*"}}
        set:
          default_modes: [telepathic]
      - when: {model: other}
        set:
          modes_allow: [systematic, clairvoyant]
      - when: {model: other}
        set:
          modes_allow: [evidential]
`,
		"packs/team.yaml": "extends: [base]\nroles:\n  architect:\n    effort: high\n",
	})
	var got []string
	for _, e := range discover.Validate(dir) {
		got = append(got, e.Error())
	}
	want := []string{
		`packs/base.yaml:8: pack_default_invalid: variants[0]: pack "base" default_modes for role "architect": mode "telepathic" is not in the catalog`,
		`packs/base.yaml:8: pack_default_invalid: variants[0]: pack "team" default_modes for role "architect": mode "telepathic" is not in the catalog`,
		`packs/base.yaml:11: mode_unknown: key "roles.architect.variants[1].set.modes_allow[1]": mode "clairvoyant" is not in the catalog`,
		`packs/base.yaml:14: pack_default_invalid: variants[2]: pack "base" default_modes for role "architect": mode "systematic" is not allowed for role "architect" in pack "base" (allowed: ["evidential"])`,
		`packs/base.yaml:14: pack_default_invalid: variants[2]: pack "team" default_modes for role "architect": mode "systematic" is not allowed for role "architect" in pack "team" (allowed: ["evidential"])`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("validate:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A problem of the entry itself does not hide a variant's own problem;
// a variant that inherits the entry's problem does not repeat it.
func TestValidateVariantsOfABrokenEntry(t *testing.T) {
	dir := writeRoot(t, files{
		"packs/team.yaml": `roles:
  architect:
    model: m
    default_modes: [telepathic]
    variants:
      - when: {model: m}
        set:
          default_modes: [fast, slow]
      - when: {model: m}
        set:
          effort: high
`,
	})
	var got []string
	for _, e := range discover.Validate(dir) {
		got = append(got, e.Error())
	}
	want := []string{
		`packs/team.yaml:4: pack_default_invalid: pack "team" default_modes for role "architect": mode "telepathic" is not in the catalog`,
		`packs/team.yaml:8: pack_default_invalid: variants[0]: pack "team" default_modes for role "architect": modes "fast" and "slow" conflict`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("validate:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Validate checks the variants that hold together, as a task without
// overrides gets them: two variants that each pass alone can fail
// together, and then every such task fails.
func TestValidateVariantsTogether(t *testing.T) {
	dir := writeRoot(t, files{
		"packs/team.yaml": `roles:
  architect:
    model: m
    variants:
      - when: {model: m}
        set: {default_modes: [fast]}
      - when: {model: m}
        set: {modes_allow: [slow]}
      - when: {model: other}
        set: {default_modes: [slow]}
  reviewer:
    model: m
    variants:
      - when: {model: m}
        set: {default_modes: [fast, slow]}
      - when: {model: m}
        set: {effort: high}
`,
	})
	var got []string
	for _, e := range discover.Validate(dir) {
		got = append(got, e.Error())
	}
	want := []string{
		`packs/team.yaml:6: pack_default_invalid: variants[0]: with the other variants that hold without task overrides: pack "team" default_modes for role "architect": mode "fast" is not allowed for role "architect" in pack "team" (allowed: ["slow"])`,
		`packs/team.yaml:15: pack_default_invalid: variants[0]: pack "team" default_modes for role "reviewer": modes "fast" and "slow" conflict`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("validate:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A problem Validate finds in a value a placeholder gave is reported with
// the placeholder, not the value.
func TestValidateMasksPlaceholderValues(t *testing.T) {
	dir := writeRoot(t, files{
		"rolecall.yaml":   allowTeam,
		"packs/team.yaml": "roles:\n  architect:\n    model: m\n    default_modes: [\"${env:TEAM_MODE}\"]\n    modes_allow: [\"${env:TEAM_MODE}\"]\n",
	})
	errs := discover.ValidateWith(dir, discover.Options{LookupEnv: envOf(map[string]string{"TEAM_MODE": "s3cr3t"})})
	if len(errs) == 0 {
		t.Fatal("no problem reported")
	}
	for _, e := range errs {
		if strings.Contains(e.Error(), "s3cr3t") {
			t.Errorf("validate carries the value: %v", e)
		}
		if !strings.Contains(e.Error(), "${env:TEAM_MODE}") {
			t.Errorf("validate does not name the placeholder: %v", e)
		}
	}
}

// A pack's digest is over its decoded values, so the key order of a
// variant's when, or {} written for an absent when, does not change it:
// every condition must hold, in any order.
func TestVariantDigestIgnoresWhenOrder(t *testing.T) {
	digest := func(variants string) string {
		return packOf(t, variantPack(variants), nil, "team").Pack.Digest
	}
	cases := []struct{ name, a, b string }{
		{
			name: "the key order of when",
			a:    "      - when: {model: claude-opus-4-1, pack: team, role: architect}\n        set: {effort: high}\n",
			b:    "      - when: {role: architect, pack: team, model: claude-opus-4-1}\n        set: {effort: high}\n",
		},
		{
			name: "an empty when and an absent one",
			a:    "      - when: {}\n        set: {effort: high}\n",
			b:    "      - set: {effort: high}\n",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if a, b := digest(tc.a), digest(tc.b); a == "" || a != b {
				t.Errorf("pack digests differ: %s and %s", a, b)
			}
		})
	}
}

// A model problem of the entry (reported on its own) does not hide
// variants that fail together: a task that names its own model gets them
// and fails with pack_default_invalid.
func TestValidateVariantsTogetherWithoutAModel(t *testing.T) {
	const variants = `    variants:
      - when: {role: architect}
        set: {default_modes: [fast]}
      - when: {pack: team}
        set: {modes_allow: [slow]}
`
	together := `pack_default_invalid: variants[0]: with the other variants that hold without task overrides: pack "team" default_modes for role "architect": mode "fast" is not allowed for role "architect" in pack "team" (allowed: ["slow"])`
	cases := []struct {
		name  string
		fs    files
		codes []string // the other problems, by code
	}{
		{"no model at all", files{"packs/team.yaml": "roles:\n  architect:\n" + variants}, []string{"model_unresolved"}},
		{"a tier without a model", files{
			"rolecall.yaml":   "models: {tiers: {strong: null}}\n",
			"packs/team.yaml": "roles:\n  architect:\n    model: tier:strong\n" + variants,
		}, []string{"tier_unavailable"}},
		{"a tier the catalog does not hold", files{
			"packs/team.yaml": "roles:\n  architect:\n    model: tier:strong\n" + variants,
		}, []string{"tier_unknown"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got, codes []string
			for _, e := range discover.Validate(writeRoot(t, tc.fs)) {
				if e.Code == resolve.CodePackDefaultInvalid {
					got = append(got, e.Error())
				} else {
					codes = append(codes, string(e.Code))
				}
			}
			if len(got) != 1 || !strings.HasSuffix(got[0], together) {
				t.Errorf("pack_default_invalid problems: %q\nwant one ending %s", got, together)
			}
			if !reflect.DeepEqual(codes, tc.codes) {
				t.Errorf("other problems: %q, want %q", codes, tc.codes)
			}
		})
	}
}
