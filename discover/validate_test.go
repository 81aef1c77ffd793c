package discover_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

func TestValidateEmbeddedIsClean(t *testing.T) {
	if errs := discover.Validate(copyRoot(t, "")); len(errs) != 0 {
		t.Errorf("the embedded catalog and default pack have problems:\n%v", errs)
	}
	if errs := discover.Validate(copyRoot(t, "full")); len(errs) != 0 {
		t.Errorf("the full root has problems:\n%v", errs)
	}
}

// TestValidateReportsEveryProblem runs Validate over a root with one problem
// of each kind (testdata/roots/validate-problems) and compares the
// `worker validate` lines with a golden file.
func TestValidateReportsEveryProblem(t *testing.T) {
	errs := discover.Validate(copyRoot(t, "validate-problems"))
	var b strings.Builder
	for _, e := range errs {
		fmt.Fprintln(&b, e)
	}
	got := b.String()
	golden(t, "validate-problems.txt", got)

	// The golden file is reviewed once; these pin the essentials so an
	// accidental -update cannot hide a regression.
	for _, want := range []struct {
		code  resolve.Code
		where string
	}{
		{resolve.CodeProfileInvalid, "agents/broken.md:2"},
		{resolve.CodePackInvalid, "packs/broken.yaml:3"},
		{resolve.CodeRoleUnknown, "packs/team.yaml:12"},
		{resolve.CodePackDefaultInvalid, "packs/team.yaml:4"},
		{resolve.CodePackDefaultInvalid, "packs/team.yaml:7"},
		{resolve.CodePackDefaultInvalid, "packs/team.yaml:17"},
		{resolve.CodeModeUnknown, "packs/team.yaml:11"},
		{resolve.CodeOverlayRoleMissing, "agents/no-base.md:2"},
		{resolve.CodeOverlayRoleMissing, "agents/bad-base.md:3"},
		{resolve.CodeReplacementHasBaseRole, "agents/scribe.md:3"},
		{resolve.CodeResumeWithoutTimeout, "agents/scribe.md:4"},
		{resolve.CodeProfileDispositionRequired, "agents/old.md:1"},
		{resolve.CodePackNotFound, "rolecall.yaml:1"},
		{resolve.CodeExternalProfileMissing, "rolecall.yaml:4"},
		{resolve.CodeReplacementRequiresExternalRef, "rolecall.yaml:5"},
		{resolve.CodeOverlayRoleMismatch, "rolecall.yaml:6"},
		{resolve.CodeRoleUnknown, "rolecall.yaml:7"},
	} {
		found := false
		for _, e := range errs {
			if e.Code == want.code && strings.HasPrefix(e.Error(), want.where+": ") {
				found = true
			}
		}
		if !found {
			t.Errorf("Validate did not report %s at %s", want.code, want.where)
		}
	}
	// The entry for the unknown role "wizard" is not also resolved, and the
	// inactive planner's broken defaults are still checked.
	if n := strings.Count(got, "wizard"); n != 3 {
		t.Errorf("wizard mentioned %d times, want 3 (pack entry, overlays binding, bad-base base_role)", n)
	}
}

// Validate reports whatever Load refuses (Load stops at the first).
func TestValidateIncludesLoadError(t *testing.T) {
	dir := copyRoot(t, "validate-problems")
	_, err := discover.Load(dir, discover.Options{})
	if err == nil {
		t.Fatal("Load accepted the validate-problems root")
	}
	found := false
	for _, e := range discover.Validate(dir) {
		found = found || e.Error() == err.Error()
	}
	if !found {
		t.Errorf("Validate does not report Load's error %v", err)
	}
}

// A broken catalog file is reported once; packs and bindings that name it
// are not reported again as unknown.
func TestValidateNoFollowOnProblems(t *testing.T) {
	dir := copyRoot(t, "catalog")
	writeFile(t, dir, "catalog/modes/calm.md", "---\nname: calm\ncolour: blue\n---\n")
	writeFile(t, dir, "catalog/modes/hasty.md", "---\nname: hasty\nconflicts_with: [calm]\n---\n")
	writeFile(t, dir, "catalog/roles/lead.md", "---\nname: lead\nemits: plan\n---\n")
	writeFile(t, dir, "rolecall.yaml", "overlays:\n  lead: lead-tone\n")
	writeFile(t, dir, "agents/lead-tone.md", "---\ndisposition: overlay\nbase_role: lead\n---\n")
	errs := discover.Validate(dir)
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	want := []string{
		`catalog/modes/calm.md:3: catalog_invalid: key "colour": unknown key (allowed: name, description, conflicts_with)`,
		`catalog/roles/lead.md:3: catalog_invalid: key "emits": must be a list, got string "plan"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Validate =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A tier problem of an entry (reported on its own) does not hide the
// entry's other problems: the Modes are checked too.
func TestValidateTierProblemHidesNothing(t *testing.T) {
	dir := writeRoot(t, files{
		"rolecall.yaml":   "models:\n  tiers: {cheap: null}\n",
		"packs/team.yaml": "roles:\n  architect: {model: \"tier:nope\", default_modes: [fast, slow]}\n  reviewer:\n    default_modes: [fast, systematic]\n    model: tier:cheap\n",
	})
	var got []string
	for _, e := range discover.Validate(dir) {
		got = append(got, e.Error())
	}
	want := []string{
		`packs/team.yaml:2: pack_default_invalid: pack "team" default_modes for role "architect": modes "fast" and "slow" conflict`,
		`packs/team.yaml:2: tier_unknown: pack "team" role "architect"'s model "tier:nope" names a tier that is not in the model catalog (tiers: "cheap")`,
		`packs/team.yaml:4: pack_default_invalid: pack "team" default_modes for role "reviewer": modes "fast" and "systematic" conflict`,
		`packs/team.yaml:5: tier_unavailable: pack "team" role "reviewer"'s model "tier:cheap" yields no model (tried "cheap")`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("validate:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A missing model does not hide an entry's other problems, nor those of
// its variants (which cannot set a model, so never repeat it).
func TestValidateMissingModelHidesNothing(t *testing.T) {
	dir := writeRoot(t, files{
		"packs/team.yaml": "roles:\n  architect:\n    default_modes: [fast, slow]\n    variants:\n      - when: {pack: team}\n        set: {default_modes: [telepathic]}\n",
	})
	var got []string
	for _, e := range discover.Validate(dir) {
		got = append(got, e.Error())
	}
	want := []string{
		`packs/team.yaml:2: model_unresolved: no model for casts:architect: task, profile, pack and runtime defaults give none`,
		`packs/team.yaml:3: pack_default_invalid: pack "team" default_modes for role "architect": modes "fast" and "slow" conflict`,
		`packs/team.yaml:6: pack_default_invalid: variants[0]: pack "team" default_modes for role "architect": mode "telepathic" is not in the catalog`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("validate:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An overlays binding is checked in the order a task for its role checks
// the profile, so validate names the code the task fails with.
func TestValidateBindingsInTaskOrder(t *testing.T) {
	dir := writeRoot(t, files{
		"rolecall.yaml":   "legacy_profiles: reject\noverlays:\n  reviewer: off\n  tester: old\n",
		"agents/off.md":   "---\ndisposition: replacement\nenabled: false\n---\nx\n",
		"agents/old.md":   "---\ndescription: legacy\n---\nx\n",
		"packs/team.yaml": "roles:\n  reviewer: {model: m}\n  tester: {model: m}\n",
	})
	s, err := discover.Load(dir, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]resolve.Code{}
	for _, role := range []string{"reviewer", "tester"} {
		in, err := s.Inputs(discover.Request{Ref: resolve.RoleName(role), Pack: ptr("team")})
		if err == nil {
			_, err = resolve.Resolve(resolve.RoleName(role), in)
		}
		var re *resolve.ResolutionError
		if !errors.As(err, &re) {
			t.Fatalf("%s: %v, want a resolution error", role, err)
		}
		want[role] = re.Code
	}
	got := map[string]resolve.Code{}
	for _, e := range discover.Validate(dir) {
		if role, ok := strings.CutPrefix(e.Key, "overlays."); ok {
			got[role] = e.Code
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("validate reports the bindings as %v; tasks fail with %v", got, want)
	}
}

// A task for a role that names no profile gets the overlay rolecall.yaml
// binds to the role, and that overlay's model ranks above the pack entry
// and the runtime default. Validate checks an entry with that model, as
// such a task gets it: neither a model the overlay alone gives nor a
// default it shadows is a problem, a tier it names must be one the entry
// supports, and it chooses the variants.
func TestValidateWithTheBoundOverlaysModel(t *testing.T) {
	cases := []struct {
		name    string
		model   string // the bound overlay's model
		entry   string // the reviewer's entry in packs/team.yaml
		config  string // more of rolecall.yaml
		want    []string
		outcome resolve.Code // of a task for the reviewer ("" resolves)
	}{
		{
			name:  "only the overlay gives a model",
			model: "m-overlay", entry: "{}",
		},
		{
			name:  "the overlay's model shadows a default tier the entry does not support",
			model: "m-overlay", entry: "{tiers: [cheap]}",
			config: "models: {tiers: {strong: s, cheap: c}}\ndefaults: {model: tier:strong}\n",
		},
		{
			name:  "the overlay's tier is not one the entry supports",
			model: "tier:strong", entry: "{model: m, tiers: [cheap]}",
			config: "models: {tiers: {strong: s, cheap: c}}\n",
			want: []string{
				`packs/team.yaml:2: tier_unsupported: pack "team" role "reviewer" takes the model of its bound overlay "tier:strong", but supports only "cheap"`,
			},
			outcome: resolve.CodeTierUnsupported,
		},
		{
			name:  "the overlay's model chooses the variants",
			model: "m-overlay",
			entry: "\n    model: m\n    variants:\n      - when: {model: m-overlay}\n        set: {default_modes: [fast]}\n      - when: {model: m-overlay}\n        set: {modes_allow: [slow]}\n",
			want: []string{
				`packs/team.yaml:6: pack_default_invalid: variants[0]: with the other variants that hold without task overrides: pack "team" default_modes for role "reviewer": mode "fast" is not allowed for role "reviewer" in pack "team" (allowed: ["slow"])`,
			},
			outcome: resolve.CodePackDefaultInvalid,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRoot(t, files{
				"rolecall.yaml":    "overlays: {reviewer: strict}\n" + tc.config,
				"agents/strict.md": "---\ndisposition: overlay\nbase_role: reviewer\nmodel: " + tc.model + "\n---\nStrict.\n",
				"packs/team.yaml":  "roles:\n  reviewer: " + tc.entry + "\n",
			})
			var got []string
			for _, e := range discover.Validate(dir) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("validate:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			s, err := discover.Load(dir, discover.Options{})
			if err != nil {
				t.Fatal(err)
			}
			in, err := s.Inputs(discover.Request{Ref: resolve.RoleName("reviewer"), Pack: ptr("team")})
			if err == nil {
				_, err = resolve.Resolve(resolve.RoleName("reviewer"), in)
			}
			var code resolve.Code
			if re := (*resolve.ResolutionError)(nil); errors.As(err, &re) {
				code = re.Code
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.outcome {
				t.Errorf("a task for the reviewer: %q, want %q", code, tc.outcome)
			}
		})
	}
}
