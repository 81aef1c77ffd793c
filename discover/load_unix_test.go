//go:build unix

package discover_test

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rolecall/rolecall/resolve"
)

// platformLoadCases are the cases that need Unix special files.
func platformLoadCases() []loadErrorCase {
	return []loadErrorCase{
		{name: "FIFO in place of a profile", setup: func(t *testing.T, dir string) {
			// Reading a FIFO with no writer blocks forever; Load must refuse
			// it from its mode without opening it.
			writeFile(t, dir, "agents/keep", "")
			if err := syscall.Mkfifo(filepath.Join(dir, "agents", "pipe.md"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, code: resolve.CodeProfileInvalid, where: "agents/pipe.md", msg: "not a regular file"},
		{name: "FIFO in place of rolecall.yaml", setup: func(t *testing.T, dir string) {
			if err := syscall.Mkfifo(filepath.Join(dir, "rolecall.yaml"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, code: resolve.CodeConfigInvalid, where: "rolecall.yaml", msg: "not a regular file"},
		{name: "absolute symlink to a device", setup: func(t *testing.T, dir string) {
			symlinkDevNull(t, dir, "packs/null.yaml")
		}, code: resolve.CodePathEscape, where: "packs/null.yaml", msg: "leads outside"},
	}
}

func symlinkDevNull(t *testing.T, dir, rel string) {
	symlink(t, "/dev/null", dir, rel)
}

func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
}
