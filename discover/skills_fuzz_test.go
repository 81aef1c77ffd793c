package discover_test

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

func FuzzSkillMD(f *testing.F) {
	seeds(f, func(p string) bool { return strings.HasSuffix(p, "/SKILL.md") })
	f.Add([]byte("---\nname: review\ndescription: d\n---\n"))
	f.Add([]byte("---\r\nname: review\r\ndescription: \"a\\u0000b\"\r\n---\r\n"))
	f.Add([]byte("---\nname: review\ndescription: d\nx-a: {b: [1, 2]}\n---\nbody"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := discover.DecodeSkill("skills/review/SKILL.md", "review", data)
		if err != nil {
			checkErr(t, err, resolve.CodeConfigInvalid)
			return
		}
		if sf.Name != "review" || strings.TrimSpace(sf.Description) == "" {
			t.Fatalf("accepted %+v", sf)
		}
		for k := range sf.KeyLines {
			if k != "name" && k != "description" && k != "body" && !strings.HasPrefix(k, "x-") {
				t.Fatalf("accepted key %q", k)
			}
		}
	})
}

// FuzzModelsAndSources decodes rolecall.yaml with a models: and a
// sources: block and holds what is accepted to the rules.
func FuzzModelsAndSources(f *testing.F) {
	seeds(f, func(p string) bool { return strings.HasSuffix(p, "rolecall.yaml") })
	f.Add([]byte("models:\n  tiers: {strong: a, cheap: null}\n  fallback: [strong, cheap]\n  allow_fallback: true\n"))
	f.Add([]byte("models:\n  tiers: {strong: 'tier:x'}\n"))
	f.Add([]byte("sources:\n  - {name: team, root: /opt/team, required: false}\n  - {name: local, root: vendor/x}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := discover.DecodeConfig("rolecall.yaml", data)
		if err != nil {
			checkErr(t, err, resolve.CodeConfigInvalid, resolve.CodePathEscape)
			return
		}
		if m := cfg.Models; m != nil {
			if len(m.Tiers) == 0 || m.Digest != resolve.ModelsDigest(&resolve.ModelCatalog{Tiers: m.Tiers, Fallback: m.Fallback, AllowFallback: m.AllowFallback}) {
				t.Fatalf("accepted an empty or unsealed catalog %+v", m)
			}
			for name, model := range m.Tiers {
				if resolve.ValidateName("tier", name) != nil || model != nil && (strings.HasPrefix(*model, resolve.TierPrefix) || strings.TrimSpace(*model) == "") {
					t.Fatalf("accepted tier %q → %v", name, model)
				}
			}
			for i, tier := range m.Fallback {
				if _, ok := m.Tiers[tier]; !ok || slices.Contains(m.Fallback[:i], tier) {
					t.Fatalf("accepted fallback %v", m.Fallback)
				}
			}
		}
		seen := map[string]bool{}
		for _, s := range cfg.Sources {
			if resolve.ValidateName("source", s.Name) != nil || s.Name == discover.SourceRoot || seen[s.Name] {
				t.Fatalf("accepted source name %q", s.Name)
			}
			seen[s.Name] = true
			if !filepath.IsAbs(s.Root) && (!filepath.IsLocal(s.Root) || s.Root == ".") {
				t.Fatalf("accepted source root %q", s.Root)
			}
		}
	})
}

// FuzzSkillSelection resolves tasks whose skill patterns are fuzzed
// against a fixed root: a root with skills of its own and in a source,
// beside a directory of skills that no source declares. Whatever the
// patterns, nothing panics, every selected skill is one discovery found
// in the source it names (its SKILL.md lies under that source), and the
// undeclared skills are never selected.
func FuzzSkillSelection(f *testing.F) {
	base := f.TempDir()
	dir := filepath.Join(base, "root")
	for _, p := range []string{"skills/review", "skills/go-lint", "team/skills/go-test", "team/skills/deploy"} {
		name := filepath.Base(p)
		writeFile(f, dir, p+"/SKILL.md", "---\nname: "+name+"\ndescription: d\n---\n")
	}
	writeFile(f, base, "outside/skills/secret/SKILL.md", "---\nname: secret\ndescription: d\n---\n")
	writeFile(f, dir, "rolecall.yaml", "sources:\n  - {name: team, root: team}\n")
	writeFile(f, dir, "packs/team.yaml", "roles:\n  architect:\n    model: m\n    skills: ['*']\n")
	s, err := discover.Load(dir, discover.Options{})
	if err != nil || len(s.SkillErrors) > 0 {
		f.Fatalf("load: %v %v", err, s.SkillErrors)
	}
	f.Add("go-*", "*")
	f.Add("../outside/skills/*", "secret")
	f.Add("*/*", "[")
	f.Add("*", "team:*")
	f.Fuzz(func(t *testing.T, entry, task string) {
		pf := *s.Packs["team"].Pack
		pf.Roles = map[string]resolve.PackEntry{"architect": {Model: ptr("m"), Skills: []string{entry}}}
		pf.Digest = ""
		in, err := s.Inputs(discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("team"), Task: resolve.TaskOverrides{Skills: []string{task}}})
		if err != nil {
			t.Fatal(err)
		}
		in.Pack = &pf
		spec, err := resolve.Resolve(resolve.RoleName("architect"), in)
		if err != nil {
			var re *resolve.ResolutionError
			if !errors.As(err, &re) || (re.Code != resolve.CodeSkillUnmatched && re.Code != resolve.CodeSkillOverlap) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		for _, sk := range spec.Skills {
			sf, ok := s.SkillFiles[sk.Name]
			if !ok || sf.Skill != sk || sk.Name == "secret" {
				t.Fatalf("selected %+v, which discovery did not find", sk)
			}
			prefix := "skills/"
			if sk.Source != discover.SourceRoot {
				prefix = sk.Source + ":/skills/"
			}
			if !strings.HasPrefix(sf.Origin.File, prefix+sk.Name+"/") {
				t.Fatalf("skill %+v from source %s was read at %s", sk, sk.Source, sf.Origin.File)
			}
		}
	})
}
