package discover_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// benchRoot writes the embedded catalog's worth of packs and profiles: 10
// packs with an entry for each of the 12 embedded Roles, and 200 profiles
// (overlays and replacements, both layouts).
func benchRoot(b *testing.B) string {
	b.Helper()
	dir := copyRoot(b, "")
	roles := []string{"analyst", "architect", "critic", "designer", "documenter", "implementer", "operator", "planner", "researcher", "reviewer", "security-auditor", "tester"}
	for i := range 10 {
		var p strings.Builder
		p.WriteString("roles:\n")
		for _, r := range roles {
			fmt.Fprintf(&p, "  %s:\n    model: model-%d\n    effort: medium\n    default_modes: [evidential]\n    authority:\n      - Act within the task\n    boundaries:\n      - Stay in scope\n", r, i)
		}
		writeFile(b, dir, fmt.Sprintf("packs/pack-%02d.yaml", i), p.String())
	}
	for i := range 200 {
		name := fmt.Sprintf("profile-%03d", i)
		var content string
		if i%2 == 0 {
			content = fmt.Sprintf("---\ndisposition: overlay\nbase_role: %s\nmodel: m\ntimeout: 60\n---\nOverlay body %d.\n", roles[i%len(roles)], i)
		} else {
			content = fmt.Sprintf("---\ndisposition: replacement\ndescription: Replacement %d\nartifact_defaults:\n  format: markdown\n---\nReplacement body %d.\n", i, i)
		}
		rel := "agents/" + name + ".md"
		if i%4 == 1 {
			rel = "agents/" + name + "/" + name + ".md"
		}
		writeFile(b, dir, rel, content)
	}
	writeFile(b, dir, "rolecall.yaml", "default_pack: pack-00\ndefaults:\n  model: runtime\n  tools: [read]\noverlays:\n  architect: profile-002\n")
	return dir
}

func BenchmarkLoadCold(b *testing.B) {
	dir := benchRoot(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := discover.Load(dir, discover.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInputsWarm(b *testing.B) {
	s := mustLoad(b, benchRoot(b))
	reqs := []discover.Request{
		{Ref: resolve.RoleName("implementer")},
		{Ref: resolve.RoleName("architect")}, // through the overlays binding
		{Ref: resolve.RoleName("reviewer"), Pack: ptr("pack-03"), Profile: ptr("profile-010")},
		{Ref: resolve.ExternalRef{Name: "profile-101"}},
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Inputs(reqs[i%len(reqs)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSourceSnapshot is the cached path: within the reload interval.
func BenchmarkSourceSnapshot(b *testing.B) {
	src, err := discover.NewSource(benchRoot(b), discover.Options{ReloadInterval: time.Hour}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if src.Snapshot() == nil {
				b.Fatal("nil snapshot")
			}
		}
	})
}

// BenchmarkSourceSweep is one stat sweep of an unchanged tree (what a
// Snapshot call costs each time the interval elapses). The files are aged
// past the racy window first, as they are in a running deployment.
func BenchmarkSourceSweep(b *testing.B) {
	dir := benchRoot(b)
	ageFiles(b, dir, -time.Hour)
	src, err := discover.NewSource(dir, discover.Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	first := src.Snapshot()
	b.ReportAllocs()
	for b.Loop() {
		if src.Snapshot() != first {
			b.Fatal("unchanged tree reloaded")
		}
	}
}

// composedRoot is a team pack made of three mixins with two variants on
// the architect entry that both hold, and flatRoot the same effective pack
// written out by hand: what BenchmarkResolveComposition compares.
var (
	composedRoot = files{
		"packs/base.yaml":   "roles:\n  architect:\n    model: claude-opus-4-1\n    effort: medium\n    default_modes: [systematic]\n    authority: [Define component boundaries]\n",
		"packs/limits.yaml": "roles:\n  architect:\n    boundaries: [Do not write production code]\n    modes_allow: [systematic, premortem, evidential, framing]\n",
		"packs/oncall.yaml": "roles:\n  architect:\n    escalations: [A change touches the ledger]\n",
		"packs/team.yaml": `extends: [base, limits, oncall]
roles:
  architect:
    variants:
      - when: {model: {matches: "claude-opus-*"}}
        set: {effort: high, default_modes: [systematic, premortem]}
      - when: {pack: team, role: architect}
        set: {escalations: [A change touches the ledger, The budget is exceeded]}
`,
	}
	flatRoot = files{"packs/team.yaml": `roles:
  architect:
    model: claude-opus-4-1
    effort: high
    default_modes: [systematic, premortem]
    modes_allow: [systematic, premortem, evidential, framing]
    authority: [Define component boundaries]
    boundaries: [Do not write production code]
    escalations: [A change touches the ledger, The budget is exceeded]
`}
)

// BenchmarkResolveComposition is the per-task cost (inputs and resolution)
// of a composed pack against the same pack written flat, once the
// snapshot is built: mixins cost nothing per task, variants their match.
func BenchmarkResolveComposition(b *testing.B) {
	for _, c := range []struct {
		name string
		root files
	}{{"flat", flatRoot}, {"composed", composedRoot}} {
		b.Run(c.name, func(b *testing.B) {
			s := mustLoad(b, writeRoot(b, c.root))
			req := discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("team")}
			b.ReportAllocs()
			for b.Loop() {
				in, err := s.Inputs(req)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := resolve.Resolve(req.Ref, in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBenchRootsAgree keeps the benchmark honest: both roots resolve to the
// same spec, apart from the variants the composed one applied.
func TestBenchRootsAgree(t *testing.T) {
	var specs []resolve.ResolvedAgentSpec
	for _, root := range []files{flatRoot, composedRoot} {
		s := mustLoad(t, writeRoot(t, root))
		req := discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("team")}
		in, err := s.Inputs(req)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := resolve.Resolve(req.Ref, in)
		if err != nil {
			t.Fatal(err)
		}
		specs = append(specs, spec)
	}
	flat, composed := specs[0], specs[1]
	if fmt.Sprint(composed.Pack.Variants) != "[0 1]" {
		t.Errorf("composed variants %v, want both", composed.Pack.Variants)
	}
	if flat.PromptBody != composed.PromptBody || flat.Model != composed.Model || *flat.Effort != *composed.Effort || fmt.Sprint(flat.Identity) != fmt.Sprint(composed.Identity) {
		t.Errorf("the roots differ:\nflat %+v\ncomposed %+v", flat, composed)
	}
}
