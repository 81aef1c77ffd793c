package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOfflineCommandsHonourAllowHardLinks: every command that reads the
// config root refuses a hard-linked file by default and reads it with
// --allow-hard-links (explain once loaded the root without the flag).
func TestOfflineCommandsHonourAllowHardLinks(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "packs"), 0o755); err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(root, "packs", "team.yaml")
	if err := os.WriteFile(pack, []byte("roles:\n  tester:\n    model: team-model\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(pack, filepath.Join(t.TempDir(), "elsewhere.yaml")); err != nil {
		t.Skipf("this file system makes no hard links: %v", err)
	}
	task := filepath.Join(t.TempDir(), "task.json")
	if err := os.WriteFile(task, []byte(`{"task_id": "T-1", "role": "tester", "pack": "team"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"resolve", task},
		{"explain", task},
		{"validate"},
		{"roster", "--pack=team"},
	} {
		t.Run(args[0], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append(args, "--root="+root), strings.NewReader(""), &stdout, &stderr); code == 0 {
				t.Errorf("without --allow-hard-links: exit 0, want a refusal\n%s", stdout.String())
			}
			stdout.Reset()
			stderr.Reset()
			if code := run(append(args, "--root="+root, "--allow-hard-links"), strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Errorf("with --allow-hard-links: exit %d, want 0\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
			}
		})
	}
}
