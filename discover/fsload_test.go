package discover_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// mapFS copies the regular files under dir into memory; ok is false when
// the tree holds anything else (a symlink), which memory cannot mirror.
func mapFS(t *testing.T, dir string) (fstest.MapFS, bool) {
	t.Helper()
	m := fstest.MapFS{}
	ok := true
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			ok = false
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[filepath.ToSlash(rel)] = &fstest.MapFile{Data: data, Mode: 0o644}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m, ok
}

// LoadFS over a copy in memory sees what Load sees on disk: the same
// digest, or the same first problem.
func TestLoadFSMatchesLoad(t *testing.T) {
	roots, _ := filepath.Glob(filepath.Join("testdata", "roots", "*"))
	roots = append(roots, filepath.Join("..", "examples"))
	for _, root := range roots {
		t.Run(filepath.Base(root), func(t *testing.T) {
			m, ok := mapFS(t, root)
			if !ok {
				t.Skip("holds symlinks")
			}
			want, werr := discover.Load(root, discover.Options{})
			got, gerr := discover.LoadFS(m, discover.Location{Root: "mem"}, discover.Options{})
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("Load error %v, LoadFS error %v", werr, gerr)
			}
			if werr != nil {
				if werr.Error() != gerr.Error() {
					t.Fatalf("Load: %v\nLoadFS: %v", werr, gerr)
				}
				return
			}
			if got.Digest != want.Digest {
				t.Fatalf("digest %s, Load's %s", got.Digest, want.Digest)
			}
			if diff := cmp.Diff(errorStrings(discover.Validate(root)), errorStrings(discover.ValidateFS(m, discover.Options{}))); diff != "" {
				t.Fatalf("ValidateFS and Validate disagree (-Validate +ValidateFS):\n%s", diff)
			}
		})
	}
}

// A bundle cannot reach outside itself: a profile root or skill source
// that leaves it is path_escape or config_invalid, never a read.
func TestLoadFSConfined(t *testing.T) {
	for name, yaml := range map[string]string{
		"dotdot":      "profile_roots: [../agents]\n",
		"abs-profile": "profile_roots: [/etc]\n",
		"abs-source":  "sources:\n  - {name: ext, root: /etc, required: true}\n",
	} {
		t.Run(name, func(t *testing.T) {
			m := fstest.MapFS{"rolecall.yaml": {Data: []byte(yaml)}}
			_, err := discover.LoadFS(m, discover.Location{Root: "mem"}, discover.Options{})
			if err == nil {
				// A skill source's problem fails no load; validation lists it.
				p := discover.ValidateFS(m, discover.Options{})
				if len(p) == 0 {
					t.Fatal("no problem reported")
				}
				err = p[0]
			}
			var de *discover.Error
			if !errors.As(err, &de) || (de.Code != resolve.CodePathEscape && de.Code != resolve.CodeConfigInvalid) {
				t.Fatalf("err = %v", err)
			}
			t.Log(err)
		})
	}
}

func TestLoadFSLocation(t *testing.T) {
	s, err := discover.LoadFS(fstest.MapFS{}, discover.Location{Root: "nats:X", Source: discover.ConfigFromNATS, Revision: 7}, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Revision != 7 || s.ConfigSource != "nats" || s.Root != "nats:X" {
		t.Fatalf("%s %s/%d", s.Root, s.ConfigSource, s.Revision)
	}
}
