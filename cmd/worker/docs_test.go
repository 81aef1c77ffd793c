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
