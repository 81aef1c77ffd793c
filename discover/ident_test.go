package discover_test

import (
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
)

// TestIdentifiersRejectFormatCharacters: a model, effort or tool name
// written with a bidirectional control or another invisible format
// character ("Trojan Source") is refused with the file's own code, at its
// line, wherever a file can write one. Free text (a description, a prompt
// line) may still hold one.
func TestIdentifiersRejectFormatCharacters(t *testing.T) {
	const rlo = "\u202e"
	tests := []struct {
		name, file, content, want string
	}{
		{"pack model", "packs/team.yaml", "roles:\n  architect:\n    model: claude" + rlo + "-opus\n", "packs/team.yaml:3: pack_invalid:"},
		{"pack effort", "packs/team.yaml", "roles:\n  architect:\n    model: m\n    effort: \"hi\\u200bgh\"\n", "packs/team.yaml:4: pack_invalid:"},
		{"variant effort", "packs/team.yaml", "roles:\n  architect:\n    model: m\n    variants:\n      - when: {model: m}\n        set: {effort: \"lo\\u2066w\"}\n", "packs/team.yaml:6: pack_invalid:"},
		{"variant when", "packs/team.yaml", "roles:\n  architect:\n    model: m\n    variants:\n      - when: {model: \"m\\u202e\"}\n        set: {effort: low}\n", "packs/team.yaml:5: pack_invalid:"},
		{"variant when glob", "packs/team.yaml", "roles:\n  architect:\n    model: m\n    variants:\n      - when: {model: {matches: \"m*\\u202e\"}}\n        set: {effort: low}\n", "packs/team.yaml:5: pack_invalid:"},
		{"profile model", "agents/bot.md", "---\ndisposition: replacement\nmodel: \"gpt\\u202e4\"\n---\nBody.\n", "agents/bot.md:3: profile_invalid:"},
		{"profile effort", "agents/bot.md", "---\ndisposition: replacement\neffort: \"\\ufeffhigh\"\n---\nBody.\n", "agents/bot.md:3: profile_invalid:"},
		{"defaults model", "rolecall.yaml", "defaults:\n  model: \"m\\u202e\"\n", "rolecall.yaml:2: config_invalid:"},
		{"defaults tool", "rolecall.yaml", "defaults:\n  tools: [Read, \"Ba\\u200dsh\"]\n", "rolecall.yaml:2: config_invalid:"},
		{"permission tool", "rolecall.yaml", "defaults:\n  permissions:\n    mode: rules\n    deny:\n      \"Bash\\u202e\": [\"*\"]\n", "rolecall.yaml:5: config_invalid:"},
		{"permission pattern", "rolecall.yaml", "defaults:\n  permissions:\n    mode: rules\n    deny:\n      Bash: [\"rm \\u202e*\"]\n", "rolecall.yaml:5: config_invalid:"},
		{"tier model", "rolecall.yaml", "models:\n  tiers:\n    strong: \"opus\\u202e\"\n", "rolecall.yaml:3: config_invalid:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := copyRoot(t, "")
			writeFile(t, root, tt.file, tt.content)
			problems := discover.Validate(root)
			var got []string
			for _, p := range problems {
				got = append(got, p.Error())
			}
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.want) || !strings.Contains(got[0], "invisible format character (U+") {
				t.Errorf("problems %q, want one starting %q that names the format character", got, tt.want)
			}
		})
	}

	t.Run("free text may hold one", func(t *testing.T) {
		root := copyRoot(t, "")
		writeFile(t, root, "packs/team.yaml", "roles:\n  architect:\n    model: m\n    authority: [\"Decide \\u202eright-to-left\\u202c text\"]\n")
		writeFile(t, root, "agents/bot.md", "---\ndisposition: replacement\ndescription: \"a \\u200b description\"\n---\nBody with \u2066isolate\u2069.\n")
		if problems := discover.Validate(root); len(problems) != 0 {
			t.Errorf("problems %v, want none", problems)
		}
	})
}
