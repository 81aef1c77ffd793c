package discover_test

import (
	"os"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// The "full" root (testdata/roots/full) has:
//
//	packs/team.yaml (default_pack: team) and the embedded "default"
//	agents/arch-notes.md              overlay, base_role architect
//	agents/review-tone/review-tone.md overlay, base_role reviewer (bound: overlays: {reviewer: review-tone})
//	agents/scribe.md                  replacement
//	agents/architect.md               replacement sharing the name of a built-in Role
//	agents/old-bot.md                 legacy (no disposition)
//	extra/helper.md                   replacement, disabled (profile root "extra")
func TestInputsSelectsProfiles(t *testing.T) {
	s := mustLoad(t, copyRoot(t, "full"))
	cases := []struct {
		name    string
		req     discover.Request
		profile string // the supplied profile; "" = none
		pack    string
		sel     resolve.PackSelection
		// what the resolver then makes of it
		resolveCode resolve.Code // "" = resolves
		prompt      resolve.PromptDisposition
	}{
		{
			name: "bare role gets no profile, even with a same-named file",
			req:  discover.Request{Ref: resolve.RoleName("architect")},
			pack: "team", sel: resolve.PackFromWorkerDefault, prompt: resolve.PromptCasts,
		},
		{
			name:    "task profile is an overlay for the task's role",
			req:     discover.Request{Ref: resolve.RoleName("architect"), Profile: ptr("arch-notes")},
			profile: "arch-notes", pack: "team", sel: resolve.PackFromWorkerDefault, prompt: resolve.PromptOverlay,
		},
		{
			name:    "overlays binding applies to a bare role",
			req:     discover.Request{Ref: resolve.RoleName("reviewer")},
			profile: "review-tone", pack: "team", sel: resolve.PackFromWorkerDefault, prompt: resolve.PromptOverlay,
		},
		{
			name:    "task profile wins over the binding",
			req:     discover.Request{Ref: resolve.RoleName("reviewer"), Profile: ptr("arch-notes")},
			profile: "arch-notes", pack: "team", sel: resolve.PackFromWorkerDefault, resolveCode: resolve.CodeOverlayRoleMismatch,
		},
		{
			name:    "external ref selects the replacement with its name",
			req:     discover.Request{Ref: resolve.ExternalRef{Name: "scribe"}},
			profile: "scribe", pack: "team", sel: resolve.PackFromWorkerDefault, prompt: resolve.PromptReplacement,
		},
		{
			name:    "a replacement named like a role is selected only explicitly",
			req:     discover.Request{Ref: resolve.ExternalRef{Name: "architect"}},
			profile: "architect", pack: "team", sel: resolve.PackFromWorkerDefault, prompt: resolve.PromptReplacement,
		},
		{
			name:    "task profile with an external ref supplies that profile; the resolver sees the mismatch",
			req:     discover.Request{Ref: resolve.ExternalRef{Name: "scribe"}, Profile: ptr("architect")},
			profile: "architect", pack: "team", sel: resolve.PackFromWorkerDefault, resolveCode: resolve.CodeExternalProfileNameMismatch,
		},
		{
			name: "task pack is a task selection",
			req:  discover.Request{Ref: resolve.RoleName("designer"), Pack: ptr("default")},
			pack: "default", sel: resolve.PackFromTask, prompt: resolve.PromptCasts,
		},
		{
			name:    "disabled replacement reaches the resolver",
			req:     discover.Request{Ref: resolve.ExternalRef{Name: "helper"}},
			profile: "helper", pack: "team", sel: resolve.PackFromWorkerDefault, resolveCode: resolve.CodeExternalProfileInactive,
		},
		{
			name:    "legacy profile resolves as a replacement",
			req:     discover.Request{Ref: resolve.ExternalRef{Name: "old-bot"}},
			profile: "old-bot", pack: "team", sel: resolve.PackFromWorkerDefault, prompt: resolve.PromptReplacement,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, err := s.Inputs(tc.req)
			if err != nil {
				t.Fatalf("Inputs: %v", err)
			}
			switch {
			case tc.profile == "" && in.Profile != nil:
				t.Errorf("profile %q supplied, want none", in.Profile.Name)
			case tc.profile != "" && (in.Profile == nil || in.Profile.Name != tc.profile):
				t.Errorf("profile = %v, want %q", in.Profile, tc.profile)
			case tc.profile != "" && in.Profile != &s.Profiles[tc.profile].ExternalProfile:
				t.Error("the profile is a copy, not the snapshot's own value")
			}
			if in.Pack != s.Packs[tc.pack].Pack || in.PackSelection != tc.sel {
				t.Errorf("pack = %s (%s), want %s (%s)", in.Pack.Name, in.PackSelection, tc.pack, tc.sel)
			}
			if in.Catalog != s.Catalog || in.Policy != s.Policy || in.Defaults.Model != s.Defaults.Model {
				t.Error("catalog, policy or defaults are not the snapshot's")
			}
			spec, err := resolve.Resolve(tc.req.Ref, in)
			if tc.resolveCode != "" {
				if re := asResolution(t, err); re.Code != tc.resolveCode {
					t.Errorf("resolve code = %s, want %s", re.Code, tc.resolveCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if spec.PromptDisposition != tc.prompt {
				t.Errorf("prompt disposition = %s, want %s", spec.PromptDisposition, tc.prompt)
			}
		})
	}
}

func TestInputsMissingNamedProfile(t *testing.T) {
	dir := copyRoot(t, "full")
	writeFile(t, dir, "rolecall.yaml", "overlays:\n  architect: ghost\n")
	s := mustLoad(t, dir)
	for _, tc := range []struct {
		name string
		req  discover.Request
		want string
	}{
		{"task profile", discover.Request{Ref: resolve.RoleName("reviewer"), Profile: ptr("ghost")}, "ghost"},
		{"external ref", discover.Request{Ref: resolve.ExternalRef{Name: "phantom"}}, "phantom"},
		{"overlays binding", discover.Request{Ref: resolve.RoleName("architect")}, "ghost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Inputs(tc.req)
			re := asResolution(t, err)
			if re.Code != resolve.CodeExternalProfileMissing || re.Subject != tc.want || re.Details == nil || len(re.Details) != 0 {
				t.Errorf("got %s subject %q details %v; want external_profile_missing for %q with {}", re.Code, re.Subject, re.Details, tc.want)
			}
		})
	}
}

func TestInputsPackNotFound(t *testing.T) {
	s := mustLoad(t, copyRoot(t, "full"))
	_, err := s.Inputs(discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr("ghost")})
	de := asError(t, err)
	if de.Code != resolve.CodePackNotFound || de.Key != "pack" || de.Subject != "ghost" || !strings.HasPrefix(de.Error(), "packs/ghost.yaml: pack_not_found: ") {
		t.Errorf("got %+v", de)
	}

	// A default_pack that names no pack is reported where it was set.
	s = mustLoad(t, copyRoot(t, "default-pack-missing"))
	_, err = s.Inputs(discover.Request{Ref: resolve.RoleName("architect")})
	de = asError(t, err)
	if de.Code != resolve.CodePackNotFound || de.Key != "default_pack" || !strings.HasPrefix(de.Error(), "rolecall.yaml:1: pack_not_found: ") {
		t.Errorf("got %v (key %q, want the key of rolecall.yaml that names the pack, default_pack)", de, de.Key)
	}
}

// Bad names are task_invalid before any lookup: the root is deleted first,
// so any file access would show.
func TestInputsRejectsBadNamesWithoutFileAccess(t *testing.T) {
	dir := copyRoot(t, "full")
	s := mustLoad(t, dir)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	bad := []string{"..", "../default", "a/b", `a\b`, "Default", "", "x\x00y", "p%2e%2e", strings.Repeat("a", 65), "ünï"}
	for _, name := range bad {
		for _, tc := range []struct {
			field string
			req   discover.Request
		}{
			{"pack", discover.Request{Ref: resolve.RoleName("architect"), Pack: ptr(name)}},
			{"profile", discover.Request{Ref: resolve.RoleName("architect"), Profile: ptr(name)}},
			{"role", discover.Request{Ref: resolve.RoleName(name)}},
			{"role", discover.Request{Ref: resolve.ExternalRef{Name: name}}},
		} {
			_, err := s.Inputs(tc.req)
			re := asResolution(t, err)
			if re.Code != resolve.CodeTaskInvalid || re.Subject != tc.field {
				t.Errorf("%s %q: got %s subject %q, want task_invalid for %s", tc.field, name, re.Code, re.Subject, tc.field)
			}
		}
	}
	if _, err := s.Inputs(discover.Request{}); asResolution(t, err).Code != resolve.CodeTaskInvalid {
		t.Errorf("nil ref: %v", err)
	}
	// The snapshot still serves good names with the files gone.
	if _, err := s.Inputs(discover.Request{Ref: resolve.RoleName("architect")}); err != nil {
		t.Errorf("good request after the root was removed: %v", err)
	}
}

func TestRoster(t *testing.T) {
	s := mustLoad(t, copyRoot(t, "full"))
	cases := []struct {
		pack string
		want string
		code resolve.Code
	}{
		// team: operator is inactive; helper is disabled; arch-notes and
		// review-tone are overlays; old-bot is legacy (allowed).
		{pack: "", want: "architect implementer reviewer external:architect external:old-bot external:scribe"},
		{pack: "team", want: "architect implementer reviewer external:architect external:old-bot external:scribe"},
		{pack: "default", want: "analyst architect critic designer documenter implementer operator planner researcher reviewer security-auditor tester external:architect external:old-bot external:scribe"},
		{pack: "ghost", code: resolve.CodePackNotFound},
		{pack: "../team", code: resolve.CodeTaskInvalid},
	}
	for _, tc := range cases {
		got, err := s.Roster(tc.pack)
		switch {
		case tc.code == resolve.CodePackNotFound:
			if asError(t, err).Code != tc.code {
				t.Errorf("Roster(%q): %v, want %s", tc.pack, err, tc.code)
			}
		case tc.code != "":
			if asResolution(t, err).Code != tc.code {
				t.Errorf("Roster(%q): %v, want %s", tc.pack, err, tc.code)
			}
		case err != nil:
			t.Errorf("Roster(%q): %v", tc.pack, err)
		case strings.Join(got, " ") != tc.want:
			t.Errorf("Roster(%q) =\n %s\nwant\n %s", tc.pack, strings.Join(got, " "), tc.want)
		}
	}

	// With legacy profiles rejected, the legacy one leaves the roster.
	dir := copyRoot(t, "full")
	writeFile(t, dir, "rolecall.yaml", "legacy_profiles: reject\n")
	s = mustLoad(t, dir)
	got, _ := s.Roster("")
	if strings.Contains(strings.Join(got, " "), "old-bot") {
		t.Errorf("roster with legacy rejected = %v", got)
	}
	if len(s.Warnings) != 1 || s.Warnings[0].Code != resolve.CodeProfileDispositionRequired {
		t.Errorf("warnings with legacy rejected = %v", s.Warnings)
	}
}
