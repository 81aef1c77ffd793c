//go:build unix

package discover_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// TestHardLinksOutOfTheRootAreRefused pins the decision on hard links:
// os.Root cannot see where a hard link's other name is, so a file of the
// root with more than one link is path_escape (details.reason hard_link)
// wherever discovery reads one (reported where the file is named), unless Options.AllowHardLinks is set, and
// then the linked file is read like any other.
func TestHardLinksOutOfTheRootAreRefused(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(t *testing.T, root, outside string) // links root files to outside ones
		packOf string                                   // "": Load fails; else that pack's error
		file   string
	}{
		{"pack", func(t *testing.T, root, outside string) {
			link(t, filepath.Join(outside, "pack.yaml"), "roles:\n  architect: {model: stolen}\n", filepath.Join(root, "packs", "team.yaml"))
		}, "team", "packs/team.yaml"},
		{"profile", func(t *testing.T, root, outside string) {
			link(t, filepath.Join(outside, "bot.md"), "---\ndisposition: replacement\n---\nSecret body.\n", filepath.Join(root, "agents", "bot.md"))
		}, "", "agents/bot.md"},
		{"preamble", func(t *testing.T, root, outside string) {
			writeFile(t, root, "rolecall.yaml", "preamble_file: preamble.md\n")
			link(t, filepath.Join(outside, "secret.txt"), "token=hunter2\n", filepath.Join(root, "preamble.md"))
		}, "", "rolecall.yaml"}, // where preamble_file names it
		{"placeholder file", func(t *testing.T, root, outside string) {
			writeFile(t, root, "packs/team.yaml", "roles:\n  architect:\n    model: m\n    authority: [\"${file:notes.txt}\"]\n")
			link(t, filepath.Join(outside, "secret.txt"), "token=hunter2\n", filepath.Join(root, "notes.txt"))
		}, "team", "packs/team.yaml"}, // where the placeholder names it
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			root, outside := filepath.Join(dir, "root"), filepath.Join(dir, "outside")
			for _, d := range []string{filepath.Join(root, "packs"), filepath.Join(root, "agents"), outside} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			tt.setup(t, root, outside)

			snap, err := discover.Load(root, discover.Options{})
			if tt.packOf != "" {
				if err != nil {
					t.Fatal(err)
				}
				err = snap.PackErrors[tt.packOf]
			}
			var de *discover.Error
			if !errors.As(err, &de) || de.Code != resolve.CodePathEscape || de.File != tt.file || !strings.Contains(de.Message, "has 2 hard links") {
				t.Fatalf("error %v, want path_escape at %s for 2 hard links", err, tt.file)
			}
			if r := de.Details()["reason"]; tt.name == "pack" || tt.name == "profile" {
				if r != "hard_link" {
					t.Errorf("details.reason %v, want hard_link", r)
				}
			}
			if strings.Contains(de.Message, "hunter2") || strings.Contains(de.Message, "stolen") {
				t.Errorf("the message shows the linked file's content: %s", de.Message)
			}

			snap, err = discover.Load(root, discover.Options{AllowHardLinks: true})
			if err != nil {
				t.Fatalf("with AllowHardLinks: %v", err)
			}
			if e, ok := snap.PackErrors[tt.packOf]; ok {
				t.Errorf("with AllowHardLinks the pack is still broken: %v", e)
			}
		})
	}
}

// A file with one link is read as always, and removing the extra link
// of a refused file makes the next load accept it.
func TestSingleLinkFilesAreRead(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	writeFile(t, root, "packs/team.yaml", "roles:\n  architect: {model: m}\n")
	other := filepath.Join(dir, "copy.yaml")
	if err := os.Link(filepath.Join(root, "packs", "team.yaml"), other); err != nil {
		t.Skipf("hard links unsupported here: %v", err)
	}
	snap, err := discover.Load(root, discover.Options{})
	if err != nil || snap.PackErrors["team"] == nil {
		t.Fatalf("Load = %v, %v; want team refused while it has two links", snap, err)
	}
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	if snap, err = discover.Load(root, discover.Options{}); err != nil || snap.PackErrors["team"] != nil {
		t.Fatalf("after unlinking: %v, pack error %v", err, snap.PackErrors["team"])
	}
}

// link writes content to target (outside the root) and links name to it.
func link(t *testing.T, target, content, name string) {
	t.Helper()
	if err := os.WriteFile(target, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(target, name); err != nil {
		t.Skipf("hard links unsupported here: %v", err)
	}
}
