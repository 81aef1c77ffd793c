package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
)

// TestConfigDocExample holds the worked example of docs/CONFIG.md ("Pack
// composition") to the repository: the page quotes the example's files as
// they are, and shows the outputs that compose.txtar pins.
func TestConfigDocExample(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "CONFIG.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(page), "#### Worked example")
	if start < 0 {
		t.Fatal("docs/CONFIG.md has no worked example of pack composition")
	}
	doc := string(page[start:])
	if end := strings.Index(doc[1:], "\n## "); end >= 0 {
		doc = doc[:end+1]
	}
	root := filepath.Join("..", "..", "examples", "composition")
	for _, rel := range []string{"packs/base.yaml", "packs/payments.yaml"} {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		if block := "```yaml\n# " + rel + "\n" + string(data) + "```\n"; !strings.Contains(doc, block) {
			t.Errorf("the page does not quote %s as it is:\n%s", rel, block)
		}
	}
	line, err := os.ReadFile(filepath.Join(root, "prompts", "payments-escalation.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if quoted := "`" + strings.TrimSpace(string(line)) + "`"; !strings.Contains(strings.Join(strings.Fields(doc), " "), quoted) {
		t.Errorf("the page does not quote the placeholder file's line %s", quoted)
	}
	ar, err := txtar.ParseFile(filepath.Join("testdata", "script", "compose.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ar.Files {
		var cmd string
		switch f.Name {
		case "explain-opus.txt":
			cmd = "$ worker resolve --explain tasks/architect.json\n"
		case "explain-sonnet.txt":
			cmd = "$ worker resolve --explain tasks/architect-sonnet.json\n"
		default:
			continue
		}
		if block := cmd + string(f.Data) + "```\n"; !strings.Contains(doc, block) {
			t.Errorf("the page does not show the pinned output of %q:\n%s", strings.TrimSpace(cmd), block)
		}
	}
}

// TestConfigDocValidateOutputs holds the outputs that docs/CONFIG.md
// quotes from worker validate to what it prints for the files the page
// describes.
func TestConfigDocValidateOutputs(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "CONFIG.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
	}{
		{"an error line (section 2)", map[string]string{
			"packs/team.yaml": "roles:\n  architect:\n    modle: x\n",
		}},
		{"checking a config root (section 11)", map[string]string{
			"packs/team.yaml": "roles:\n  architect:\n    model: m\n    default_modes: [systematic, fast]\n  oracle: {}\n",
			"rolecall.yaml":   "default_pack: team2\n",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, body := range tc.files {
				p := filepath.Join(root, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var stdout, stderr strings.Builder
			if code := run([]string{"validate", "--root", root}, strings.NewReader(""), &stdout, &stderr); code != 1 {
				t.Fatalf("exit %d, want 1\n%s%s", code, stdout.String(), stderr.String())
			}
			if !strings.Contains(string(page), "\n"+stdout.String()+"```\n") {
				t.Errorf("docs/CONFIG.md does not show what worker validate prints:\n%s", stdout.String())
			}
		})
	}
}
