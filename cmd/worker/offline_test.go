package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadInputIsBounded: a task file is read up to the same bound as
// stdin, so a huge file (or a device such as /dev/zero) is refused by the
// decoder instead of being read without end.
func TestReadInputIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	f.Close()
	b, name, err := readInput(path, strings.NewReader(""))
	if err != nil || name != path {
		t.Fatalf("readInput: %q, %v", name, err)
	}
	if len(b) > 16<<20 {
		t.Errorf("read %d bytes of a task file, want at most %d", len(b), 16<<20)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"resolve", "--root", t.TempDir(), path}, strings.NewReader(""), &stdout, &stderr); code != 1 || !strings.Contains(stdout.String(), `"reason": "too_large"`) {
		t.Errorf("resolve of a huge task file: exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
}
