package discover_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// loadErrorCase is one config root that Load must refuse: the code, where
// (the "file:line" or "file" that starts the error text) and a fragment of
// the message (usually the key).
type loadErrorCase struct {
	name  string
	root  string                         // testdata/roots/<root>; "" = empty root
	setup func(t *testing.T, dir string) // runtime changes (symlinks, big files…)
	code  resolve.Code
	where string
	msg   string
}

func TestLoadRefuses(t *testing.T) {
	big := strings.Repeat("x", discover.MaxFileSize)
	cases := []loadErrorCase{
		// pack_invalid
		{name: "pack unknown key", root: "pack-unknown-key", code: resolve.CodePackInvalid, where: "packs/team.yaml:4", msg: `key "roles.architect.colour": unknown key`},
		{name: "pack duplicate key", root: "pack-duplicate-key", code: resolve.CodePackInvalid, where: "packs/team.yaml:4", msg: `key "roles.architect.model": duplicate key (first at line 3)`},
		{name: "pack active is a string", root: "pack-active-string", code: resolve.CodePackInvalid, where: "packs/team.yaml:3", msg: `key "roles.architect.active": must be true or false, got string "yes"`},
		{name: "pack name differs from stem", root: "pack-name-mismatch", code: resolve.CodePackInvalid, where: "packs/team.yaml:1", msg: `key "name": is "other" but the file is named "team"`},
		{name: "pack alias bomb", root: "pack-alias-bomb", code: resolve.CodePackInvalid, where: "packs/team.yaml:1", msg: "YAML anchors (&a) are not allowed"},
		{name: "pack with two documents", root: "pack-multi-doc", code: resolve.CodePackInvalid, where: "packs/team.yaml:2", msg: "a second YAML document"},
		{name: "pack role name invalid", root: "pack-bad-role-name", code: resolve.CodePackInvalid, where: "packs/team.yaml:2", msg: `key "roles.Architect": invalid role name`},
		{name: "pack file name invalid", root: "pack-bad-file-name", code: resolve.CodePackInvalid, where: "packs/Team.yaml:1", msg: "not a valid pack name"},
		{name: "pack entry null", root: "pack-entry-null", code: resolve.CodePackInvalid, where: "packs/team.yaml:2", msg: "write {} for an entry with no settings"},
		{name: "pack default_modes not a list", root: "pack-modes-not-list", code: resolve.CodePackInvalid, where: "packs/team.yaml:3", msg: `key "roles.architect.default_modes": must be a list`},
		{name: "pack custom tag", root: "pack-custom-tag", code: resolve.CodePackInvalid, where: "packs/team.yaml:3", msg: `YAML tag "!secret" is not allowed`},
		{name: "pack model is a number", root: "pack-model-number", code: resolve.CodePackInvalid, where: "packs/team.yaml:3", msg: `key "roles.architect.model": must be a string, got number "4.5"`},
		{name: "pack YAML syntax", root: "pack-syntax", code: resolve.CodePackInvalid, where: "packs/team.yaml:3", msg: "invalid YAML"},
		{name: "pack over 1 MiB", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "packs/big.yaml", "x-pad: "+big+"\n")
		}, code: resolve.CodePackInvalid, where: "packs/big.yaml", msg: "1 MiB"},
		{name: "pack is a directory", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "packs/dir.yaml/inner", "")
		}, code: resolve.CodePackInvalid, where: "packs/dir.yaml", msg: "not a regular file"},

		// profile_invalid
		{name: "profile unknown key", root: "profile-unknown-key", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "colour": unknown key`},
		{name: "profile duplicate key", root: "profile-duplicate-key", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "disposition": duplicate key (first at line 2)`},
		{name: "timeout: true", root: "profile-timeout-bool", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "timeout": must be a positive integer, got boolean "true"`},
		{name: `timeout: "5"`, root: "profile-timeout-string", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "timeout": must be a positive integer, got string "5"`},
		{name: "timeout: 0", root: "profile-timeout-zero", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "timeout": must be a positive integer, got 0`},
		{name: "timeout: -1", root: "profile-timeout-negative", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "timeout": must be a positive integer, got -1`},
		{name: "timeout: 1.5", root: "profile-timeout-float", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "timeout": must be a positive integer, got number "1.5"`},
		{name: "enabled: yes", root: "profile-enabled-yes", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "enabled": must be true or false, got string "yes"`},
		{name: `model: ""`, root: "profile-model-empty", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "model": must not be empty`},
		{name: "profile name differs from stem", root: "profile-name-mismatch", code: resolve.CodeProfileInvalid, where: "agents/bot.md:2", msg: `key "name": is "robot" but the file is named "bot"`},
		{name: "frontmatter never closed", root: "profile-no-closing", code: resolve.CodeProfileInvalid, where: "agents/bot.md:1", msg: "never closed"},
		{name: "no frontmatter", root: "profile-no-frontmatter", code: resolve.CodeProfileInvalid, where: "agents/bot.md:1", msg: "missing frontmatter"},
		{name: "profile alias", root: "profile-alias", code: resolve.CodeProfileInvalid, where: "agents/bot.md:2", msg: "YAML anchors (&m) are not allowed"},
		{name: "unknown disposition", root: "profile-bad-disposition", code: resolve.CodeProfileInvalid, where: "agents/bot.md:2", msg: `must be overlay or replacement, got "overlay-ish"`},
		{name: "artifact_defaults is a list", root: "profile-artifact-list", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "artifact_defaults": must be a mapping, got a list`},
		{name: "base_role is a path", root: "profile-base-role-path", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: `key "base_role": invalid name`},
		{name: "profile file name invalid", root: "profile-bad-file-name", code: resolve.CodeProfileInvalid, where: "agents/Bot.md:1", msg: "not a valid profile name"},
		{name: "frontmatter with two documents", root: "profile-multi-doc", code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: "invalid YAML"},
		{name: "NaN in artifact_defaults", root: "profile-nan-artifact", code: resolve.CodeProfileInvalid, where: "agents/bot.md:4", msg: `key "artifact_defaults.ratio": non-finite number`},
		{name: "duplicate nested key", root: "profile-dup-nested-key", code: resolve.CodeProfileInvalid, where: "agents/bot.md:5", msg: `key "artifact_defaults.format": duplicate key`},
		{name: "profile over 1 MiB", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "agents/big.md", "---\ndisposition: replacement\n---\n"+big)
		}, code: resolve.CodeProfileInvalid, where: "agents/big.md", msg: "1 MiB"},
		{name: "profile not UTF-8", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "agents/bot.md", "---\ndisposition: replacement\n---\nline four \xff\n")
		}, code: resolve.CodeProfileInvalid, where: "agents/bot.md:4", msg: "not valid UTF-8"},
		{name: "profile with a NUL byte", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "agents/bot.md", "---\ndisposition: replacement\nmodel: a\x00b\n---\n")
		}, code: resolve.CodeProfileInvalid, where: "agents/bot.md:3", msg: "control character U+0000"},
		{name: "symlink loop", setup: func(t *testing.T, dir string) {
			symlink(t, "loop.md", dir, "agents/loop.md")
		}, code: resolve.CodeProfileInvalid, where: "agents/loop.md", msg: "symbolic links"},

		// profile_duplicate
		{name: "duplicate across layouts", root: "profile-dup-layouts", code: resolve.CodeProfileDuplicate, where: "agents/bot.md:1", msg: `profile "bot" is defined twice: agents/bot/bot.md and agents/bot.md`},
		{name: "duplicate across roots", root: "profile-dup-roots", code: resolve.CodeProfileDuplicate, where: "team/profiles/bot/bot.md:1", msg: `profile "bot" is defined twice: agents/bot.md and team/profiles/bot/bot.md`},

		// catalog_invalid
		{name: "catalog unknown key", root: "catalog-unknown-key", code: resolve.CodeCatalogInvalid, where: "catalog/roles/lead.md:3", msg: `key "colour": unknown key`},
		{name: "catalog name differs from stem", root: "catalog-name-mismatch", code: resolve.CodeCatalogInvalid, where: "catalog/modes/calm.md:2", msg: `is "quiet" but the file is named "calm"`},
		{name: "catalog name missing", root: "catalog-name-missing", code: resolve.CodeCatalogInvalid, where: "catalog/roles/lead.md:2", msg: `key "name": is required`},
		{name: "conflicts_with an unknown mode", root: "catalog-conflict-unknown", code: resolve.CodeCatalogInvalid, where: "catalog/modes/calm.md:3", msg: `names mode "hasty", which is not in the catalog`},
		{name: "emits is a string", root: "catalog-emits-string", code: resolve.CodeCatalogInvalid, where: "catalog/roles/lead.md:3", msg: `key "emits": must be a list`},

		// path_escape
		{name: "profile root with ..", root: "escape-profile-root-dotdot", code: resolve.CodePathEscape, where: "rolecall.yaml:2", msg: `key "profile_roots[0]": "../outside" leaves the config root`},
		{name: "absolute profile root", root: "escape-profile-root-abs", code: resolve.CodePathEscape, where: "rolecall.yaml:1", msg: `"/etc" leaves the config root`},
		{name: "preamble_file with ..", root: "escape-preamble", code: resolve.CodePathEscape, where: "rolecall.yaml:3", msg: `key "preamble_file": "../secret.md" leaves the config root`},
		{name: "absolute symlink out of the root", setup: func(t *testing.T, dir string) {
			outside := filepath.Join(filepath.Dir(dir), "outside.md")
			writeFile(t, filepath.Dir(dir), "outside.md", "---\ndisposition: replacement\n---\nStolen.\n")
			symlink(t, outside, dir, "agents/evil.md")
		}, code: resolve.CodePathEscape, where: "agents/evil.md", msg: "leads outside its trusted root"},
		{name: "relative symlink out of the root", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Dir(dir), "outside.yaml", "roles: {}\n")
			symlink(t, "../../outside.yaml", dir, "packs/evil.yaml")
		}, code: resolve.CodePathEscape, where: "packs/evil.yaml", msg: "leads outside its trusted root"},
		{name: "symlinked agents directory out of the root", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Dir(dir), "elsewhere/bot.md", "---\ndisposition: replacement\n---\nX.\n")
			symlink(t, "../elsewhere", dir, "agents")
		}, code: resolve.CodePathEscape, where: "agents", msg: "leads outside its trusted root"},
		{name: "profile root symlinked out of the root", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "rolecall.yaml", "profile_roots:\n  - extra\n")
			writeFile(t, filepath.Dir(dir), "elsewhere/bot.md", "---\ndisposition: replacement\n---\nX.\n")
			symlink(t, "../elsewhere", dir, "extra")
		}, code: resolve.CodePathEscape, where: "rolecall.yaml:2", msg: `key "profile_roots[0]": profile root "extra" leads outside its trusted root`},
		{name: "symlink out of a profile root stays refused inside the config root", setup: func(t *testing.T, dir string) {
			// The target is inside the config root but outside the profile
			// root, which is its own os.Root.
			writeFile(t, dir, "rolecall.yaml", "profile_roots:\n  - extra\n")
			writeFile(t, dir, "shared/bot.md", "---\ndisposition: replacement\n---\nX.\n")
			symlink(t, "../shared/bot.md", dir, "extra/bot.md")
		}, code: resolve.CodePathEscape, where: "extra/bot.md", msg: "leads outside its trusted root"},
		{name: "preamble symlinked out of the root", setup: func(t *testing.T, dir string) {
			writeFile(t, dir, "rolecall.yaml", "preamble_file: prompts/preamble.md\n")
			writeFile(t, filepath.Dir(dir), "secret.md", "secret\n")
			symlink(t, "../../secret.md", dir, "prompts/preamble.md")
		}, code: resolve.CodePathEscape, where: "rolecall.yaml:1", msg: `key "preamble_file": "prompts/preamble.md"`},
		{name: "rolecall.yaml symlinked out of the root", setup: func(t *testing.T, dir string) {
			writeFile(t, filepath.Dir(dir), "other.yaml", "default_pack: default\n")
			symlink(t, "../other.yaml", dir, "rolecall.yaml")
		}, code: resolve.CodePathEscape, where: "rolecall.yaml", msg: "leads outside its trusted root"},

		// config_invalid
		{name: "config unknown key", root: "config-unknown-key", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:2", msg: `key "colour": unknown key`},
		{name: "defaults.yolo is a string", root: "config-yolo-string", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:2", msg: `key "defaults.yolo": must be true or false`},
		{name: "legacy_profiles: maybe", root: "config-legacy-bad", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:1", msg: `key "legacy_profiles": must be allow or reject`},
		{name: "ack_wait: 30", root: "config-duration-int", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:2", msg: `key "nats.ack_wait": must be a duration string such as "30s", got integer "30"`},
		{name: "profile root missing", root: "config-profile-root-missing", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:1", msg: `key "profile_roots[0]": profile root "nowhere" does not exist`},
		{name: "preamble missing", root: "config-preamble-missing", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:1", msg: `"prompts/none.md" does not exist`},
		{name: "bad permission glob", root: "config-bad-glob", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:5", msg: `key "defaults.permissions.allow.Bash[0]": invalid glob pattern "[unclosed"`},
		{name: "permissions without mode", root: "config-permissions-no-mode", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:2", msg: `key "defaults.permissions.mode": is required`},
		{name: "config duplicate key", root: "config-duplicate-key", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:3", msg: `key "defaults": duplicate key (first at line 1)`},
		{name: "defaults.tools not a list", root: "config-tools-not-list", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:2", msg: `key "defaults.tools": must be a list`},
		{name: "default_pack not a name", root: "config-default-pack-name", code: resolve.CodeConfigInvalid, where: "rolecall.yaml:1", msg: `key "default_pack": invalid name`},
		{name: "root does not exist", setup: func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, code: resolve.CodeConfigInvalid, where: "<root>", msg: "cannot open the config root"},
	}
	cases = append(cases, platformLoadCases()...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyRoot(t, tc.root)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			snap, err := discover.Load(dir, discover.Options{})
			if file, ok := strings.CutPrefix(tc.where, "packs/"); ok {
				err = brokenPack(t, snap, err, strings.TrimSuffix(strings.Split(file, ":")[0], ".yaml"))
			}
			if err == nil {
				t.Fatal("Load succeeded; want an error")
			}
			de := asError(t, err)
			if de.Code != tc.code {
				t.Errorf("code = %s, want %s (%v)", de.Code, tc.code, err)
			}
			if !strings.HasPrefix(err.Error(), tc.where+": ") {
				t.Errorf("error %q does not start with %q", err, tc.where+": ")
			}
			if !strings.Contains(de.Message, tc.msg) {
				t.Errorf("message %q does not contain %q", de.Message, tc.msg)
			}
			if de.Code.Stage() != resolve.StageDiscover {
				t.Errorf("stage of %s = %s, want discover", de.Code, de.Code.Stage())
			}
		})
	}
}

// brokenPack checks that a broken pack did not stop the load: it is kept
// as its error, which a task selecting it gets, and the other packs still
// serve. It returns that error.
func brokenPack(t *testing.T, snap *discover.Snapshot, loadErr error, stem string) error {
	t.Helper()
	if loadErr != nil {
		t.Fatalf("a broken pack stopped the load: %v", loadErr)
	}
	perr, ok := snap.PackErrors[stem]
	if !ok {
		t.Fatalf("PackErrors lacks %q: %v", stem, snap.PackErrors)
	}
	if resolve.ValidateName("pack", stem) == nil {
		_, err := snap.Inputs(discover.Request{Ref: resolve.RoleName("architect"), Pack: &stem})
		if err != error(perr) {
			t.Errorf("a task selecting %q got %v, want the pack's error %v", stem, err, perr)
		}
	}
	if _, err := snap.Inputs(discover.Request{Ref: resolve.RoleName("architect")}); err != nil {
		t.Errorf("the default pack no longer serves: %v", err)
	}
	return perr
}

func TestDuplicateNamesBothPaths(t *testing.T) {
	for _, tc := range []struct{ root, first, second string }{
		{"profile-dup-layouts", "agents/bot/bot.md", "agents/bot.md"},
		{"profile-dup-roots", "agents/bot.md", "team/profiles/bot/bot.md"},
	} {
		_, err := discover.Load(copyRoot(t, tc.root), discover.Options{})
		de := asError(t, err)
		if len(de.Paths) != 2 || de.Paths[0] != tc.first || de.Paths[1] != tc.second {
			t.Errorf("%s: Paths = %q, want [%q %q]", tc.root, de.Paths, tc.first, tc.second)
		}
		if got := de.Details()["paths"]; len(got.([]string)) != 2 {
			t.Errorf("%s: Details paths = %v", tc.root, got)
		}
	}
}

func TestLoadFull(t *testing.T) {
	dir := copyRoot(t, "full")
	s := mustLoad(t, dir)

	if got := sortedKeys(s.Packs); strings.Join(got, " ") != "default team" {
		t.Errorf("packs = %v, want [default team]", got)
	}
	team := s.Packs["team"]
	if team.Pack.Digest == "" || team.Pack.Digest != resolve.PackDigest(&resolve.Pack{Name: team.Pack.Name, Roles: team.Pack.Roles}) {
		t.Errorf("team pack is not sealed with its own digest")
	}
	if e, ok := team.Pack.Roles["implementer"]; !ok || e.Model != nil || e.DefaultModes != nil || e.Active != nil {
		t.Errorf("implementer: {} = %+v, %v; want a present, empty entry", e, ok)
	}
	if e := team.Pack.Roles["operator"]; e.IsActive() {
		t.Error("operator: active: false was not decoded")
	}
	if e := team.Pack.Roles["reviewer"]; e.ModesAllow == nil || e.DefaultModes != nil {
		t.Errorf("reviewer: modes_allow set and default_modes absent, got %+v", e)
	}
	if got := team.KeyOrigins["roles.architect.model"]; got != (discover.Origin{File: "packs/team.yaml", Line: 5}) {
		t.Errorf("KeyOrigins[roles.architect.model] = %v, want packs/team.yaml:5", got)
	}

	// x- keys are kept, uninterpreted.
	if got := team.Extensions["x-revision"]; got != 7 {
		t.Errorf("pack x-revision = %#v, want 7", got)
	}
	if got := team.RoleExtensions["architect"]["x-ticket"]; got != "ARCH-1" {
		t.Errorf("pack role x-ticket = %#v", got)
	}
	if got := s.Profiles["arch-notes"].Extensions["x-team"]; got != "core" {
		t.Errorf("profile x-team = %#v", got)
	}
	if got := s.Config.Extensions["x-owner"]; got != "platform-team" {
		t.Errorf("config x-owner = %#v", got)
	}

	if got := strings.Join(sortedKeys(s.Profiles), " "); got != "arch-notes architect helper old-bot review-tone scribe" {
		t.Errorf("profiles = %s", got)
	}
	for name, file := range map[string]string{
		"arch-notes": "agents/arch-notes.md", "review-tone": "agents/review-tone/review-tone.md", "helper": "extra/helper.md",
	} {
		if got := s.Profiles[name].Origin.File; got != file {
			t.Errorf("%s origin = %s, want %s", name, got, file)
		}
	}
	arch := s.Profiles["arch-notes"]
	if arch.Disposition != resolve.DispositionOverlay || *arch.BaseRole != "architect" || *arch.Timeout != 600 || !arch.ResumeOnTimeout {
		t.Errorf("arch-notes decoded wrongly: %+v", arch.ExternalProfile)
	}
	if arch.Body != "Prefer boring technology.\n" {
		t.Errorf("arch-notes body = %q", arch.Body)
	}
	scribe := s.Profiles["scribe"]
	if got := scribe.ArtifactDefaults["sections"]; len(got.([]any)) != 2 {
		t.Errorf("scribe artifact_defaults.sections = %#v", got)
	}
	if scribe.LionSystem == nil || *scribe.LionSystem {
		t.Error("scribe lion_system: false was not decoded")
	}
	if h := s.Profiles["helper"]; h.IsEnabled() {
		t.Error("helper enabled: false was not decoded")
	}

	c := s.Config
	if c.DefaultPack != "team" || c.Overlays["reviewer"] != "review-tone" || len(c.ProfileRoots) != 1 || c.PreambleFile != "prompts/preamble.md" {
		t.Errorf("config = %+v", c)
	}
	if c.NATS.AckWait.String() != "30s" || len(c.NATS.Backoff) != 2 || c.NATS.DuplicateWindow.String() != "10m0s" || c.NATS.CreateStreams == nil || !*c.NATS.CreateStreams || c.NATS.MaxDeliver != 5 {
		t.Errorf("nats = %+v", c.NATS)
	}
	d := s.Defaults
	if *d.Model != "runtime-model" || *d.Effort != "low" || strings.Join(d.Tools, ",") != "read,grep" || !d.LionSystem {
		t.Errorf("defaults = %+v", d)
	}
	if d.Permissions == nil || d.Permissions.Mode != resolve.PermissionRules || d.Permissions.Allow["Bash"][1] != "go test ./..." || d.Permissions.Escalate != nil {
		t.Errorf("defaults.permissions = %+v", d.Permissions)
	}
	if s.Policy.RejectLegacyProfiles {
		t.Error("legacy_profiles: allow gave a rejecting policy")
	}
	if s.Preamble != "Custom preamble for the full root.\n" {
		t.Errorf("preamble = %q", s.Preamble)
	}

	if len(s.Warnings) != 1 || s.Warnings[0].Code != resolve.DiagnosticLegacyProfileReplacement || s.Warnings[0].File != "agents/old-bot.md" || s.Warnings[0].Line != 1 {
		t.Errorf("warnings = %v, want one legacy_profile_replacement for agents/old-bot.md:1", s.Warnings)
	}

	files := map[string]bool{}
	for i, f := range s.Files {
		files[f.File] = true
		if i > 0 && s.Files[i-1].File >= f.File {
			t.Errorf("Files not in canonical order at %d: %s, %s", i, s.Files[i-1].File, f.File)
		}
	}
	for _, want := range []string{"rolecall.yaml", "packs/team.yaml", "agents/old-bot.md", "extra/helper.md", "prompts/preamble.md", "builtin:packs/default.yaml", "builtin:catalog/roles/architect.md"} {
		if !files[want] {
			t.Errorf("Files lacks %s", want)
		}
	}
	for _, unwanted := range []string{"builtin:preamble.md", "agents/notes.txt"} {
		if files[unwanted] {
			t.Errorf("Files holds %s, which was not read", unwanted)
		}
	}
}

func TestLoadCatalogReplacesEmbedded(t *testing.T) {
	s := mustLoad(t, copyRoot(t, "catalog"))
	if got := strings.Join(sortedKeys(s.Catalog.Roles), " "); got != "lead" {
		t.Errorf("roles = %s, want only lead", got)
	}
	if got := strings.Join(sortedKeys(s.Catalog.Modes), " "); got != "calm hasty" {
		t.Errorf("modes = %s", got)
	}
	if s.Catalog.Digest != resolve.CatalogDigest(&resolve.Catalog{Roles: s.Catalog.Roles, Modes: s.Catalog.Modes}) {
		t.Error("catalog is not sealed with its own digest")
	}
	lead := s.Catalog.Roles["lead"]
	if lead.Body != "You lead the team.\n" || lead.Emits[0] != "plan" || lead.ArtifactDefaults["format"] != "markdown" {
		t.Errorf("lead = %+v", lead)
	}
	for _, f := range s.Files {
		if strings.HasPrefix(f.File, "builtin:catalog/") || f.File == "builtin:packs/default.yaml" {
			t.Errorf("Files holds %s although the root replaces it", f.File)
		}
	}
	if errs := discover.Validate(copyRoot(t, "catalog")); len(errs) != 0 {
		t.Errorf("Validate(catalog) = %v, want no problems", errs)
	}
}

func TestLoadAllowsSymlinkInsideRoot(t *testing.T) {
	dir := copyRoot(t, "")
	writeFile(t, dir, "shared/bot.md", "---\ndisposition: replacement\n---\nShared.\n")
	symlink(t, "../shared/bot.md", dir, "agents/bot.md")
	writeFile(t, dir, "shared/team.yaml", "roles:\n  architect: {}\n")
	symlink(t, "shared", dir, "packs")
	s := mustLoad(t, dir)
	if p := s.Profiles["bot"]; p == nil || p.Body != "Shared.\n" || p.Origin.File != "agents/bot.md" {
		t.Errorf("symlinked profile = %+v", p)
	}
	if _, ok := s.Packs["team"]; !ok {
		t.Error("pack behind a symlinked packs/ directory was not loaded")
	}
}

func TestLoadCRLF(t *testing.T) {
	dir := copyRoot(t, "")
	writeFile(t, dir, "agents/win.md", "---\r\ndisposition: replacement\r\nmodel: m\r\n---\r\nLine one.\r\nLine two.\r\n")
	writeFile(t, dir, "packs/team.yaml", "roles:\r\n  architect:\r\n    model: m\r\n")
	s := mustLoad(t, dir)
	p := s.Profiles["win"]
	if p.Body != "Line one.\nLine two.\n" || *p.Model != "m" || p.KeyLines["model"] != 3 {
		t.Errorf("CRLF profile: body %q model %v line %d", p.Body, p.Model, p.KeyLines["model"])
	}
	if *s.Packs["team"].Pack.Roles["architect"].Model != "m" {
		t.Error("CRLF pack not decoded")
	}
}

func TestLoadEmptyFrontmatterAndNulls(t *testing.T) {
	dir := copyRoot(t, "")
	writeFile(t, dir, "agents/bare.md", "---\n---\nOnly a body.\n")
	writeFile(t, dir, "agents/nulls.md", "---\nmodel: ~\ntimeout:\ndisposition: replacement\n---\n")
	s := mustLoad(t, dir)
	if p := s.Profiles["bare"]; p.Name != "bare" || p.Disposition != resolve.DispositionLegacy || p.Body != "Only a body.\n" {
		t.Errorf("bare = %+v", p.ExternalProfile)
	}
	if p := s.Profiles["nulls"]; p.Model != nil || p.Timeout != nil {
		t.Errorf("null values must be absent, got model %v timeout %v", p.Model, p.Timeout)
	}
}

func TestEmbeddedContent(t *testing.T) {
	if errs := discover.BuiltinErrors(); len(errs) != 0 {
		t.Fatalf("embedded content fails strict decoding: %v", errs)
	}
	s := mustLoad(t, copyRoot(t, ""))
	if n := len(s.Catalog.Roles); n < 12 {
		t.Errorf("embedded catalog has %d roles, want at least 12", n)
	}
	want := "adversarial associative constraint-solving empathetic evidential fast framing metacognitive premortem probabilistic slow socratic systematic visual-spatial"
	if got := strings.Join(sortedKeys(s.Catalog.Modes), " "); got != want {
		t.Errorf("embedded modes = %s\nwant %s", got, want)
	}
	fast := s.Catalog.Modes["fast"]
	if strings.Join(fast.ConflictsWith, " ") != "slow systematic" {
		t.Errorf("fast conflicts_with = %v", fast.ConflictsWith)
	}
	if _, ok := s.Packs["default"]; !ok || s.Packs["default"].Origin.File != "builtin:packs/default.yaml" {
		t.Error("embedded default pack missing")
	}
	if !strings.HasPrefix(s.Preamble, "You are an agent in a rolecall-managed fleet.") {
		t.Errorf("embedded preamble = %.40q", s.Preamble)
	}
	if !s.Defaults.LionSystem || s.Policy.RejectLegacyProfiles || s.Config.LegacyProfiles != discover.LegacyAllow {
		t.Errorf("defaults without rolecall.yaml: %+v %+v", s.Defaults, s.Policy)
	}
	if len(s.Files) != len(s.Catalog.Roles)+len(s.Catalog.Modes)+2 {
		t.Errorf("Files = %d entries, want catalog + default pack + preamble", len(s.Files))
	}
}

func TestDigest(t *testing.T) {
	dir := copyRoot(t, "full")
	a, b := mustLoad(t, dir), mustLoad(t, copyRoot(t, "full"))
	if !strings.HasPrefix(a.Digest, "sha256:") || a.Digest != b.Digest {
		t.Fatalf("two copies of one tree: %s vs %s", a.Digest, b.Digest)
	}
	writeFile(t, dir, "agents/ignored.txt", "not read\n")
	if c := mustLoad(t, dir); c.Digest != a.Digest {
		t.Error("a file that is not read changed the digest")
	}
	writeFile(t, dir, "agents/scribe.md", "---\ndisposition: replacement\n---\nChanged.\n")
	if c := mustLoad(t, dir); c.Digest == a.Digest {
		t.Error("changing a profile did not change the digest")
	}
	empty := mustLoad(t, copyRoot(t, ""))
	withDefault := copyRoot(t, "")
	data, err := os.ReadFile(filepath.Join("builtin", "packs", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, withDefault, "packs/default.yaml", string(data))
	if d := mustLoad(t, withDefault); d.Digest == empty.Digest {
		t.Error("the same content at another path (packs/ vs builtin:) gave the same digest")
	}
}
