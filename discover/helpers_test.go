package discover_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// copyRoot copies testdata/roots/<name> (nothing when name is "") to
// <tmp>/root and returns that path; <tmp> is free for files "outside" the
// root. Tests change the copy, never testdata.
func copyRoot(t testing.TB, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "root")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if name == "" {
		return dst
	}
	src := filepath.Join("testdata", "roots", name)
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	return dst
}

// writeFile writes content to dir/rel, creating directories.
func writeFile(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// symlink makes dir/rel a symlink to target (taken literally).
func symlink(t testing.TB, target, dir, rel string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func mustLoad(t testing.TB, dir string) *discover.Snapshot {
	t.Helper()
	s, err := discover.Load(dir, discover.Options{})
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	return s
}

// asError asserts err is a *discover.Error.
func asError(t testing.TB, err error) *discover.Error {
	t.Helper()
	var de *discover.Error
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *discover.Error", err, err)
	}
	return de
}

// asResolution asserts err is a *resolve.ResolutionError.
func asResolution(t testing.TB, err error) *resolve.ResolutionError {
	t.Helper()
	var re *resolve.ResolutionError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *resolve.ResolutionError", err, err)
	}
	return re
}

func ptr[T any](v T) *T { return &v }

// golden compares got with testdata/golden/<name>, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (run go test -update to accept):\n--- want\n%s\n--- got\n%s", p, want, got)
	}
}

// hasLine reports whether text contains a line equal to line.
func hasLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ageFiles moves every file's mtime by d (negative = into the past).
func ageFiles(t testing.TB, dir string, d time.Duration) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		when := time.Now().Add(d)
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// reloaded is what a started Source serves once its watcher has swept:
// Reload, then Snapshot (a Snapshot alone never sweeps).
func reloaded(t testing.TB, src *discover.Source) *discover.Snapshot {
	t.Helper()
	src.Reload()
	return src.Snapshot()
}
