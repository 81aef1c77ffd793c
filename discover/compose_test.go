package discover_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// Pack composition, case by case as docs/CONFIG.md states it: how mixins
// merge, in which order they apply, what fails, and where each value is
// said to come from.

// files is a config root as file contents by path.
type files map[string]string

// writeRoot writes fs into a fresh config root.
func writeRoot(t testing.TB, fs files) string {
	t.Helper()
	dir := copyRoot(t, "")
	for rel, content := range fs {
		writeFile(t, dir, rel, content)
	}
	return dir
}

// envOf is a LookupEnv over a fixed map.
func envOf(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

func loadEnv(t testing.TB, dir string, env map[string]string) *discover.Snapshot {
	t.Helper()
	s, err := discover.Load(dir, discover.Options{LookupEnv: envOf(env)})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return s
}

// packOf loads fs and returns its composed pack name, failing on any
// problem.
func packOf(t *testing.T, fs files, env map[string]string, name string) *discover.PackFile {
	t.Helper()
	s := loadEnv(t, writeRoot(t, fs), env)
	pf, ok := s.Packs[name]
	if !ok {
		t.Fatalf("pack %q is not loaded: %v", name, s.PackErrors[name])
	}
	return pf
}

func entryString(e *resolve.PackEntry) string {
	if e == nil {
		return "<no entry>"
	}
	return fmt.Sprintf("%+v", *e)
}

func TestMergePolicy(t *testing.T) {
	const base = `roles:
  architect:
    model: base-model
    effort: low
    authority: [decide, record]
  reviewer:
    model: review-model
`
	cases := []struct {
		name string
		team string // packs/team.yaml; it extends base
		role string
		want *resolve.PackEntry // nil: the team has no entry for role
	}{
		{
			name: "mappings merge deep: the team's effort joins the inherited model",
			team: "roles:\n  architect:\n    effort: high\n",
			role: "architect",
			want: &resolve.PackEntry{Model: ptr("base-model"), Effort: ptr("high"), Authority: []string{"decide", "record"}},
		},
		{
			name: "deep written out is the default",
			team: "roles:\n  $merge: {architect: deep}\n  architect:\n    effort: high\n",
			role: "architect",
			want: &resolve.PackEntry{Model: ptr("base-model"), Effort: ptr("high"), Authority: []string{"decide", "record"}},
		},
		{
			name: "$merge shallow on a role entry (on roles) replaces the inherited entry whole",
			team: "roles:\n  $merge: {architect: shallow}\n  architect:\n    effort: high\n",
			role: "architect",
			want: &resolve.PackEntry{Effort: ptr("high")},
		},
		{
			name: "$merge shallow on one entry leaves its siblings merged",
			team: "roles:\n  $merge: {architect: shallow}\n  architect:\n    effort: high\n",
			role: "reviewer",
			want: &resolve.PackEntry{Model: ptr("review-model")},
		},
		{
			name: "$merge shallow at the top level replaces the inherited roles whole",
			team: "$merge: {roles: shallow}\nroles:\n  reviewer:\n    effort: low\n",
			role: "architect",
			want: nil,
		},
		{
			name: "deep at the top level keeps inherited entries the team does not name",
			team: "roles:\n  reviewer:\n    effort: low\n",
			role: "architect",
			want: &resolve.PackEntry{Model: ptr("base-model"), Effort: ptr("low"), Authority: []string{"decide", "record"}},
		},
		{
			name: "a list replaces the inherited list, never concatenated",
			team: "roles:\n  architect:\n    authority: [review]\n",
			role: "architect",
			want: &resolve.PackEntry{Model: ptr("base-model"), Effort: ptr("low"), Authority: []string{"review"}},
		},
		{
			name: "an empty list replaces too, and stays empty, not absent",
			team: "roles:\n  architect:\n    authority: []\n",
			role: "architect",
			want: &resolve.PackEntry{Model: ptr("base-model"), Effort: ptr("low"), Authority: []string{}},
		},
		{
			name: "a scalar replaces",
			team: "roles:\n  architect:\n    model: team-model\n",
			role: "architect",
			want: &resolve.PackEntry{Model: ptr("team-model"), Effort: ptr("low"), Authority: []string{"decide", "record"}},
		},
		{
			name: "null replaces like any scalar, so the key is absent again",
			team: "roles:\n  architect:\n    effort: null\n",
			role: "architect",
			want: &resolve.PackEntry{Model: ptr("base-model"), Authority: []string{"decide", "record"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pf := packOf(t, files{"packs/base.yaml": base, "packs/team.yaml": "extends: [base]\n" + tc.team}, nil, "team")
			var got *resolve.PackEntry
			if e, ok := pf.Pack.Roles[tc.role]; ok {
				got = &e
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("team's %s entry:\n got %s\nwant %s", tc.role, entryString(got), entryString(tc.want))
			}
		})
	}
}

// Nested mappings set their own policy: a pack's x- extensions are free
// mappings, so they show it at any depth.
func TestMergePolicyNested(t *testing.T) {
	base := "x-meta:\n  owner: platform\n  tags:\n    tier: gold\n    region: eu\n"
	for _, tc := range []struct {
		name, team string
		want       map[string]any
	}{
		{"nested mappings merge deep", "x-meta:\n  tags:\n    region: us\n",
			map[string]any{"owner": "platform", "tags": map[string]any{"tier": "gold", "region": "us"}}},
		{"a nested mapping's $merge replaces its own key whole", "x-meta:\n  $merge: {tags: shallow}\n  tags:\n    region: us\n",
			map[string]any{"owner": "platform", "tags": map[string]any{"region": "us"}}},
		{"a policy applies to its direct keys only", "x-meta:\n  $merge: {owner: shallow}\n  owner: infra\n  tags:\n    region: us\n",
			map[string]any{"owner": "infra", "tags": map[string]any{"tier": "gold", "region": "us"}}},
		{"the parent's shallow replaces the nested mapping, policies and all", "$merge: {x-meta: shallow}\nx-meta:\n  tags:\n    region: us\n",
			map[string]any{"tags": map[string]any{"region": "us"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pf := packOf(t, files{"packs/base.yaml": base, "packs/team.yaml": "extends: [base]\n" + tc.team}, nil, "team")
			if got := pf.Extensions["x-meta"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("x-meta = %v, want %v", got, tc.want)
			}
		})
	}
}

// chain writes packs p0 … pn where each extends the next.
func chain(n int) files {
	fs := files{}
	for i := range n + 1 {
		content := fmt.Sprintf("roles:\n  architect:\n    effort: e%d\n", i)
		if i < n {
			content = fmt.Sprintf("extends: [p%d]\n", i+1) + content
		} else {
			content += "    model: m\n"
		}
		fs[fmt.Sprintf("packs/p%d.yaml", i)] = content
	}
	return fs
}

// TestMixinOrder: linearization and provenance. Each case names the
// winner of each key: where the composed value is written.
func TestMixinOrder(t *testing.T) {
	cases := []struct {
		name    string
		files   files
		pack    string
		mixins  []string          // in the order applied
		want    resolve.PackEntry // the composed architect entry
		winners map[string]string // key → the file:line it is written at
	}{
		{
			name: "three levels: team extends mid extends base",
			files: files{
				"packs/base.yaml": "roles:\n  architect:\n    model: base-model\n    effort: base\n    authority: [base]\n",
				"packs/mid.yaml":  "extends: [base]\nroles:\n  architect:\n    effort: mid\n    boundaries: [mid]\n",
				"packs/team.yaml": "extends: [mid]\nroles:\n  architect:\n    boundaries: [team]\n",
			},
			pack: "team", mixins: []string{"base", "mid"},
			want: resolve.PackEntry{Model: ptr("base-model"), Effort: ptr("mid"), Authority: []string{"base"}, Boundaries: []string{"team"}},
			winners: map[string]string{
				"roles.architect.model":      "packs/base.yaml:3",
				"roles.architect.effort":     "packs/mid.yaml:4",
				"roles.architect.authority":  "packs/base.yaml:5",
				"roles.architect.boundaries": "packs/team.yaml:4",
				"roles.architect":            "packs/team.yaml:3",
			},
		},
		{
			name: "a diamond applies the shared base once, first: base, a, b, team",
			files: files{
				"packs/base.yaml": "roles:\n  architect:\n    model: base-model\n    effort: base\n    authority: [base]\n    boundaries: [base]\n    escalations: [base]\n",
				"packs/a.yaml":    "extends: [base]\nroles:\n  architect:\n    effort: a\n    authority: [a]\n",
				"packs/b.yaml":    "extends: [base]\nroles:\n  architect:\n    effort: b\n    boundaries: [b]\n",
				"packs/team.yaml": "extends: [a, b]\nroles:\n  architect:\n    escalations: [team]\n",
			},
			pack: "team", mixins: []string{"base", "a", "b"},
			want: resolve.PackEntry{Model: ptr("base-model"), Effort: ptr("b"), Authority: []string{"a"}, Boundaries: []string{"b"}, Escalations: []string{"team"}},
			winners: map[string]string{
				"roles.architect.model":       "packs/base.yaml:3", // only base sets it
				"roles.architect.effort":      "packs/b.yaml:4",    // a and b set it; b comes later
				"roles.architect.authority":   "packs/a.yaml:5",    // a's comes after base's, b leaves it
				"roles.architect.boundaries":  "packs/b.yaml:5",
				"roles.architect.escalations": "packs/team.yaml:4", // the pack itself comes last
			},
		},
		{
			name: "the order of extends is the order applied",
			files: files{
				"packs/a.yaml":    "roles:\n  architect:\n    model: m\n    effort: a\n",
				"packs/b.yaml":    "roles:\n  architect:\n    effort: b\n",
				"packs/team.yaml": "extends: [b, a]\n",
			},
			pack: "team", mixins: []string{"b", "a"},
			want:    resolve.PackEntry{Model: ptr("m"), Effort: ptr("a")},
			winners: map[string]string{"roles.architect.effort": "packs/a.yaml:4"},
		},
		{
			name:  "the embedded default pack can be extended",
			files: files{"packs/team.yaml": "extends: [default]\nroles:\n  architect:\n    effort: low\n"},
			pack:  "team", mixins: []string{"default"},
			want: func() resolve.PackEntry {
				e := builtinEntry(t, "architect")
				e.Effort = ptr("low")
				return e
			}(),
			winners: map[string]string{"roles.architect.effort": "packs/team.yaml:4", "roles.architect.model": "builtin:packs/default.yaml:19"},
		},
		{
			name:  "inside packs/default.yaml, default names the embedded pack",
			files: files{"packs/default.yaml": "extends: [default]\nroles:\n  architect:\n    model: house-model\n"},
			pack:  "default", mixins: []string{"default"},
			want: func() resolve.PackEntry {
				e := builtinEntry(t, "architect")
				e.Model = ptr("house-model")
				return e
			}(),
			winners: map[string]string{"roles.architect.model": "packs/default.yaml:4", "roles.architect.effort": "builtin:packs/default.yaml:20"},
		},
		{
			name: "elsewhere default names packs/default.yaml when there is one",
			files: files{
				"packs/default.yaml": "extends: [default]\nroles:\n  architect:\n    model: house-model\n",
				"packs/team.yaml":    "extends: [default]\nroles:\n  architect:\n    effort: low\n",
			},
			pack: "team", mixins: []string{"default", "default"},
			want: func() resolve.PackEntry {
				e := builtinEntry(t, "architect")
				e.Model, e.Effort = ptr("house-model"), ptr("low")
				return e
			}(),
			winners: map[string]string{"roles.architect.model": "packs/default.yaml:4"},
		},
		{
			name:    "a chain of 8 extends is allowed",
			files:   chain(8),
			pack:    "p0",
			mixins:  []string{"p8", "p7", "p6", "p5", "p4", "p3", "p2", "p1"},
			want:    resolve.PackEntry{Model: ptr("m"), Effort: ptr("e0")},
			winners: map[string]string{"roles.architect.model": "packs/p8.yaml:4"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pf := packOf(t, tc.files, nil, tc.pack)
			if !slices.Equal(pf.Mixins, tc.mixins) {
				t.Errorf("mixins applied %v, want %v", pf.Mixins, tc.mixins)
			}
			got := pf.Pack.Roles["architect"]
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("architect:\n got %s\nwant %s", entryString(&got), entryString(&tc.want))
			}
			for key, want := range tc.winners {
				if got := pf.Where(key).String(); got != want {
					t.Errorf("%s is written at %s, want %s", key, got, want)
				}
			}
		})
	}
}

// builtinEntry is an entry of the embedded default pack.
func builtinEntry(t *testing.T, role string) resolve.PackEntry {
	t.Helper()
	s := mustLoad(t, copyRoot(t, ""))
	return s.Packs["default"].Pack.Roles[role]
}

// compositionError is one root whose pack must fail: the code, where
// ("file:line"), a fragment of the message and details members.
type compositionError struct {
	name    string
	files   files
	env     map[string]string
	pack    string
	code    resolve.Code
	where   string
	msg     string
	details map[string]any
}

func (tc compositionError) run(t *testing.T) {
	t.Helper()
	s := loadEnv(t, writeRoot(t, tc.files), tc.env)
	if _, ok := s.Packs[tc.pack]; ok {
		t.Fatalf("pack %q loaded; want %s", tc.pack, tc.code)
	}
	perr, ok := s.PackErrors[tc.pack]
	if !ok {
		t.Fatalf("PackErrors lacks %q (has %v)", tc.pack, s.PackErrors)
	}
	// A task that selects the pack gets exactly this error.
	_, err := s.Inputs(discover.Request{Ref: resolve.RoleName("architect"), Pack: &tc.pack})
	de := asError(t, err)
	if de != perr {
		t.Errorf("a task got %v, want the pack's error", err)
	}
	if de.Code != tc.code || de.Code.Stage() != resolve.StageDiscover {
		t.Errorf("code %s (stage %s), want %s (discover): %v", de.Code, de.Code.Stage(), tc.code, de)
	}
	if !strings.HasPrefix(de.Error(), tc.where+": ") {
		t.Errorf("error %q does not start with %q", de, tc.where+": ")
	}
	if !strings.Contains(de.Message, tc.msg) {
		t.Errorf("message %q does not contain %q", de.Message, tc.msg)
	}
	d := de.Details()
	for k, v := range tc.details {
		if !reflect.DeepEqual(d[k], v) {
			t.Errorf("details[%s] = %#v, want %#v", k, d[k], v)
		}
	}
	// No value of the environment appears anywhere in the failure.
	for _, v := range tc.env {
		if strings.Contains(de.Error(), v) || strings.Contains(fmt.Sprint(d), v) {
			t.Errorf("the failure carries the value %q: %v %v", v, de, d)
		}
	}
	// The other packs still serve.
	if _, err := s.Inputs(discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("default")}); err != nil {
		t.Errorf("the default pack stopped serving: %v", err)
	}
}

func TestCompositionErrors(t *testing.T) {
	cases := []compositionError{
		{
			name:  "a cycle names its packs",
			files: files{"packs/a.yaml": "extends: [b]\n", "packs/b.yaml": "extends: [a]\n"},
			pack:  "a", code: resolve.CodePackInvalid, where: "packs/b.yaml:1", msg: "cycle: a → b → a",
			details: map[string]any{"cycle": []string{"a", "b", "a"}, "file": "packs/b.yaml", "line": 1, "key": "extends"},
		},
		{
			name:  "a pack that extends itself is a cycle",
			files: files{"packs/a.yaml": "roles: {}\nextends:\n  - a\n"},
			pack:  "a", code: resolve.CodePackInvalid, where: "packs/a.yaml:3",
			details: map[string]any{"cycle": []string{"a", "a"}},
		},
		{
			name:  "a pack that extends into a cycle names the cycle",
			files: files{"packs/team.yaml": "extends: [a]\n", "packs/a.yaml": "extends: [b]\n", "packs/b.yaml": "extends: [a]\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/b.yaml:1",
			details: map[string]any{"cycle": []string{"a", "b", "a"}},
		},
		{
			name:  "a missing mixin names the extending file and line",
			files: files{"packs/team.yaml": "roles: {}\nextends: [base, ghost]\n", "packs/base.yaml": "roles: {}\n"},
			pack:  "team", code: resolve.CodePackNotFound, where: "packs/team.yaml:2", msg: `pack "team" extends "ghost", which does not exist`,
		},
		{
			name:  "a chain of 9 extends is too deep",
			files: chain(9),
			pack:  "p0", code: resolve.CodePackInvalid, where: "packs/p8.yaml:1", msg: "deeper than 8 levels",
			details: map[string]any{"chain": []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"}},
		},
		{
			name:  "an unknown $-key",
			files: files{"packs/team.yaml": "roles:\n  $replace: {architect: true}\n  architect: {}\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:2", msg: `key "roles.$replace": unknown $-key`,
		},
		{
			name:  "an unknown $-key in a mixin names the mixin",
			files: files{"packs/team.yaml": "extends: [base]\n", "packs/base.yaml": "roles:\n  architect:\n    $keep: true\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/base.yaml:3", msg: `pack "team" extends "base", which is broken: key "roles.architect.$keep": unknown $-key`,
		},
		{
			name:  "a policy other than shallow or deep",
			files: files{"packs/team.yaml": "$merge: {roles: replace}\nroles: {}\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:1", msg: `key "$merge.roles": must be shallow or deep, got string "replace"`,
		},
		{
			name:  "a policy for a key the mapping does not set",
			files: files{"packs/team.yaml": "roles:\n  $merge: {architekt: shallow}\n  architect: {}\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:2", msg: `key "roles.$merge.architekt": names a key this mapping does not set`,
		},
		{
			name:  "$merge is a mapping",
			files: files{"packs/team.yaml": "$merge: shallow\nroles: {}\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:1", msg: `key "$merge": must be a mapping`,
		},
		{
			name:  "a $-key inside a list is refused: lists are not traversed",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: m\n    variants:\n      - $merge: {set: shallow}\n        set: {effort: low}\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:5", msg: "not read inside a list",
		},
		{
			name:  "extends is a list of names",
			files: files{"packs/team.yaml": "extends: base\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:1", msg: `key "extends": must be a list of pack names`,
		},
		{
			name:  "a mixin listed twice",
			files: files{"packs/team.yaml": "extends: [base, base]\n", "packs/base.yaml": "roles: {}\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:1", msg: `"base" is listed twice`,
		},
		{
			name:  "a strict-decoding error in a mixin is reported where the mixin writes it",
			files: files{"packs/team.yaml": "extends: [base]\nroles:\n  architect:\n    model: m\n", "packs/base.yaml": "roles:\n  architect:\n    colour: red\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/base.yaml:3", msg: `pack "team" extends "base", which is broken: key "roles.architect.colour": unknown key`,
		},
		{
			name:  "a mixin that does not parse breaks what extends it, naming the cause",
			files: files{"packs/team.yaml": "extends: [base]\n", "packs/base.yaml": "roles: [unclosed\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/base.yaml:1", msg: `pack "team" extends "base" (packs/team.yaml:1), which is broken: invalid YAML`,
			details: map[string]any{"paths": []string{"packs/team.yaml", "packs/base.yaml"}},
		},
		{
			name: "a broken pack breaks every pack above it",
			files: files{
				"packs/team.yaml": "extends: [mid]\n", "packs/mid.yaml": "extends: [base]\n",
				"packs/base.yaml": "roles:\n  architect:\n    active: maybe\n",
			},
			pack: "team", code: resolve.CodePackInvalid, where: "packs/base.yaml:3", msg: `pack "team" extends "base", which is broken: key "roles.architect.active": must be true or false`,
		},
		{
			name: "a mixin that fails on its own breaks what extends it, even where the pack replaces the bad part",
			files: files{
				"packs/team.yaml": "extends: [base]\nroles:\n  $merge: {architect: shallow}\n  architect:\n    model: m\n",
				"packs/base.yaml": "roles:\n  architect:\n    model: 5\n",
			},
			pack: "team", code: resolve.CodePackInvalid, where: "packs/base.yaml:3", msg: `pack "team" extends "base", which is broken: key "roles.architect.model": must be a string`,
		},
		{
			name: "a mixin's error counts even where the pack overrides the value",
			files: files{
				"packs/team.yaml": "extends: [base]\nroles:\n  $merge: {architect: shallow}\n  architect:\n    model: m\n",
				"packs/base.yaml": "roles:\n  architect:\n    model: ${env:UNLISTED}\n",
			},
			pack: "team", code: resolve.CodePlaceholderForbidden, where: "packs/base.yaml:3", msg: `pack "team" extends "base"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}
