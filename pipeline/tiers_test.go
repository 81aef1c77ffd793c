package pipeline_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

func writeRootFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A task naming tier:cheap gets the catalog's concrete model and its
// model_tier; a catalog edit, picked up by the running worker's Source
// without a restart, changes the next outcome's model and catalog_digest.
func TestTierResolutionFollowsTheCatalog(t *testing.T) {
	root := t.TempDir()
	writeCatalog := func(cheap string) {
		replaceFile(t, root, "rolecall.yaml", "models:\n  tiers:\n    strong: model-strong\n    cheap: "+cheap+"\n  fallback: [strong, cheap]\n")
	}
	writeCatalog("model-one")
	src := watchedSource(t, root, discover.Options{})
	prev := src.Snapshot()
	firstDigest := prev.Models.Digest
	h := newHarness(t, testConfig())
	h.start(src, pipeline.Options{})

	task := `{"task_id":"T-%s","role":"architect","overrides":{"model":"tier:cheap"}}`
	h.submit(fmt.Sprintf(task, "a"), false)
	first := resolvedOf(t, h.waitOutcomes(1, 10*time.Second)[0].ev)

	writeCatalog("model-two-longer")
	awaitNewSnapshot(t, src, prev)
	h.submit(fmt.Sprintf(task, "b"), true)
	second := resolvedOf(t, h.waitOutcomes(2, 10*time.Second)[1].ev)
	secondDigest := src.Snapshot().Models.Digest

	for _, c := range []struct {
		name   string
		got    events.ResolvedData
		model  string
		digest string
	}{{"before the edit", first, "model-one", firstDigest}, {"after the edit", second, "model-two-longer", secondDigest}} {
		want := &resolve.ModelTier{Symbol: "tier:cheap", ResolvedVia: "tier", CatalogDigest: c.digest}
		if c.got.Model != c.model || c.got.ModelTier == nil || *c.got.ModelTier != *want || c.got.Sources.Model != resolve.SourceTask {
			t.Errorf("%s: model %q tier %+v from %s, want %q %+v from task", c.name, c.got.Model, c.got.ModelTier, c.got.Sources.Model, c.model, want)
		}
	}
	if firstDigest == secondDigest || first.InputsDigest == second.InputsDigest {
		t.Errorf("the catalog edit left the catalog digest (%s) or the inputs digest the same", firstDigest)
	}
}

// Skills reach the outcome through the worker, and every skill problem is
// a typed failure outcome: the task is answered, never lost.
func TestSkillOutcomes(t *testing.T) {
	root := t.TempDir()
	writeRootFile(t, root, "rolecall.yaml", "models:\n  tiers: {cheap: model-cheap}\nsources:\n  - name: team\n    root: team\n")
	writeRootFile(t, root, "packs/team.yaml", "roles:\n  architect:\n    model: tier:cheap\n    skills: [go-*, review]\n  tester:\n    model: m\n")
	writeRootFile(t, root, "skills/review/SKILL.md", "---\nname: review\ndescription: Review.\n---\n")
	writeRootFile(t, root, "skills/go-lint/SKILL.md", "---\nname: go-lint\ndescription: Lint.\n---\n")
	writeRootFile(t, root, "team/skills/go-test/SKILL.md", "---\nname: go-test\ndescription: Test.\n---\n")
	// A second root whose required source is missing.
	broken := t.TempDir()
	writeRootFile(t, broken, "rolecall.yaml", "sources:\n  - name: team\n    root: team\n")
	writeRootFile(t, broken, "packs/team.yaml", "roles:\n  architect:\n    model: m\n    skills: [go-*]\n  tester:\n    model: m\n")

	h := newHarness(t, testConfig())
	r := h.start(loadSource(t, root), pipeline.Options{})
	cases := []struct {
		data   string
		skills []string // resolved: the selected skills
		code   resolve.Code
	}{
		{data: `{"task_id":"T-1","role":"architect","pack":"team","skills":["go-*"]}`, skills: []string{"go-lint", "go-test"}},
		{data: `{"task_id":"T-2","role":"architect","pack":"team"}`, skills: []string{"go-lint", "go-test", "review"}},
		{data: `{"task_id":"T-3","role":"architect","pack":"team","skills":[]}`, skills: []string{}},
		{data: `{"task_id":"T-4","role":"architect","pack":"team","skills":["deploy"]}`, code: resolve.CodeSkillUnmatched},
		{data: `{"task_id":"T-5","role":"architect","pack":"team","skills":["go-*","go-lint"]}`, code: resolve.CodeSkillOverlap},
		{data: `{"task_id":"T-6","role":"architect","pack":"team","skills":["go-["]}`, code: resolve.CodeTaskInvalid},
		{data: `{"task_id":"T-7","role":"tester","pack":"team","overrides":{"model":"tier:huge"}}`, code: resolve.CodeTierUnknown},
	}
	for i, tc := range cases {
		h.submit(tc.data, i%2 == 0)
		got := h.waitOutcomes(i+1, 10*time.Second)[i]
		if tc.code != "" {
			if f := failureOf(t, got.ev); f.Code != tc.code || f.Stage != tc.code.Stage() {
				t.Errorf("%s: failure %s/%s, want %s", tc.data, f.Stage, f.Code, tc.code)
			}
			continue
		}
		res := resolvedOf(t, got.ev)
		names := []string{}
		for _, s := range res.Skills {
			names = append(names, s.Name)
			if s.Digest == "" || s.Source == "" {
				t.Errorf("%s: skill %+v lacks its source or digest", tc.data, s)
			}
		}
		if !slices.Equal(names, tc.skills) || res.Model != "model-cheap" {
			t.Errorf("%s: skills %v model %s, want %v model-cheap", tc.data, names, res.Model, tc.skills)
		}
	}
	r.stop(t)

	// The missing source fails the task that uses skills and only it.
	h2 := newHarness(t, testConfig())
	h2.start(loadSource(t, broken), pipeline.Options{})
	h2.submit(`{"task_id":"T-8","role":"architect","pack":"team"}`, false)
	h2.submit(`{"task_id":"T-9","role":"tester","pack":"team"}`, false)
	outs := h2.waitOutcomes(2, 10*time.Second)
	byTask := map[string]outcome{}
	for _, o := range outs {
		byTask[o.ev.Subject()] = o
	}
	if f := failureOf(t, byTask["T-8"].ev); f.Code != resolve.CodeSourceMissing || f.Stage != resolve.StageDiscover {
		t.Errorf("T-8: failure %s/%s, want discover/source_missing", f.Stage, f.Code)
	}
	if byTask["T-9"].subject != "rolecall.specs.resolved.tester" {
		t.Errorf("T-9 (no skills) went to %s", byTask["T-9"].subject)
	}
}
