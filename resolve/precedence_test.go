package resolve_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/resolve"
)

// fieldOf reads one row of the docs/CONFIG.md table from a result: the
// effective value and its sources entry.
var fieldOf = map[string]func(resolve.ResolvedAgentSpec) (any, string){
	"identity":    func(s resolve.ResolvedAgentSpec) (any, string) { return s.Identity, s.Sources.Identity },
	"model":       func(s resolve.ResolvedAgentSpec) (any, string) { return s.Model, s.Sources.Model },
	"effort":      func(s resolve.ResolvedAgentSpec) (any, string) { return s.Effort, s.Sources.Effort },
	"modes":       func(s resolve.ResolvedAgentSpec) (any, string) { return s.Identity.Modes, s.Sources.Modes },
	"tools":       func(s resolve.ResolvedAgentSpec) (any, string) { return s.Tools, s.Sources.Tools },
	"permissions": func(s resolve.ResolvedAgentSpec) (any, string) { return s.Permissions, s.Sources.Permissions },
	"yolo":        func(s resolve.ResolvedAgentSpec) (any, string) { return s.Yolo, s.Sources.Yolo },
	"bypass":      func(s resolve.ResolvedAgentSpec) (any, string) { return s.Bypass, s.Sources.Bypass },
	"fast_mode":   func(s resolve.ResolvedAgentSpec) (any, string) { return s.FastMode, s.Sources.FastMode },
	"lion_system": func(s resolve.ResolvedAgentSpec) (any, string) { return s.LionSystem, s.Sources.LionSystem },
	"prompt":      func(s resolve.ResolvedAgentSpec) (any, string) { return s.PromptDisposition, s.Sources.Prompt },
	"artifact_defaults": func(s resolve.ResolvedAgentSpec) (any, string) {
		return s.ArtifactDefaults, s.Sources.ArtifactDefaults
	},
	"timeout": func(s resolve.ResolvedAgentSpec) (any, string) {
		return deadline{s.Timeout, s.ResumeOnTimeout}, s.Sources.Timeout
	},
	"active": func(s resolve.ResolvedAgentSpec) (any, string) { return s.Active, s.Sources.Active },
	"pack":   func(s resolve.ResolvedAgentSpec) (any, string) { return s.Pack.Name, s.Sources.Pack },
}

type deadline struct {
	Timeout *int
	Resume  bool
}

// precedenceCase is one row of the precedence table. Its name is
// "<field>/<source>: <why>", and the test checks that the name's source is
// the one recorded, so the table cannot drift from what it claims.
type precedenceCase struct {
	name string
	ref  resolve.RoleRef
	in   resolve.Inputs
	want any
	src  string
}

func precedenceCases() []precedenceCase {
	policy := func(tool string) *resolve.PermissionPolicy {
		return &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Allow: map[string][]string{tool: {"*"}}}
	}
	cs := []precedenceCase{
		// identity
		{name: "identity/casts: a bare name selects the built-in Role",
			ref: casts("architect"), in: inputs(),
			want: resolve.Identity{Kind: resolve.IdentityCasts, Name: "architect", Modes: []string{"systematic", "premortem"}},
			src:  "casts:architect"},
		{name: "identity/external: external:<name> selects the supplied replacement",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter"))),
			want: resolve.Identity{Kind: resolve.IdentityExternal, Name: "ghostwriter", Modes: []string{}},
			src:  "external:ghostwriter"},
		{name: "identity/external: a replacement named like a built-in Role stays a raw identity",
			ref: external("architect"), in: inputs(withProfile(replacement("architect"))),
			want: resolve.Identity{Kind: resolve.IdentityExternal, Name: "architect", Modes: []string{}},
			src:  "external:architect"},

		// model
		{name: "model/task: the task value beats profile, pack and runtime",
			ref: casts("architect"),
			in: inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.Model = ptr("profile-model") })),
				withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("task-model") })),
			want: "task-model", src: "task"},
		{name: "model/external_profile: an overlay beats pack and runtime",
			ref:  casts("architect"),
			in:   inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.Model = ptr("profile-model") }))),
			want: "profile-model", src: "external_profile"},
		{name: "model/external_profile: a replacement beats runtime",
			ref:  external("ghostwriter"),
			in:   inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.Model = ptr("profile-model") }))),
			want: "profile-model", src: "external_profile"},
		{name: "model/pack: the selected pack entry beats runtime",
			ref: casts("architect"), in: inputs(), want: "pack-model", src: "pack"},
		{name: "model/runtime_default: an entry without model falls through to runtime",
			ref: casts("reviewer"), in: inputs(), want: "runtime-model", src: "runtime_default"},
		{name: "model/runtime_default: a replacement skips the pack rows, even a same-named entry",
			ref:  external("ghostwriter"),
			in:   inputs(withProfile(replacement("ghostwriter")), withEntry("ghostwriter", func(e *resolve.PackEntry) { e.Model = ptr("pack-model") })),
			want: "runtime-model", src: "runtime_default"},

		// effort
		{name: "effort/task: the task value beats profile, pack and runtime",
			ref: casts("architect"),
			in: inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.Effort = ptr("profile-effort") })),
				withTask(func(t *resolve.TaskOverrides) { t.Effort = ptr("task-effort") }),
				withDefaults(func(d *resolve.RuntimeDefaults) { d.Effort = ptr("runtime-effort") })),
			want: ptr("task-effort"), src: "task"},
		{name: "effort/external_profile: an overlay beats pack and runtime",
			ref:  casts("architect"),
			in:   inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.Effort = ptr("profile-effort") }))),
			want: ptr("profile-effort"), src: "external_profile"},
		{name: "effort/pack: the selected pack entry beats runtime",
			ref: casts("architect"), in: inputs(withDefaults(func(d *resolve.RuntimeDefaults) { d.Effort = ptr("runtime-effort") })),
			want: ptr("pack-effort"), src: "pack"},
		{name: "effort/runtime_default: an entry without effort falls through to runtime",
			ref: casts("reviewer"), in: inputs(withDefaults(func(d *resolve.RuntimeDefaults) { d.Effort = ptr("runtime-effort") })),
			want: ptr("runtime-effort"), src: "runtime_default"},
		{name: "effort/provider_default: no level sets effort, so it stays unset",
			ref: casts("reviewer"), in: inputs(), want: (*string)(nil), src: "provider_default"},
		{name: "effort/provider_default: a replacement skips the pack rows",
			ref:  external("ghostwriter"),
			in:   inputs(withProfile(replacement("ghostwriter")), withEntry("ghostwriter", func(e *resolve.PackEntry) { e.Effort = ptr("pack-effort") })),
			want: (*string)(nil), src: "provider_default"},

		// modes
		{name: "modes/task: the requested list, in the requested order",
			ref: casts("architect"), in: inputs(taskModes("premortem", "systematic")),
			want: []string{"premortem", "systematic"}, src: "task"},
		{name: "modes/task: an explicit empty list means no Modes, not the pack defaults",
			ref: casts("architect"), in: inputs(taskModes()), want: []string{}, src: "task"},
		{name: "modes/pack: absent task Modes use the pack's default_modes",
			ref: casts("architect"), in: inputs(), want: []string{"systematic", "premortem"}, src: "pack"},
		{name: "modes/none: no task Modes and no pack defaults",
			ref: casts("reviewer"), in: inputs(), want: []string{}, src: "none"},
		{name: "modes/none: an empty default_modes list is no defaults",
			ref: casts("reviewer"), in: inputs(withEntry("reviewer", func(e *resolve.PackEntry) { e.DefaultModes = []string{} })),
			want: []string{}, src: "none"},
		{name: "modes/none: a replacement has no Modes",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter"))), want: []string{}, src: "none"},
		{name: "modes/none: a replacement accepts an explicit empty list",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter")), taskModes()), want: []string{}, src: "none"},

		// tools
		{name: "tools/task: the task list replaces the runtime list",
			ref: casts("architect"), in: inputs(withTask(func(t *resolve.TaskOverrides) { t.Tools = []string{"edit"} })),
			want: []string{"edit"}, src: "task"},
		{name: "tools/task: an explicit empty list means no tools",
			ref: casts("architect"), in: inputs(withTask(func(t *resolve.TaskOverrides) { t.Tools = []string{} })),
			want: []string{}, src: "task"},
		{name: "tools/runtime_default: absent task tools use the runtime list",
			ref: casts("architect"), in: inputs(), want: []string{"read", "grep"}, src: "runtime_default"},
		{name: "tools/runtime_default: no runtime tools is the empty list",
			ref: casts("architect"), in: inputs(withDefaults(func(d *resolve.RuntimeDefaults) { d.Tools = nil })),
			want: []string{}, src: "runtime_default"},

		// permissions
		{name: "permissions/task: the task policy beats the runtime policy",
			ref: casts("architect"),
			in: inputs(withTask(func(t *resolve.TaskOverrides) { t.Permissions = policy("task-tool") }),
				withDefaults(func(d *resolve.RuntimeDefaults) { d.Permissions = policy("runtime-tool") })),
			want: policy("task-tool"), src: "task"},
		{name: "permissions/runtime_default: absent task policy uses the runtime policy",
			ref: casts("architect"), in: inputs(withDefaults(func(d *resolve.RuntimeDefaults) { d.Permissions = policy("runtime-tool") })),
			want: policy("runtime-tool"), src: "runtime_default"},
		{name: "permissions/none: no policy at any level",
			ref: casts("architect"), in: inputs(), want: (*resolve.PermissionPolicy)(nil), src: "none"},

		// lion_system
		{name: "lion_system/task: an explicit task false beats an explicit profile true",
			ref: casts("architect"),
			in: inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.LionSystem = ptr(true) })),
				withTask(func(t *resolve.TaskOverrides) { t.LionSystem = ptr(false) })),
			want: false, src: "task"},
		{name: "lion_system/external_profile: an explicit profile false beats runtime true",
			ref:  casts("architect"),
			in:   inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.LionSystem = ptr(false) }))),
			want: false, src: "external_profile"},
		{name: "lion_system/external_profile: a replacement's explicit false beats runtime true",
			ref:  external("ghostwriter"),
			in:   inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.LionSystem = ptr(false) }))),
			want: false, src: "external_profile"},
		{name: "lion_system/runtime_default: no explicit value keeps runtime true",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect"))), want: true, src: "runtime_default"},
		{name: "lion_system/runtime_default: runtime false",
			ref: casts("architect"), in: inputs(withDefaults(func(d *resolve.RuntimeDefaults) { d.LionSystem = false })),
			want: false, src: "runtime_default"},

		// prompt
		{name: "prompt/casts: a built-in Role without profile",
			ref: casts("architect"), in: inputs(), want: resolve.PromptCasts, src: "casts"},
		{name: "prompt/external_overlay: an overlay decorates its base Role",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect"))), want: resolve.PromptOverlay, src: "external_overlay"},
		{name: "prompt/external_replacement: a replacement profile",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter"))), want: resolve.PromptReplacement, src: "external_replacement"},
		{name: "prompt/external_replacement: a legacy profile is treated as a replacement",
			ref: external("ghostwriter"), in: inputs(withProfile(legacy("ghostwriter"))), want: resolve.PromptReplacement, src: "external_replacement"},

		// artifact_defaults
		{name: "artifact_defaults/external_profile: the profile's whole mapping, not merged with the Role's",
			ref:  casts("architect"),
			in:   inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.ArtifactDefaults = map[string]any{"format": "html"} }))),
			want: map[string]any{"format": "html"}, src: "external_profile"},
		{name: "artifact_defaults/external_profile: an empty profile mapping still replaces the Role's",
			ref:  casts("architect"),
			in:   inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.ArtifactDefaults = map[string]any{} }))),
			want: map[string]any{}, src: "external_profile"},
		{name: "artifact_defaults/external_profile: a replacement's mapping",
			ref:  external("ghostwriter"),
			in:   inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.ArtifactDefaults = map[string]any{"n": 1} }))),
			want: map[string]any{"n": 1}, src: "external_profile"},
		{name: "artifact_defaults/role: the Role's declaration when the profile has none",
			ref:  casts("architect"),
			in:   inputs(withProfile(overlay("tuned", "architect"))),
			want: map[string]any{"format": "markdown", "sections": []any{"context", "decision"}}, src: "role"},
		{name: "artifact_defaults/none: a Role without declaration",
			ref: casts("reviewer"), in: inputs(), want: map[string]any(nil), src: "none"},
		{name: "artifact_defaults/none: a replacement never inherits a same-named Role's mapping",
			ref: external("architect"), in: inputs(withProfile(replacement("architect"))), want: map[string]any(nil), src: "none"},

		// timeout, resume_on_timeout
		{name: "timeout/external_profile: the profile's timeout and resume flag",
			ref: casts("architect"),
			in: inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) {
				p.Timeout, p.ResumeOnTimeout = ptr(600), true
			}))),
			want: deadline{ptr(600), true}, src: "external_profile"},
		{name: "timeout/external_profile: a replacement's timeout without resume",
			ref:  external("ghostwriter"),
			in:   inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.Timeout = ptr(30) }))),
			want: deadline{ptr(30), false}, src: "external_profile"},
		{name: "timeout/none: no profile means no deadline and no resume",
			ref: casts("architect"), in: inputs(), want: deadline{}, src: "none"},
		{name: "timeout/none: a profile without timeout",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect"))), want: deadline{}, src: "none"},

		// active
		{name: "active/pack: a casts identity's entry is active by default",
			ref: casts("architect"), in: inputs(), want: true, src: "pack"},
		{name: "active/pack: an explicit active: true",
			ref: casts("architect"), in: inputs(withEntry("architect", func(e *resolve.PackEntry) { e.Active = ptr(true) })), want: true, src: "pack"},
		{name: "active/pack: an overlay keeps the pack entry as the source",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect"))), want: true, src: "pack"},
		{name: "active/external_profile: a replacement is active through enabled",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.Enabled = ptr(true) }))),
			want: true, src: "external_profile"},

		// pack
		{name: "pack/worker_default: the worker chose the pack",
			ref: casts("architect"), in: inputs(), want: "team", src: "worker_default"},
		{name: "pack/task: the task named the pack",
			ref: casts("architect"), in: inputs(func(in *resolve.Inputs) { in.PackSelection = resolve.PackFromTask }), want: "team", src: "task"},
		{name: "pack/task: a replacement still records the selected pack",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter")), func(in *resolve.Inputs) { in.PackSelection = resolve.PackFromTask }),
			want: "team", src: "task"},
	}
	return append(cs, flagCases()...)
}

// flagCases gives yolo, bypass and fast_mode the same rows: explicit task
// value → external profile when true → runtime default.
func flagCases() []precedenceCase {
	type flagField struct {
		name    string
		task    func(*resolve.TaskOverrides) **bool
		profile func(*resolve.ExternalProfile) **bool
		runtime func(*resolve.RuntimeDefaults) *bool
	}
	flags := []flagField{
		{"yolo", func(t *resolve.TaskOverrides) **bool { return &t.Yolo }, func(p *resolve.ExternalProfile) **bool { return &p.Yolo }, func(d *resolve.RuntimeDefaults) *bool { return &d.Yolo }},
		{"bypass", func(t *resolve.TaskOverrides) **bool { return &t.Bypass }, func(p *resolve.ExternalProfile) **bool { return &p.Bypass }, func(d *resolve.RuntimeDefaults) *bool { return &d.Bypass }},
		{"fast_mode", func(t *resolve.TaskOverrides) **bool { return &t.FastMode }, func(p *resolve.ExternalProfile) **bool { return &p.FastMode }, func(d *resolve.RuntimeDefaults) *bool { return &d.FastMode }},
	}
	var cs []precedenceCase
	for _, f := range flags {
		prof := func(v *bool) func(*resolve.Inputs) {
			return withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { *f.profile(p) = v }))
		}
		task := func(v bool) func(*resolve.Inputs) {
			return withTask(func(t *resolve.TaskOverrides) { *f.task(t) = ptr(v) })
		}
		runtime := func(v bool) func(*resolve.Inputs) {
			return withDefaults(func(d *resolve.RuntimeDefaults) { *f.runtime(d) = v })
		}
		cs = append(cs,
			precedenceCase{name: f.name + "/task: an explicit task false beats profile true and runtime true",
				ref: casts("architect"), in: inputs(prof(ptr(true)), runtime(true), task(false)), want: false, src: "task"},
			precedenceCase{name: f.name + "/task: an explicit task true beats runtime false",
				ref: casts("architect"), in: inputs(task(true)), want: true, src: "task"},
			precedenceCase{name: f.name + "/external_profile: a profile true beats runtime false",
				ref: casts("architect"), in: inputs(prof(ptr(true))), want: true, src: "external_profile"},
			precedenceCase{name: f.name + "/external_profile: a replacement's true beats runtime false",
				ref:  external("ghostwriter"),
				in:   inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { *f.profile(p) = ptr(true) }))),
				want: true, src: "external_profile"},
			precedenceCase{name: f.name + "/runtime_default: a profile false does not beat runtime true",
				ref: casts("architect"), in: inputs(prof(ptr(false)), runtime(true)), want: true, src: "runtime_default"},
			precedenceCase{name: f.name + "/runtime_default: no task or profile value",
				ref: casts("architect"), in: inputs(prof(nil)), want: false, src: "runtime_default"},
		)
	}
	return cs
}

func TestPrecedence(t *testing.T) {
	for _, tc := range precedenceCases() {
		t.Run(tc.name, func(t *testing.T) {
			field, rest, _ := strings.Cut(tc.name, "/")
			claimed, _, _ := strings.Cut(rest, ":")
			get, ok := fieldOf[field]
			if !ok {
				t.Fatalf("case name starts with unknown field %q", field)
			}
			got := mustResolve(t, tc.ref, tc.in)
			checkAdapter(t, got)
			val, src := get(got)
			if diff := cmp.Diff(tc.want, val); diff != "" {
				t.Errorf("%s value (-want +got):\n%s", field, diff)
			}
			if src != tc.src {
				t.Errorf("sources.%s = %q, want %q", field, src, tc.src)
			}
			if field == "identity" {
				claimed = claimed + ":" + got.Identity.Name
			}
			if claimed != tc.src {
				t.Errorf("case is named for source %q but expects %q", claimed, tc.src)
			}
		})
	}
}

// TestPrecedenceCoversDesign checks that the table above has at least one
// case for every source value of every row of docs/CONFIG.md.
func TestPrecedenceCoversDesign(t *testing.T) {
	flag := []string{"task", "external_profile", "runtime_default"}
	design := map[string][]string{
		"identity":          {"casts", "external"},
		"model":             {"task", "external_profile", "pack", "runtime_default"},
		"effort":            {"task", "external_profile", "pack", "runtime_default", "provider_default"},
		"modes":             {"task", "pack", "none"},
		"tools":             {"task", "runtime_default"},
		"permissions":       {"task", "runtime_default", "none"},
		"yolo":              flag,
		"bypass":            flag,
		"fast_mode":         flag,
		"lion_system":       flag,
		"prompt":            {"casts", "external_overlay", "external_replacement"},
		"artifact_defaults": {"external_profile", "role", "none"},
		"timeout":           {"external_profile", "none"},
		"active":            {"pack", "external_profile"},
		"pack":              {"task", "worker_default"},
	}
	seen := map[string]bool{}
	for _, tc := range precedenceCases() {
		field, _, _ := strings.Cut(tc.name, "/")
		src, _, _ := strings.Cut(tc.src, ":") // identity sources are "casts:<role>"
		seen[field+"/"+src] = true
	}
	for field, srcs := range design {
		for _, src := range srcs {
			if !seen[field+"/"+src] {
				t.Errorf("no precedence case for %s/%s", field, src)
			}
		}
	}
	if len(design) != len(fieldOf) {
		t.Errorf("design rows %d, field readers %d", len(design), len(fieldOf))
	}
}

// TestAbsentVersusEmpty puts the absent/empty/explicit-false pairs of
// docs/CONFIG.md side by side on one fixture.
func TestAbsentVersusEmpty(t *testing.T) {
	tuned := func(mods ...func(*resolve.ExternalProfile)) func(*resolve.Inputs) {
		return withProfile(overlay("tuned", "architect", mods...))
	}
	cases := []struct {
		name  string
		in    resolve.Inputs
		field string
		want  any
		src   string
	}{
		{"modes absent (nil) restores the pack defaults", inputs(), "modes", []string{"systematic", "premortem"}, "pack"},
		{"modes empty ([]) is no Modes", inputs(taskModes()), "modes", []string{}, "task"},
		{"modes non-empty is exactly that list", inputs(taskModes("adversarial")), "modes", []string{"adversarial"}, "task"},
		{"tools absent (nil) uses the runtime list", inputs(), "tools", []string{"read", "grep"}, "runtime_default"},
		{"tools empty ([]) is no tools", inputs(withTask(func(t *resolve.TaskOverrides) { t.Tools = []string{} })), "tools", []string{}, "task"},
		{"task yolo false beats profile yolo true",
			inputs(tuned(func(p *resolve.ExternalProfile) { p.Yolo = ptr(true) }), withTask(func(t *resolve.TaskOverrides) { t.Yolo = ptr(false) })),
			"yolo", false, "task"},
		{"profile yolo false does NOT beat runtime yolo true",
			inputs(tuned(func(p *resolve.ExternalProfile) { p.Yolo = ptr(false) }), withDefaults(func(d *resolve.RuntimeDefaults) { d.Yolo = true })),
			"yolo", true, "runtime_default"},
		{"profile lion_system false DOES beat runtime lion_system true",
			inputs(tuned(func(p *resolve.ExternalProfile) { p.LionSystem = ptr(false) })),
			"lion_system", false, "external_profile"},
		{"profile lion_system absent keeps runtime true", inputs(tuned()), "lion_system", true, "runtime_default"},
		{"profile artifact_defaults absent (nil) falls to the Role", inputs(tuned()), "artifact_defaults",
			map[string]any{"format": "markdown", "sections": []any{"context", "decision"}}, "role"},
		{"profile artifact_defaults empty ({}) replaces the Role's",
			inputs(tuned(func(p *resolve.ExternalProfile) { p.ArtifactDefaults = map[string]any{} })), "artifact_defaults", map[string]any{}, "external_profile"},
		{"permission rule maps keep nil versus empty, and nil versus empty pattern lists",
			inputs(withTask(func(t *resolve.TaskOverrides) {
				t.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionRules,
					Allow: nil, Deny: map[string][]string{}, Escalate: map[string][]string{"bash": nil, "edit": {}}}
			})),
			"permissions", &resolve.PermissionPolicy{Mode: resolve.PermissionRules,
				Allow: nil, Deny: map[string][]string{}, Escalate: map[string][]string{"bash": nil, "edit": {}}}, "task"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustResolve(t, casts("architect"), tc.in)
			checkAdapter(t, got)
			val, src := fieldOf[tc.field](got)
			if diff := cmp.Diff(tc.want, val); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.field, diff)
			}
			if src != tc.src {
				t.Errorf("sources.%s = %q, want %q", tc.field, src, tc.src)
			}
		})
	}
}

// TestEmissionGrant: casts and overlays carry the Role's emission contract;
// a replacement never does, even when its name equals a Role.
func TestEmissionGrant(t *testing.T) {
	cases := []struct {
		name  string
		ref   resolve.RoleRef
		in    resolve.Inputs
		grant bool
		emits []string
	}{
		{"casts grants the Role's emits in order", casts("architect"), inputs(), true, []string{"design_doc", "adr"}},
		{"overlay keeps the Role's emits", casts("architect"), inputs(withProfile(overlay("tuned", "architect"))), true, []string{"design_doc", "adr"}},
		{"a Role without emits grants an empty list", casts("scout"), inputs(), true, []string{}},
		{"a replacement named like a Role gets no emits", external("architect"), inputs(withProfile(replacement("architect"))), false, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustResolve(t, tc.ref, tc.in)
			checkAdapter(t, got)
			if got.GrantRoleEmission != tc.grant {
				t.Errorf("grant_role_emissions = %v, want %v", got.GrantRoleEmission, tc.grant)
			}
			if diff := cmp.Diff(tc.emits, got.Emits); diff != "" {
				t.Errorf("emits (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPackRef: the result names the exact selected pack and its digest.
func TestPackRef(t *testing.T) {
	in := inputs()
	got := mustResolve(t, casts("architect"), in)
	want := resolve.PackRef{Name: "team", Digest: resolve.PackDigest(in.Pack), Variants: []int{}}
	if diff := cmp.Diff(want, got.Pack); diff != "" {
		t.Errorf("pack (-want +got):\n%s", diff)
	}
	sealed := in.Pack.Seal()
	in.Pack = &sealed
	if got := mustResolve(t, casts("architect"), in); !cmp.Equal(got.Pack, want) {
		t.Errorf("sealed pack ref = %+v, want %+v", got.Pack, want)
	}
}
