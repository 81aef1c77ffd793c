package discover_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// Placeholders in packs and rolecall.yaml: ${env:NAME} for allowlisted
// names, ${file:PATH} through the config root, $${ for a literal ${.

// allowTeam lets ${env:…} read TEAM_* variables.
const allowTeam = "placeholders:\n  env: [TEAM_*]\n"

// secret is an environment value no failure may carry.
const secret = "s3cr3t-value-7f1d"

func TestPlaceholderValues(t *testing.T) {
	cases := []struct {
		name  string
		files files
		env   map[string]string
		model string // the composed architect model of pack team
		esc   []string
	}{
		{
			name:  "an allowed environment variable",
			files: files{"rolecall.yaml": allowTeam, "packs/team.yaml": "roles:\n  architect:\n    model: ${env:TEAM_MODEL}\n"},
			env:   map[string]string{"TEAM_MODEL": "claude-opus-4-1"},
			model: "claude-opus-4-1",
		},
		{
			name:  "placeholders inside a longer string, several in one",
			files: files{"rolecall.yaml": allowTeam, "packs/team.yaml": "roles:\n  architect:\n    model: ${env:TEAM_FAMILY}-${env:TEAM_SIZE}-4\n"},
			env:   map[string]string{"TEAM_FAMILY": "claude", "TEAM_SIZE": "opus"},
			model: "claude-opus-4",
		},
		{
			name: "a file through the config root, one trailing newline trimmed",
			files: files{
				"packs/team.yaml":   "roles:\n  architect:\n    model: m\n    escalations: [\"${file:prompts/esc.txt}\"]\n",
				"prompts/esc.txt":   "The build is red on main\n",
				"prompts/other.txt": "unused\n",
			},
			model: "m", esc: []string{"The build is red on main"},
		},
		{
			name:  "only one newline is trimmed, and a CRLF counts as one",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: m\n    escalations: [\"${file:a.txt}\", \"${file:b.txt}\"]\n", "a.txt": "line\n\n", "b.txt": "line\r\n"},
			model: "m", esc: []string{"line\n", "line"},
		},
		{
			name:  "$${ is a literal ${",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: m\n    escalations: [\"keep $${HOME} and $${env:X} as written\"]\n"},
			model: "m", esc: []string{"keep ${HOME} and ${env:X} as written"},
		},
		{
			name:  "a lone $ is text",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: m\n    escalations: [\"costs over $5\", \"$$\"]\n"},
			model: "m", esc: []string{"costs over $5", "$$"},
		},
		{
			name:  "expansion is single-pass: a value that looks like a placeholder stays as it is",
			files: files{"rolecall.yaml": allowTeam, "packs/team.yaml": "roles:\n  architect:\n    model: ${env:TEAM_MODEL}\n    escalations: [\"${file:esc.txt}\"]\n", "esc.txt": "${env:TEAM_OTHER}"},
			env:   map[string]string{"TEAM_MODEL": "${env:TEAM_OTHER}", "TEAM_OTHER": "never"},
			model: "${env:TEAM_OTHER}", esc: []string{"${env:TEAM_OTHER}"},
		},
		{
			name:  "a mixin's placeholder resolves like the pack's own",
			files: files{"rolecall.yaml": allowTeam, "packs/base.yaml": "roles:\n  architect:\n    model: ${env:TEAM_MODEL}\n", "packs/team.yaml": "extends: [base]\n"},
			env:   map[string]string{"TEAM_MODEL": "from-env"},
			model: "from-env",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pf := packOf(t, tc.files, tc.env, "team")
			e := pf.Pack.Roles["architect"]
			if e.Model == nil || *e.Model != tc.model {
				t.Errorf("model = %v, want %q", e.Model, tc.model)
			}
			if tc.esc != nil && strings.Join(e.Escalations, "|") != strings.Join(tc.esc, "|") {
				t.Errorf("escalations = %q, want %q", e.Escalations, tc.esc)
			}
		})
	}
}

func TestPlaceholderErrors(t *testing.T) {
	big := strings.Repeat("x", discover.MaxPlaceholderFile+1)
	cases := []compositionError{
		{
			name:  "an environment variable not on the allowlist is forbidden, even when set",
			files: files{"rolecall.yaml": allowTeam, "packs/team.yaml": "roles:\n  architect:\n    model: ${env:HOME_SECRET}\n"},
			env:   map[string]string{"HOME_SECRET": secret},
			pack:  "team", code: resolve.CodePlaceholderForbidden, where: "packs/team.yaml:3", msg: "HOME_SECRET is not allowed by rolecall.yaml placeholders.env (allowed: TEAM_*)",
			details: map[string]any{"file": "packs/team.yaml", "line": 3, "placeholder": "${env:HOME_SECRET}", "key": "roles.architect.model"},
		},
		{
			name:  "without an allowlist no variable is allowed",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: ${env:TEAM_MODEL}\n"},
			env:   map[string]string{"TEAM_MODEL": secret},
			pack:  "team", code: resolve.CodePlaceholderForbidden, where: "packs/team.yaml:3", msg: "(allowed: none)",
		},
		{
			name:  "an allowed variable that is unset is unresolved",
			files: files{"rolecall.yaml": allowTeam, "packs/team.yaml": "roles:\n  architect:\n    model: ${env:TEAM_MODEL}\n"},
			pack:  "team", code: resolve.CodePlaceholderUnresolved, where: "packs/team.yaml:3", msg: "environment variable TEAM_MODEL is not set",
			details: map[string]any{"placeholder": "${env:TEAM_MODEL}"},
		},
		{
			name:  "a value with a control character is refused without being quoted",
			files: files{"rolecall.yaml": allowTeam, "packs/team.yaml": "roles:\n  architect:\n    model: ${env:TEAM_MODEL}\n"},
			env:   map[string]string{"TEAM_MODEL": secret + "\x07"},
			pack:  "team", code: resolve.CodePlaceholderUnresolved, where: "packs/team.yaml:3", msg: "control character",
		},
		{
			name:  "a missing file is unresolved",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: m\n    authority: [\"${file:prompts/none.md}\"]\n"},
			pack:  "team", code: resolve.CodePlaceholderUnresolved, where: "packs/team.yaml:4", msg: "prompts/none.md does not exist",
			details: map[string]any{"placeholder": "${file:prompts/none.md}", "key": "roles.architect.authority[0]"},
		},
		{
			name:  "a path with .. escapes",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: ${file:../outside.txt}\n"},
			pack:  "team", code: resolve.CodePathEscape, where: "packs/team.yaml:3", msg: "leaves the config root",
		},
		{
			name:  "a path with an inner .. escapes, though it stays inside",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: ${file:prompts/../model.txt}\n", "model.txt": "m\n"},
			pack:  "team", code: resolve.CodePathEscape, where: "packs/team.yaml:3", msg: "leaves the config root",
		},
		{
			name:  "an absolute path escapes",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: ${file:/etc/hostname}\n"},
			pack:  "team", code: resolve.CodePathEscape, where: "packs/team.yaml:3", msg: "leaves the config root",
		},
		{
			name:  "a file over 64 KiB is unresolved",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: m\n    authority: [\"${file:big.txt}\"]\n", "big.txt": big},
			pack:  "team", code: resolve.CodePlaceholderUnresolved, where: "packs/team.yaml:4", msg: "big.txt is larger than the 65536-byte (64 KiB) limit",
		},
		{
			name:  "a directory is not a file",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: ${file:prompts}\n", "prompts/x": ""},
			pack:  "team", code: resolve.CodePlaceholderUnresolved, where: "packs/team.yaml:3", msg: "not a regular file",
		},
		{
			name:  "an unknown placeholder kind is pack_invalid",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: ${vault:db}\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:3", msg: "placeholder ${vault:db}: is not a placeholder",
		},
		{
			name:  "an unclosed placeholder is pack_invalid",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: \"${env:TEAM_MODEL\"\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:3", msg: "is not closed",
		},
		{
			name:  "a bad variable name is pack_invalid",
			files: files{"packs/team.yaml": "roles:\n  architect:\n    model: ${env:1X}\n"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:3", msg: "names no environment variable",
		},
		{
			name:  "an error on a value a placeholder produced names the placeholder, not the value",
			files: files{"rolecall.yaml": allowTeam, "packs/team.yaml": "roles:\n  architect:\n    model: m\n    default_modes: [\"${env:TEAM_MODE}\"]\n"},
			env:   map[string]string{"TEAM_MODE": secret + "-Not-A-Name"},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:4", msg: `key "roles.architect.default_modes[0]": the value of ${env:TEAM_MODE} is refused: invalid name: …`,
		},
		{
			name:  "a wrong type from a placeholder is masked as well",
			files: files{"rolecall.yaml": allowTeam, "packs/team.yaml": "roles:\n  architect:\n    model: m\n    modes_allow: \"${env:TEAM_MODE}\"\n"},
			env:   map[string]string{"TEAM_MODE": secret},
			pack:  "team", code: resolve.CodePackInvalid, where: "packs/team.yaml:4", msg: "the value of ${env:TEAM_MODE} is refused: must be a list, got …",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, tc.run)
	}
}

func TestPlaceholderSymlinkEscapes(t *testing.T) {
	dir := writeRoot(t, files{"packs/team.yaml": "roles:\n  architect:\n    model: ${file:prompts/esc.txt}\n"})
	writeFile(t, filepath.Dir(dir), "outside.txt", secret+"\n")
	symlink(t, "../../outside.txt", dir, "prompts/esc.txt")
	s := mustLoad(t, dir)
	err := s.PackErrors["team"]
	if err == nil || err.Code != resolve.CodePathEscape || err.File != "packs/team.yaml" || err.Line != 3 {
		t.Fatalf("a symlink out of the root: %v, want path_escape at packs/team.yaml:3", err)
	}
	// The message follows the file's name as a sentence does.
	if want := "placeholder ${file:prompts/esc.txt}: prompts/esc.txt leads outside its trusted root through a symlink"; !strings.HasSuffix(err.Message, want) {
		t.Errorf("message %q, want it to end with %q", err.Message, want)
	}
	if strings.Contains(err.Error(), secret) {
		t.Errorf("the error carries the file's content: %v", err)
	}
}

// rolecall.yaml takes placeholders too; its problems stay global.
func TestConfigPlaceholders(t *testing.T) {
	t.Run("values", func(t *testing.T) {
		dir := writeRoot(t, files{
			"rolecall.yaml": "placeholders:\n  env: [NATS_*, MODEL]\ndefaults:\n  model: ${env:MODEL}\n  effort: ${file:effort.txt}\nnats:\n  password: ${env:NATS_PASSWORD}\n  user: worker-$${id}\n",
			"effort.txt":    "high\n",
		})
		s := loadEnv(t, dir, map[string]string{"MODEL": "m-1", "NATS_PASSWORD": secret})
		if *s.Defaults.Model != "m-1" || *s.Defaults.Effort != "high" || s.Config.NATS.Password != secret || s.Config.NATS.User != "worker-${id}" {
			t.Errorf("config = model %v effort %v nats %+v", *s.Defaults.Model, *s.Defaults.Effort, s.Config.NATS)
		}
		if got := fmt.Sprint(s.Config.PlaceholderEnv); got != "[NATS_* MODEL]" {
			t.Errorf("PlaceholderEnv = %s", got)
		}
		var used []string
		for _, p := range s.Config.Placeholders {
			used = append(used, fmt.Sprintf("%s:%s@%s digest=%t", p.Kind, p.Name, p.Origin, p.Digest != ""))
		}
		want := "env:MODEL@rolecall.yaml:4 digest=false|file:effort.txt@rolecall.yaml:5 digest=true|env:NATS_PASSWORD@rolecall.yaml:7 digest=false"
		if strings.Join(used, "|") != want {
			t.Errorf("Placeholders =\n%s\nwant\n%s", strings.Join(used, "|"), want)
		}
	})
	for _, tc := range []struct {
		name, config string
		env          map[string]string
		code         resolve.Code
		where, msg   string
	}{
		{"a variable off the allowlist", "nats:\n  password: ${env:NATS_PASSWORD}\n", map[string]string{"NATS_PASSWORD": secret},
			resolve.CodePlaceholderForbidden, "rolecall.yaml:2", "NATS_PASSWORD is not allowed"},
		{"an unset variable", "placeholders: {env: [NATS_*]}\nnats:\n  password: ${env:NATS_PASSWORD}\n", nil,
			resolve.CodePlaceholderUnresolved, "rolecall.yaml:3", "NATS_PASSWORD is not set"},
		{"a missing file", "defaults:\n  model: ${file:model.txt}\n", nil,
			resolve.CodePlaceholderUnresolved, "rolecall.yaml:2", "model.txt does not exist"},
		{"a malformed placeholder is config_invalid", "defaults:\n  model: ${model}\n", nil,
			resolve.CodeConfigInvalid, "rolecall.yaml:2", "is not a placeholder"},
		{"a bad allowlist glob", "placeholders:\n  env: [\"[\"]\n", nil,
			resolve.CodeConfigInvalid, "rolecall.yaml:2", "is not a glob of environment variable names"},
		{"placeholders are not read in the allowlist itself", "placeholders:\n  env: [\"${env:X}\"]\n", nil,
			resolve.CodeConfigInvalid, "rolecall.yaml:2", "is not a glob"},
		{"a value from a placeholder that fails decoding is masked", "placeholders: {env: [LEGACY]}\nlegacy_profiles: ${env:LEGACY}\n", map[string]string{"LEGACY": secret},
			resolve.CodeConfigInvalid, "rolecall.yaml:2", `key "legacy_profiles": the value of ${env:LEGACY} is refused: must be allow or reject, got …`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeRoot(t, files{"rolecall.yaml": tc.config})
			_, err := discover.Load(dir, discover.Options{LookupEnv: envOf(tc.env)})
			de := asError(t, err)
			if de.Code != tc.code || !strings.HasPrefix(de.Error(), tc.where+": ") || !strings.Contains(de.Message, tc.msg) {
				t.Errorf("error %v; want %s at %s with %q", de, tc.code, tc.where, tc.msg)
			}
			if strings.Contains(de.Error(), secret) || strings.Contains(fmt.Sprint(de.Details()), secret) {
				t.Errorf("the error carries the value: %v", de)
			}
		})
	}
}

// What a pack's placeholders read is recorded, for the decision record:
// each variable by name, each file with the digest of its bytes; and the
// files are inputs of the snapshot.
func TestPlaceholderRecords(t *testing.T) {
	dir := writeRoot(t, files{
		"rolecall.yaml":   allowTeam,
		"packs/base.yaml": "roles:\n  architect:\n    model: ${env:TEAM_MODEL}\n",
		"packs/team.yaml": "extends: [base]\nroles:\n  architect:\n    authority: [\"${file:prompts/a.txt}\", \"${file:prompts/a.txt}\"]\n",
		"prompts/a.txt":   "Own the design\n",
	})
	s := loadEnv(t, dir, map[string]string{"TEAM_MODEL": secret})
	pf := s.Packs["team"]
	var got []string
	for _, p := range pf.Placeholders {
		got = append(got, fmt.Sprintf("%s %s %s %s", p.Kind, p.Name, p.Origin, p.Digest))
	}
	digest := "sha256:" + sha256Hex("Own the design\n")
	want := []string{
		"env TEAM_MODEL packs/base.yaml:3 ",
		"file prompts/a.txt packs/team.yaml:4 " + digest,
		"file prompts/a.txt packs/team.yaml:4 " + digest,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Placeholders:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var fs []string
	for _, f := range pf.Files {
		fs = append(fs, f.File)
	}
	if strings.Join(fs, " ") != "packs/base.yaml packs/team.yaml prompts/a.txt" || pf.Files[2].Digest != digest {
		t.Errorf("Files = %+v", pf.Files)
	}
	if !slicesContainsOrigin(s.Files, "prompts/a.txt") {
		t.Errorf("the snapshot's files lack prompts/a.txt: %v", s.Files)
	}
	if strings.Contains(fmt.Sprintf("%+v", pf.Placeholders), secret) {
		t.Error("a placeholder record holds the value")
	}

	// Editing the file changes the snapshot's digest and the pack's.
	writeFile(t, dir, "prompts/a.txt", "Own the design, and the budget\n")
	s2 := loadEnv(t, dir, map[string]string{"TEAM_MODEL": secret})
	if s2.Digest == s.Digest || s2.Packs["team"].FilesDigest == pf.FilesDigest || s2.Packs["team"].Pack.Digest == pf.Pack.Digest {
		t.Error("editing a ${file:…} target left a digest unchanged")
	}
}

func slicesContainsOrigin(os []discover.Origin, file string) bool {
	for _, o := range os {
		if o.File == file {
			return true
		}
	}
	return false
}

// Names rolecall.yaml takes from placeholders are masked where they name
// nothing: in a task's failure, in validate, in a load error.
func TestConfigPlaceholderNamesAreMasked(t *testing.T) {
	const value = "team-s3cr3t"
	env := map[string]string{"TEAM_PACK": value, "TEAM_PROFILE": value, "TEAM_PREAMBLE": value + ".md"}
	dir := writeRoot(t, files{"rolecall.yaml": "placeholders: {env: [TEAM_*]}\ndefault_pack: ${env:TEAM_PACK}\noverlays:\n  architect: ${env:TEAM_PROFILE}\n"})
	s := loadEnv(t, dir, env)
	for _, req := range []discover.Request{{Ref: resolve.RoleName("reviewer")}, {Ref: resolve.RoleName("architect"), Pack: ptr("default")}} {
		_, err := s.Inputs(req)
		if err == nil {
			t.Fatalf("%+v resolved", req)
		}
		if strings.Contains(err.Error(), value) || !strings.Contains(err.Error(), "${env:TEAM_") {
			t.Errorf("a task's failure: %v", err)
		}
		if de, ok := err.(*discover.Error); ok && strings.Contains(de.Subject, value) {
			t.Errorf("subject %q carries the value", de.Subject)
		}
	}
	errs := discover.ValidateWith(dir, discover.Options{LookupEnv: envOf(env)})
	if len(errs) != 2 {
		t.Errorf("validate: %v, want default_pack and overlays problems", errs)
	}
	for _, e := range errs {
		if strings.Contains(e.Error(), value) {
			t.Errorf("validate: %v", e)
		}
	}
	writeFile(t, dir, "rolecall.yaml", "placeholders: {env: [TEAM_*]}\npreamble_file: ${env:TEAM_PREAMBLE}\n")
	_, err := discover.Load(dir, discover.Options{LookupEnv: envOf(env)})
	if err == nil || strings.Contains(err.Error(), value) || !strings.Contains(err.Error(), "${env:TEAM_PREAMBLE}") {
		t.Errorf("a load error: %v", err)
	}
}
