//go:build linux

package discover_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// printable reports whether s can stand in JSON and on one line of text.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) })
}

// A file name is any bytes (Linux file systems allow all but / and NUL).
// Every problem names such a file with Go escapes, so its failure JSON
// encodes and a validate line stays one line; a skill's file with such a
// name has a printable origin among a decision's inputs.
func TestUnprintableFileNames(t *testing.T) {
	dir := writeRoot(t, files{
		"agents/ev\nil.md":            "---\ndisposition: replacement\n---\nx\n",
		"packs/b\xffad.yaml":          "roles: {}\n",
		"packs/x\x1b[31m.yaml":        "roles: {}\n",
		"skills/n\xfe/SKILL.md":       "---\nname: x\ndescription: d\n---\n",
		"skills/good/SKILL.md":        "---\nname: good\ndescription: d\n---\n",
		"skills/good/in\u202egnp.exe": "x\n",
		"packs/team.yaml":             "roles:\n  architect: {model: m, skills: [\"*\"]}\n",
	})
	var got []string
	for _, e := range discover.Validate(dir) {
		got = append(got, e.File)
		for _, s := range append([]string{e.File, e.Subject, e.Message, e.Error()}, e.Paths...) {
			if !printable(s) {
				t.Errorf("%s: %q is not printable text", e.Code, s)
			}
		}
	}
	want := []string{`agents/ev\nil.md`, `packs/b\xffad.yaml`, `packs/x\x1b[31m.yaml`, `skills/n\xfe`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("problems at %q, want %q", got, want)
	}

	// Without the broken profile and packs the root loads; the skill's
	// file is one of the inputs of a task that consults skills.
	dir = writeRoot(t, files{
		"skills/good/SKILL.md":        "---\nname: good\ndescription: d\n---\n",
		"skills/good/in\u202egnp.exe": "x\n",
		"skills/good/n\xffame.txt":    "x\n",
	})
	s := mustLoad(t, dir)
	var origins []string
	for _, in := range s.DecisionInputs(discover.DecisionUse{Skills: []string{"good"}}) {
		if in.Kind == resolve.InputSkill {
			origins = append(origins, in.Origin)
		}
	}
	if want := []string{`skills/good/SKILL.md`, `skills/good/in\u202egnp.exe`, `skills/good/n\xffame.txt`}; strings.Join(origins, " ") != strings.Join(want, " ") {
		t.Errorf("skill inputs at %q, want %q", origins, want)
	}
}
