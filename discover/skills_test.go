package discover_test

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

func TestDecodeModels(t *testing.T) {
	cfg, err := discover.DecodeConfig("rolecall.yaml", []byte("models:\n  tiers:\n    strong: opus\n    balanced: null\n    cheap: haiku\n  fallback: [strong, balanced, cheap]\n  allow_fallback: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := &resolve.ModelCatalog{
		Tiers:    map[string]*string{"strong": ptr("opus"), "balanced": nil, "cheap": ptr("haiku")},
		Fallback: []string{"strong", "balanced", "cheap"}, AllowFallback: true,
	}
	if diff := cmp.Diff(want, cfg.Models, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Digest" }, cmp.Ignore())); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
	if cfg.Models.Digest == "" || cfg.Models.Digest != resolve.ModelsDigest(&resolve.ModelCatalog{Tiers: want.Tiers, Fallback: want.Fallback, AllowFallback: true}) {
		t.Errorf("catalog not sealed with its digest: %q", cfg.Models.Digest)
	}
	if cfg.KeyLines["models.tiers.balanced"] != 4 || cfg.KeyLines["models.allow_fallback"] != 7 {
		t.Errorf("key lines %v", cfg.KeyLines)
	}

	cases := []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{"a catalog without fallback", "models:\n  tiers: {cheap: haiku}\n", 0, ""},
		{"tier symbols elsewhere pass decoding", "defaults:\n  model: tier:cheap\n", 0, ""},
		{"tiers missing", "models:\n  fallback: []\n", 1, `key "models.tiers": is required`},
		{"tiers null is absent", "models:\n  tiers: null\n", 1, `key "models.tiers": is required`},
		{"no tier", "models:\n  tiers: {}\n", 2, "names no tier"},
		{"tier name invalid", "models:\n  tiers:\n    Strong: opus\n", 3, `key "models.tiers.Strong": invalid tier name`},
		{"a tier's model is a tier symbol", "models:\n  tiers:\n    strong: opus\n    best: tier:strong\n", 4, "is a tier symbol"},
		{"a tier's model is a number", "models:\n  tiers:\n    strong: 4\n", 3, "must be a model name or null"},
		{"a tier's model is empty", "models:\n  tiers:\n    strong: ''\n", 3, "must be a model name or null"},
		{"fallback names an unknown tier", "models:\n  tiers: {strong: a}\n  fallback:\n    - strong\n    - huge\n", 5, `key "models.fallback[1]": tier "huge" is not in models.tiers`},
		{"fallback lists a tier twice", "models:\n  tiers: {strong: a}\n  fallback: [strong, strong]\n", 3, "is listed twice"},
		{"fallback is not a list", "models:\n  tiers: {strong: a}\n  fallback: strong\n", 3, "must be a list"},
		{"allow_fallback without fallback", "models:\n  tiers: {strong: a}\n  allow_fallback: true\n", 3, "fallback lists no tier"},
		{"allow_fallback is a string", "models:\n  tiers: {strong: a}\n  allow_fallback: 'yes'\n", 3, "must be true or false"},
		{"unknown key", "models:\n  tiers: {strong: a}\n  default: strong\n", 3, `key "models.default": unknown key`},
		{"duplicate tier", "models:\n  tiers:\n    strong: a\n    strong: b\n", 4, "duplicate key"},
		{"models is a list", "models: [strong]\n", 1, "must be a mapping"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := discover.DecodeConfig("rolecall.yaml", []byte(tc.yaml))
			checkDecode(t, err, tc.line, tc.msg, resolve.CodeConfigInvalid)
		})
	}
}

// checkDecode asserts a decoder's result: accepted when msg is "", else
// refused with code at line with msg in the message.
func checkDecode(t *testing.T, err *discover.Error, line int, msg string, code resolve.Code) {
	t.Helper()
	if msg == "" {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatal("accepted")
	}
	if err.Line != line || !strings.Contains(err.Message, msg) || err.Code != code {
		t.Errorf("got %v; want %s at line %d containing %q", err, code, line, msg)
	}
}

func TestDecodeSources(t *testing.T) {
	cfg, err := discover.DecodeConfig("rolecall.yaml", []byte("sources:\n  - name: team\n    root: vendor/./team\n  - {name: shared, root: /opt/skills, required: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []discover.SkillSource{{Name: "team", Root: "vendor/team", Required: true}, {Name: "shared", Root: "/opt/skills", Required: false}}
	if diff := cmp.Diff(want, cfg.Sources); diff != "" {
		t.Errorf("sources (-want +got):\n%s", diff)
	}
	if cfg.KeyLines["sources[1]"] != 4 {
		t.Errorf("key lines %v", cfg.KeyLines)
	}
	cases := []struct {
		name, yaml string
		line       int
		msg        string
		code       resolve.Code
	}{
		{"not a list", "sources: {name: a}\n", 1, "must be a list", resolve.CodeConfigInvalid},
		{"an entry is a string", "sources: [team]\n", 1, "must be a mapping", resolve.CodeConfigInvalid},
		{"name missing", "sources:\n  - root: x\n", 2, `key "sources[0].name": is required`, resolve.CodeConfigInvalid},
		{"root missing", "sources:\n  - name: x\n", 2, `key "sources[0].root": is required`, resolve.CodeConfigInvalid},
		{"name invalid", "sources:\n  - {name: My Team, root: x}\n", 2, "invalid name", resolve.CodeConfigInvalid},
		{"name root is reserved", "sources:\n  - {name: root, root: x}\n", 2, "is reserved", resolve.CodeConfigInvalid},
		{"name twice", "sources:\n  - {name: a, root: x}\n  - {name: a, root: y}\n", 3, `source "a" is declared twice`, resolve.CodeConfigInvalid},
		{"root twice", "sources:\n  - {name: a, root: x}\n  - {name: b, root: ./x}\n", 3, `is already the root of source "a"`, resolve.CodeConfigInvalid},
		{"root is the config root", "sources:\n  - {name: a, root: .}\n", 2, "is the config root", resolve.CodeConfigInvalid},
		{"relative root leaves the config root", "sources:\n  - {name: a, root: ../x}\n", 2, "leaves the config root", resolve.CodePathEscape},
		{"required is a string", "sources:\n  - {name: a, root: x, required: 'no'}\n", 2, "must be true or false", resolve.CodeConfigInvalid},
		{"unknown key", "sources:\n  - {name: a, root: x, trust: all}\n", 2, `key "sources[0].trust": unknown key`, resolve.CodeConfigInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := discover.DecodeConfig("rolecall.yaml", []byte(tc.yaml))
			checkDecode(t, err, tc.line, tc.msg, tc.code)
		})
	}
}

func TestDecodeSkill(t *testing.T) {
	sf, err := discover.DecodeSkill("skills/review/SKILL.md", "review", []byte("---\nname: review\ndescription: Review a change.\nx-owner: qa\n---\nBody.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if sf.Name != "review" || sf.Description != "Review a change." || sf.Extensions["x-owner"] != "qa" || sf.KeyLines["description"] != 3 {
		t.Errorf("decoded %+v", sf)
	}
	cases := []struct {
		name, md string
		line     int
		msg      string
	}{
		{"no frontmatter", "# Review\n", 1, "missing frontmatter"},
		{"name missing", "---\ndescription: d\n---\n", 1, `key "name": is required`},
		{"description missing", "---\nname: review\n---\n", 1, `key "description": is required`},
		{"empty frontmatter", "---\n---\n", 1, `key "name": is required`},
		{"name differs from the directory", "---\nname: reviews\ndescription: d\n---\n", 2, `is "reviews" but the directory is named "review"`},
		{"unknown key", "---\nname: review\ndescription: d\nallowed-tools: [Read]\n---\n", 4, `key "allowed-tools": unknown key (allowed: name, description)`},
		{"duplicate key", "---\nname: review\ndescription: d\ndescription: e\n---\n", 4, "duplicate key (first at line 3)"},
		{"description is a list", "---\nname: review\ndescription: [a]\n---\n", 3, "must be a string"},
		{"description is blank", "---\nname: review\ndescription: ' '\n---\n", 3, "must not be empty"},
		{"control character", "---\nname: review\ndescription: d\n---\nbell \x07\n", 5, "control character"},
		{"alias", "---\nname: &n review\ndescription: d\n---\n", 2, "anchors"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := discover.DecodeSkill("skills/review/SKILL.md", "review", []byte(tc.md))
			checkDecode(t, err, tc.line, tc.msg, resolve.CodeConfigInvalid)
			if err != nil && (err.File != "skills/review/SKILL.md" || err.Subject != "review") {
				t.Errorf("error names %s / %s", err.File, err.Subject)
			}
		})
	}
}

func TestDecodePackTiersAndSkills(t *testing.T) {
	pf, err := discover.DecodePack("packs/team.yaml", "team", []byte("roles:\n  architect:\n    model: tier:strong\n    tiers: [strong, balanced]\n    skills: [go-*, review]\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := pf.Pack.Roles["architect"]
	if *e.Model != "tier:strong" || !slices.Equal(e.Tiers, []string{"strong", "balanced"}) || !slices.Equal(e.Skills, []string{"go-*", "review"}) {
		t.Errorf("entry %+v", e)
	}
	if o := pf.KeyOrigins["roles.architect.skills"]; o.Line != 5 {
		t.Errorf("key origins %v", pf.KeyOrigins)
	}
	cases := []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{"empty lists", "roles:\n  architect: {tiers: [], skills: []}\n", 0, ""},
		{"a tier name invalid", "roles:\n  architect:\n    tiers: [Strong]\n", 3, `key "roles.architect.tiers[0]": invalid name`},
		{"a tier twice", "roles:\n  architect:\n    tiers:\n      - cheap\n      - cheap\n", 5, `tier "cheap" is listed twice`},
		{"tiers not a list", "roles:\n  architect:\n    tiers: strong\n", 3, "must be a list"},
		{"a bad glob", "roles:\n  architect:\n    skills: ['go-[']\n", 3, "not a valid glob pattern"},
		{"an empty pattern", "roles:\n  architect:\n    skills: ['']\n", 3, "must not be empty"},
		{"a pattern too long", "roles:\n  architect:\n    skills: ['" + strings.Repeat("a", resolve.MaxSkillPatternLen+1) + "']\n", 3, "is longer than"},
		{"a pattern is a number", "roles:\n  architect:\n    skills: [1]\n", 3, "must be a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := discover.DecodePack("packs/team.yaml", "team", []byte(tc.yaml))
			checkDecode(t, err, tc.line, tc.msg, resolve.CodePackInvalid)
		})
	}
}

// skillNames lists the names of skills.
func skillNames(skills []resolve.Skill) []string {
	out := []string{}
	for _, s := range skills {
		out = append(out, s.Name)
	}
	return out
}

func TestLoadSkills(t *testing.T) {
	dir := copyRoot(t, "skills")
	abs := filepath.Join(filepath.Dir(dir), "shared")
	writeFile(t, abs, "skills/ops-pager/SKILL.md", "---\nname: ops-pager\ndescription: Page the on-call.\n---\n")
	writeFile(t, dir, "rolecall.yaml", readFile(t, dir, "rolecall.yaml")+"  - name: shared\n    root: "+abs+"\n")
	s := mustLoad(t, dir)

	if got, want := skillNames(s.Skills), []string{"deploy", "go-lint", "go-test", "ops-pager", "review"}; !slices.Equal(got, want) {
		t.Fatalf("skills %v, want %v (errors %v)", got, want, s.SkillErrors)
	}
	if len(s.SkillErrors) != 0 || len(s.Warnings) != 0 {
		t.Fatalf("problems %v, warnings %v", s.SkillErrors, s.Warnings)
	}
	for _, c := range []struct{ name, source, origin string }{
		{"review", "root", "skills/review/SKILL.md"},
		{"go-test", "team", "team:/skills/go-test/SKILL.md"},
		{"ops-pager", "shared", "shared:/skills/ops-pager/SKILL.md"},
	} {
		sf := s.SkillFiles[c.name]
		if sf.Source != c.source || sf.Origin.File != c.origin || s.SkillOrigin(c.name).File != c.origin {
			t.Errorf("%s: source %s origin %s, want %s %s", c.name, sf.Source, sf.Origin.File, c.source, c.origin)
		}
		if !strings.HasPrefix(sf.Digest, resolve.DigestPrefix) {
			t.Errorf("%s: digest %q", c.name, sf.Digest)
		}
	}
	if got := s.SkillFiles["go-lint"].Files; !slices.Equal(got, []string{"SKILL.md", "scripts/lint.sh"}) {
		t.Errorf("go-lint files %v", got)
	}
	var files []string
	for _, f := range s.Files {
		files = append(files, f.File)
	}
	for _, f := range []string{"skills/go-lint/scripts/lint.sh", "team:/skills/deploy/SKILL.md", "shared:/skills/ops-pager/SKILL.md"} {
		if !slices.Contains(files, f) {
			t.Errorf("snapshot files lack %s: %v", f, files)
		}
	}
	if s.Models == nil || s.Models.Digest == "" || s.Models.Tiers["balanced"] != nil {
		t.Errorf("models %+v", s.Models)
	}
	if o := s.TierOrigin("cheap"); o.String() != "rolecall.yaml:5" {
		t.Errorf("tier origin %s", o)
	}

	in, err := s.Inputs(discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("team")})
	if err != nil {
		t.Fatal(err)
	}
	if in.Models != s.Models || len(in.Skills) != 5 {
		t.Fatalf("inputs carry models %p skills %d", in.Models, len(in.Skills))
	}
	spec, err := resolve.Resolve(resolve.RoleName("architect"), in)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Model != "model-strong" || spec.ModelTier == nil || spec.ModelTier.CatalogDigest != s.Models.Digest {
		t.Errorf("model %q tier %+v", spec.Model, spec.ModelTier)
	}
	if got := skillNames(spec.Skills); !slices.Equal(got, []string{"go-lint", "go-test", "review"}) || spec.Sources.Skills != resolve.SourcePack {
		t.Errorf("skills %v from %s", got, spec.Sources.Skills)
	}
}

func readFile(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A skill's digest covers every file of its directory: content, names
// and new files; another skill's files and dot-files do not count.
func TestSkillDigest(t *testing.T) {
	dir := copyRoot(t, "skills")
	digest := func() string { return mustLoad(t, dir).SkillFiles["go-lint"].Digest }
	seen := map[string]string{}
	for _, step := range []struct {
		name   string
		change func()
		same   bool
	}{
		{"as copied", func() {}, false},
		{"a script's content", func() { writeFile(t, dir, "skills/go-lint/scripts/lint.sh", "#!/bin/sh\ngo vet ./...\n") }, false},
		{"a new file", func() { writeFile(t, dir, "skills/go-lint/README", "notes\n") }, false},
		{"a renamed file", func() {
			if err := os.Rename(filepath.Join(dir, "skills/go-lint/README"), filepath.Join(dir, "skills/go-lint/NOTES")); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"another skill's file", func() { writeFile(t, dir, "skills/review/extra.md", "x\n") }, true},
		{"a dot-file", func() { writeFile(t, dir, "skills/go-lint/.swp", "x\n") }, true},
	} {
		step.change()
		d := digest()
		prev := seen["last"]
		if step.same != (d == prev) {
			t.Errorf("%s: digest %s, previous %s; want same=%v", step.name, d, prev, step.same)
		}
		if other, dup := seen[d]; dup && !step.same {
			t.Errorf("%s: digest equals that of %s", step.name, other)
		}
		seen[d], seen["last"] = step.name, d
	}
}

func TestSkillSourceProblems(t *testing.T) {
	const optional = "sources:\n  - name: team\n    root: vendor/team\n    required: false\n"
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
		code  resolve.Code // "" = no problem
		where string
		msg   string
		paths []string
		warn  string // a warning's "file:line: code"
	}{
		{name: "a required source whose root is missing", setup: func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "vendor"))
		}, code: resolve.CodeSourceMissing, where: "rolecall.yaml:9", msg: `skill source "team" is required but root "vendor/team" does not exist`},
		{name: "a required source without skills/", setup: func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "vendor/team/skills"))
		}, code: resolve.CodeSourceMissing, where: "rolecall.yaml:9", msg: "it has no skills/ directory"},
		{name: "an absolute source that is missing", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "rolecall.yaml", "sources:\n  - name: far\n    root: "+filepath.Join(dir, "nowhere")+"\n")
		}, code: resolve.CodeSourceMissing, where: "rolecall.yaml:2", msg: `skill source "far" is required`},
		{name: "an optional source that is missing", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "rolecall.yaml", optional)
			os.RemoveAll(filepath.Join(dir, "vendor"))
		}, warn: "rolecall.yaml:2: source_skipped"},
		{name: "a source root that is a file", setup: func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "vendor/team"))
			writeFile(t, dir, "vendor/team", "")
		}, code: resolve.CodeConfigInvalid, where: "rolecall.yaml:9", msg: "is not a directory"},
		{name: "a relative source root that is a symlink out of the config root", setup: func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "vendor/team"))
			writeFile(t, filepath.Dir(dir), "outside/skills/x/SKILL.md", "---\nname: x\ndescription: d\n---\n")
			symlink(t, filepath.Join(filepath.Dir(dir), "outside"), dir, "vendor/team")
		}, code: resolve.CodePathEscape, where: "rolecall.yaml:9", msg: "leads outside its trusted root"},
		{name: "one skill name in two sources", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "vendor/team/skills/review/SKILL.md", "---\nname: review\ndescription: Theirs.\n---\n")
		}, code: resolve.CodeSkillDuplicate, where: "team:/skills/review/SKILL.md:1", msg: `skill "review" is offered twice`,
			paths: []string{"skills/review/SKILL.md", "team:/skills/review/SKILL.md"}},
		{name: "a symlinked skill directory escaping its root", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Dir(dir), "elsewhere/SKILL.md", "---\nname: sneaky\ndescription: d\n---\n")
			symlink(t, filepath.Join(filepath.Dir(dir), "elsewhere"), dir, "skills/sneaky")
		}, code: resolve.CodePathEscape, where: "skills/sneaky", msg: "outside its trusted root"},
		{name: "a symlinked skill directory escaping a source's root", setup: func(t *testing.T, dir string) {
			symlink(t, "../../../skills/review", dir, "vendor/team/skills/sneaky")
		}, code: resolve.CodePathEscape, where: "team:/skills/sneaky", msg: "outside its trusted root"},
		{name: "a symlinked file inside a skill escaping its root", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Dir(dir), "secret.txt", "s3cret\n")
			symlink(t, filepath.Join(filepath.Dir(dir), "secret.txt"), dir, "skills/review/secret.txt")
		}, code: resolve.CodePathEscape, where: "skills/review/secret.txt", msg: "outside its trusted root"},
		{name: "a symlinked skill directory inside its root is followed", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "library/audit/SKILL.md", "---\nname: audit\ndescription: d\n---\n")
			symlink(t, "../library/audit", dir, "skills/audit")
		}},
		{name: "a symlink loop in a skill", setup: func(t *testing.T, dir string) {
			symlink(t, ".", dir, "skills/review/loop")
		}, code: resolve.CodeConfigInvalid, where: "skills/review/loop/loop", msg: "symbolic links"},
		{name: "a SKILL.md that does not decode", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "vendor/team/skills/deploy/SKILL.md", "---\nname: deploy\ndescription: d\nowner: me\n---\n")
		}, code: resolve.CodeConfigInvalid, where: "team:/skills/deploy/SKILL.md:4", msg: `key "owner": unknown key`},
		{name: "a skill directory without SKILL.md", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "skills/empty/notes.md", "x\n")
		}, code: resolve.CodeConfigInvalid, where: "skills/empty", msg: "must hold SKILL.md"},
		{name: "a skill directory with an invalid name", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "skills/Bad Name/SKILL.md", "---\nname: Bad Name\ndescription: d\n---\n")
		}, code: resolve.CodeConfigInvalid, where: "skills/Bad Name", msg: "not a valid skill name"},
		{name: "the config root's skills is a file", setup: func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "skills"))
			writeFile(t, dir, "skills", "not a directory\n")
		}, code: resolve.CodeConfigInvalid, where: "skills: ", msg: "is not a directory"},
		{name: "a config root without skills/ is fine", setup: func(t *testing.T, dir string) {
			os.RemoveAll(filepath.Join(dir, "skills"))
		}},
		{name: "a file beside the skills is not a skill", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "skills/README.md", "# Skills\n")
		}},
		{name: "a FIFO in a skill", setup: func(t *testing.T, dir string) {
			mkfifo(t, filepath.Join(dir, "skills/review/pipe"))
		}, code: resolve.CodeConfigInvalid, where: "skills/review/pipe", msg: "is not a regular file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyRoot(t, "skills")
			tc.setup(t, dir)
			s, err := discover.Load(dir, discover.Options{})
			if err != nil {
				t.Fatalf("a skill problem failed the load: %v", err)
			}
			var warns []string
			for _, w := range s.Warnings {
				warns = append(warns, w.Error())
			}
			if tc.warn != "" && (len(warns) != 1 || !strings.HasPrefix(warns[0], tc.warn)) {
				t.Errorf("warnings %q, want one starting %q", warns, tc.warn)
			}
			if tc.code == "" {
				if len(s.SkillErrors) != 0 {
					t.Fatalf("problems %v", s.SkillErrors)
				}
				return
			}
			if len(s.SkillErrors) == 0 {
				t.Fatalf("no problem; skills %v", skillNames(s.Skills))
			}
			e := s.SkillErrors[0]
			if e.Code != tc.code || !strings.HasPrefix(e.Error(), tc.where) || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got %v; want %s at %s containing %q", e, tc.code, tc.where, tc.msg)
			}
			if tc.paths != nil && !slices.Equal(e.Paths, tc.paths) {
				t.Errorf("paths %v, want %v", e.Paths, tc.paths)
			}
			// Fail closed, but only for the tasks that use skills.
			if _, err := s.Inputs(discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("team")}); !errors.Is(err, e) {
				t.Errorf("a task whose entry admits skills: %v, want %v", err, e)
			}
			if _, err := s.Inputs(discover.Request{Ref: resolve.RoleName("reviewer"), Pack: ptr("team")}); err != nil {
				t.Errorf("a task without skills: %v", err)
			}
		})
	}
}

// Inputs fails a task with the skill sources' problem exactly when its
// resolution would consult skills.
func TestInputsSkillProblemOnlyWhenSkillsAreConsulted(t *testing.T) {
	dir := copyRoot(t, "skills")
	os.RemoveAll(filepath.Join(dir, "vendor"))
	writeFile(t, dir, "packs/team.yaml", readFile(t, dir, "packs/team.yaml")+"  critic:\n    model: m\n    skills: []\n")
	s := mustLoad(t, dir)
	cases := []struct {
		name  string
		req   discover.Request
		fails bool
	}{
		{"the entry admits skills", discover.Request{Ref: resolve.RoleName("tester"), Pack: ptr("team")}, true},
		{"the task narrows them to none, and the entry's patterns still count", discover.Request{Ref: resolve.RoleName("tester"), Pack: ptr("team"), Task: resolve.TaskOverrides{Skills: []string{}}}, true},
		{"the task asks for skills", discover.Request{Ref: resolve.RoleName("reviewer"), Pack: ptr("team"), Task: resolve.TaskOverrides{Skills: []string{"review"}}}, true},
		{"a replacement asking for skills", discover.Request{Ref: resolve.ExternalRef{Name: "bot"}, Task: resolve.TaskOverrides{Skills: []string{"x"}}}, true},
		{"no skills anywhere", discover.Request{Ref: resolve.RoleName("reviewer"), Pack: ptr("team")}, false},
		{"an entry admitting none", discover.Request{Ref: resolve.RoleName("critic"), Pack: ptr("team")}, false},
		{"the task's empty list", discover.Request{Ref: resolve.RoleName("reviewer"), Pack: ptr("team"), Task: resolve.TaskOverrides{Skills: []string{}}}, false},
		{"a role the pack lacks", discover.Request{Ref: resolve.RoleName("planner"), Pack: ptr("team")}, false},
	}
	writeFile(t, dir, "agents/bot.md", "---\ndisposition: replacement\nmodel: m\n---\nI am bot.\n")
	s = mustLoad(t, dir)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Inputs(tc.req)
			var de *discover.Error
			got := errors.As(err, &de) && de.Code == resolve.CodeSourceMissing
			if got != tc.fails {
				t.Errorf("source_missing %v, want %v (err %v)", got, tc.fails, err)
			}
			if !tc.fails && err != nil {
				t.Errorf("unexpected error %v", err)
			}
		})
	}
}

func TestValidateTiersAndSkills(t *testing.T) {
	dir := copyRoot(t, "skills")
	writeFile(t, dir, "rolecall.yaml", `defaults:
  model: tier:huge
models:
  tiers:
    strong: model-strong
    balanced: null
    cheap: model-cheap
  fallback: [strong, balanced, cheap]
sources:
  - name: team
    root: vendor/team
  - name: gone
    root: gone
    required: false
`)
	writeFile(t, dir, "packs/team.yaml", `roles:
  architect:
    model: tier:cheap
    tiers: [strong, balanced, mega]
    skills: [go-*, review, go-lint, nothing-*]
  tester:
    model: tier:balanced
  reviewer:
    model: plain
    tiers: [cheap]
  critic:
    model: tier:strong
    tiers: [cheap]
`)
	writeFile(t, dir, "agents/tuned.md", "---\ndisposition: overlay\nbase_role: architect\nmodel: tier:giant\n---\n")
	var got []string
	for _, e := range discover.Validate(dir) {
		got = append(got, e.Error())
	}
	want := []string{
		`agents/tuned.md:4: tier_unknown: profile tuned's model "tier:giant" names a tier that is not in the model catalog (tiers: "balanced", "cheap", "strong")`,
		`packs/team.yaml:3: tier_unsupported: pack "team" role "architect"'s model "tier:cheap" names a tier the role does not support (supported: "strong", "balanced", "mega")`,
		`packs/team.yaml:4: tier_unavailable: pack "team" role "architect" supports tier "balanced", which yields no model (tried "balanced")`,
		`packs/team.yaml:4: tier_unknown: pack "team" role "architect" supports tier "mega", which is not in the model catalog (tiers: "balanced", "cheap", "strong")`,
		`packs/team.yaml:5: skill_overlap: pack "team" role "architect" skill "go-lint" is matched by both "go-*" and "go-lint"`,
		`packs/team.yaml:5: skill_unmatched: pack "team" role "architect" skill pattern "nothing-*" matches no skill`,
		`packs/team.yaml:7: tier_unavailable: pack "team" role "tester"'s model "tier:balanced" yields no model (tried "balanced")`,
		`packs/team.yaml:12: tier_unsupported: pack "team" role "critic"'s model "tier:strong" names a tier the role does not support (supported: "cheap")`,
		`rolecall.yaml:2: tier_unknown: defaults.model "tier:huge" names a tier that is not in the model catalog (tiers: "balanced", "cheap", "strong")`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	// Skill sources' problems are problems; a skipped optional source is
	// not (Load keeps it as a warning).
	os.RemoveAll(filepath.Join(dir, "vendor"))
	got = nil
	for _, e := range discover.Validate(dir) {
		if e.Code == resolve.CodeSourceMissing || e.Code == resolve.CodeSkillUnmatched || e.Code == discover.DiagnosticSourceSkipped {
			got = append(got, e.Error())
		}
	}
	want = []string{`rolecall.yaml:10: source_missing: skill source "team" is required but root "vendor/team" does not exist (declare it required: false to go on without it)`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("source problems (-want +got):\n%s", diff)
	}
	s := mustLoad(t, dir)
	if len(s.Warnings) != 1 || s.Warnings[0].Code != discover.DiagnosticSourceSkipped || s.Warnings[0].Line != 12 {
		t.Errorf("warnings %v", s.Warnings)
	}
}

func TestValidateSkillsRootIsClean(t *testing.T) {
	if problems := discover.Validate(copyRoot(t, "skills")); len(problems) != 0 {
		t.Errorf("problems: %v", problems)
	}
}

func TestRosterEntries(t *testing.T) {
	s := mustLoad(t, copyRoot(t, "skills"))
	got, err := s.RosterEntries("team")
	if err != nil {
		t.Fatal(err)
	}
	arch := discover.RosterEntry{
		Identity: "architect", Description: s.Catalog.Roles["architect"].Description,
		Tiers: []discover.RosterTier{
			{Name: "strong", Available: true, Model: "model-strong", ResolvedVia: "tier"},
			{Name: "balanced", Available: true, Model: "model-cheap", ResolvedVia: "fallback:cheap"},
			{Name: "cheap", Available: true, Model: "model-cheap", ResolvedVia: "tier"},
		},
		Skills: []discover.RosterSkill{
			{Name: "go-lint", Source: "root", Description: "Run the Go linters."},
			{Name: "go-test", Source: "team", Description: "Run the Go tests with the race detector."},
			{Name: "review", Source: "root", Description: "Review a change against the team's checklist."},
		},
	}
	reviewer := discover.RosterEntry{
		Identity: "reviewer", Description: s.Catalog.Roles["reviewer"].Description,
		Tiers: []discover.RosterTier{
			{Name: "balanced", Available: true, Model: "model-cheap", ResolvedVia: "fallback:cheap"},
			{Name: "cheap", Available: true, Model: "model-cheap", ResolvedVia: "tier"},
			{Name: "strong", Available: true, Model: "model-strong", ResolvedVia: "tier"},
		},
		Skills: []discover.RosterSkill{},
	}
	if len(got) != 3 {
		t.Fatalf("roster %+v", got)
	}
	if diff := cmp.Diff(arch, got[0]); diff != "" {
		t.Errorf("architect (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(reviewer, got[1]); diff != "" {
		t.Errorf("reviewer (-want +got):\n%s", diff)
	}
	if got[2].Identity != "tester" || len(got[2].Skills) != 4 {
		t.Errorf("tester %+v", got[2])
	}
	ids, _ := s.Roster("team")
	for i, e := range got {
		if ids[i] != e.Identity {
			t.Errorf("entry %d is %s, the plain roster says %s", i, e.Identity, ids[i])
		}
	}
}

// A Source notices the files of skills and sources: an edited skill file,
// a new skill, a source that appears, and a changed model catalog each
// give a new snapshot; a missing source is logged once, not per sweep.
func TestSourceReloadsSkillsAndModels(t *testing.T) {
	dir := copyRoot(t, "skills")
	absent := filepath.Join(filepath.Dir(dir), "later")
	writeFile(t, dir, "rolecall.yaml", readFile(t, dir, "rolecall.yaml")+"  - name: later\n    root: "+absent+"\n    required: false\n")
	src, rec := newSource(t, dir, 0)
	const skipped = "discover: optional skill source skipped"
	if n := rec.count(slog.LevelInfo, skipped); n != 1 {
		t.Fatalf("%d source_skipped records at start, want 1", n)
	}
	steps := []struct {
		name   string
		change func()
		check  func(s *discover.Snapshot) bool
	}{
		{"a skill's script", func() {
			writeFile(t, dir, "skills/go-lint/scripts/lint.sh", "#!/bin/sh\ngo vet ./... && staticcheck ./...\n")
		}, nil},
		{"a new skill in a source", func() {
			writeFile(t, dir, "vendor/team/skills/release/SKILL.md", "---\nname: release\ndescription: Cut a release.\n---\n")
		}, func(s *discover.Snapshot) bool { return s.SkillFiles["release"] != nil }},
		{"an optional source that appears", func() {
			writeFile(t, absent, "skills/pager/SKILL.md", "---\nname: pager\ndescription: Page.\n---\n")
		}, func(s *discover.Snapshot) bool { return s.SkillFiles["pager"] != nil && len(s.Warnings) == 0 }},
		{"the model catalog", func() {
			writeFile(t, dir, "rolecall.yaml", strings.Replace(readFile(t, dir, "rolecall.yaml"), "cheap: model-cheap", "cheap: model-cheaper", 1))
		}, func(s *discover.Snapshot) bool { return *s.Models.Tiers["cheap"] == "model-cheaper" }},
	}
	prev := reloaded(t, src)
	for _, st := range steps {
		st.change()
		next := reloaded(t, src)
		if next == prev || next.Digest == prev.Digest {
			t.Fatalf("%s: no new snapshot", st.name)
		}
		if st.check != nil && !st.check(next) {
			t.Errorf("%s: the new snapshot does not show it", st.name)
		}
		if st.name == "the model catalog" && next.Models.Digest == prev.Models.Digest {
			t.Errorf("the catalog digest did not change")
		}
		prev = next
	}
	if n := rec.count(slog.LevelInfo, skipped); n != 1 {
		t.Errorf("%d source_skipped records in all, want 1", n)
	}
	// A required source that goes missing is a problem logged once.
	os.RemoveAll(filepath.Join(dir, "vendor"))
	for range 3 {
		reloaded(t, src)
	}
	const problem = "discover: skill source problem; tasks that use skills fail with it"
	if n := rec.count(slog.LevelWarn, problem); n != 1 {
		t.Errorf("%d skill problem records, want 1", n)
	}
	if s := reloaded(t, src); len(s.SkillErrors) != 1 || s.SkillErrors[0].Code != resolve.CodeSourceMissing {
		t.Errorf("skill errors %v", s.SkillErrors)
	}
}

// The sweep's stamps cover skill files and source roots: with every file
// old (so no reload happens just because a file is recent), a sweep
// reloads exactly when one of them changed.
func TestSweepCoversSkills(t *testing.T) {
	dir := copyRoot(t, "skills")
	absent := filepath.Join(filepath.Dir(dir), "later")
	writeFile(t, dir, "rolecall.yaml", readFile(t, dir, "rolecall.yaml")+"  - name: later\n    root: "+absent+"\n    required: false\n")
	ageFiles(t, dir, -time.Hour)
	if !discover.SweepMatchesLoad(dir) {
		t.Fatal("a sweep of the unchanged root differs from the load's scan")
	}
	src, _ := newSource(t, dir, 0)
	for _, c := range []struct {
		name   string
		change func()
	}{
		{"a file deep in a skill", func() { writeFile(t, dir, "skills/go-lint/scripts/lint.sh", "changed\n") }},
		{"a skill in a declared source", func() {
			writeFile(t, dir, "vendor/team/skills/deploy/SKILL.md", "---\nname: deploy\ndescription: Deploy to prod.\n---\n")
		}},
		{"an absolute source appearing", func() { writeFile(t, absent, "skills/pager/SKILL.md", "---\nname: pager\ndescription: Page.\n---\n") }},
	} {
		if changed, err := src.Reload(); changed || err != nil {
			t.Fatalf("before %s: reload without a change (changed %v, err %v)", c.name, changed, err)
		}
		c.change()
		ageFiles(t, dir, -30*time.Minute)
		ageFiles(t, filepath.Dir(dir), -30*time.Minute)
		if changed, err := src.Reload(); !changed || err != nil {
			t.Errorf("%s: the sweep did not reload (err %v)", c.name, err)
		}
	}
}
