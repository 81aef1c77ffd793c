package resolve_test

import (
	"path"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/resolve"
)

func TestModelCatalogExpand(t *testing.T) {
	catalog := func(allow bool, strong, balanced, cheap *string) *resolve.ModelCatalog {
		return &resolve.ModelCatalog{
			Tiers:         map[string]*string{"strong": strong, "balanced": balanced, "cheap": cheap},
			Fallback:      []string{"strong", "balanced", "cheap"},
			AllowFallback: allow,
		}
	}
	s, b, c := ptr("m-strong"), ptr("m-balanced"), ptr("m-cheap")
	cases := []struct {
		name      string
		m         *resolve.ModelCatalog
		tier      string
		supported []string
		model     string
		via       string
		tried     []string
		ok        bool
	}{
		{"its own model", catalog(false, s, b, c), "balanced", nil, "m-balanced", "tier", []string{"balanced"}, true},
		{"null without fallback", catalog(false, nil, b, c), "strong", nil, "", "", []string{"strong"}, false},
		{"null with fallback takes the next", catalog(true, nil, b, c), "strong", nil, "m-balanced", "fallback:balanced", []string{"strong", "balanced"}, true},
		{"the walk skips unsupported tiers", catalog(true, nil, b, c), "strong", []string{"strong", "cheap"}, "m-cheap", "fallback:cheap", []string{"strong", "cheap"}, true},
		{"the walk never goes back", catalog(true, s, b, nil), "cheap", nil, "", "", []string{"cheap"}, false},
		{"every tier null", catalog(true, nil, nil, nil), "strong", nil, "", "", []string{"strong", "balanced", "cheap"}, false},
		{"an unknown tier", catalog(true, s, b, c), "huge", nil, "", "", nil, false},
		{"no catalog", nil, "strong", nil, "", "", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model, via, tried, ok := tc.m.Expand(tc.tier, tc.supported)
			if model != tc.model || via != tc.via || ok != tc.ok || !slices.Equal(tried, tc.tried) {
				t.Errorf("Expand = %q %q %v %v, want %q %q %v %v", model, via, tried, ok, tc.model, tc.via, tc.tried, tc.ok)
			}
		})
	}
}

func TestValidateSkillPattern(t *testing.T) {
	for _, p := range []string{"review", "lint-*", "*", "go-?", "[a-c]*", `\*`, "a/b", "Upper"} {
		if err := resolve.ValidateSkillPattern("skills[0]", p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range []string{"", "[", "a[", `abc\`, "x\x00", "x\u0085", "tab\there", strings.Repeat("a", resolve.MaxSkillPatternLen+1), "\xff"} {
		err := resolve.ValidateSkillPattern("skills[0]", p)
		re, ok := err.(*resolve.ResolutionError)
		if !ok || re.Code != resolve.CodeTaskInvalid || re.Subject != "skills[0]" {
			t.Errorf("%q: got %v, want task_invalid on skills[0]", p, err)
		}
	}
}

// MatchSkills keeps the given order and admits exactly the skills some
// pattern matches.
func TestMatchSkillsProperty(t *testing.T) {
	names := []string{"go", "go-lint", "go-test", "lint", "review", "rust-lint"}
	patterns := []string{"go*", "*lint", "review", "r?st-*", "[a-h]*", "nothing", "["}
	rapid.Check(t, func(t *rapid.T) {
		pool := rapid.SliceOfDistinct(rapid.SampledFrom(names), func(s string) string { return s }).Draw(t, "skills")
		slices.Sort(pool)
		skills := make([]resolve.Skill, len(pool))
		for i, n := range pool {
			skills[i] = resolve.Skill{Name: n, Source: "root", Digest: "sha256:" + n}
		}
		ps := rapid.SliceOf(rapid.SampledFrom(patterns)).Draw(t, "patterns")
		got := resolve.MatchSkills(ps, skills)
		var want []string
		for _, s := range skills {
			if slices.ContainsFunc(ps, func(p string) bool { ok, _ := path.Match(p, s.Name); return ok }) {
				want = append(want, s.Name)
			}
		}
		var gotNames []string
		for _, s := range got {
			gotNames = append(gotNames, s.Name)
		}
		if !slices.Equal(gotNames, want) {
			t.Fatalf("MatchSkills(%q) = %v, want %v", ps, gotNames, want)
		}
	})
}
