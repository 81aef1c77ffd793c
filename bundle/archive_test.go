package bundle_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/bundle"
)

// tarOf writes members as given, hostile or not.
func tarOf(t testing.TB, members ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range members {
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		body := []byte(strings.Repeat("x", int(h.Size)))
		if h.Typeflag != tar.TypeReg {
			body = nil
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sparseTar is an archive of 20 members with the GNU.sparse.<key> PAX
// records given (tar.Writer writes no such records itself, so they are
// written under another name of the same length and renamed).
func sparseTar(t testing.TB, records map[string]string) []byte {
	t.Helper()
	pax := map[string]string{}
	for k, v := range records {
		pax["XYZ.sparse."+k] = v
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range 20 {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: fmt.Sprintf("skills/s%02d.md", i), Format: tar.FormatPAX, PAXRecords: pax}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(buf.Bytes(), []byte("XYZ.sparse."), []byte("GNU.sparse."))
}

func TestReadArchiveHostile(t *testing.T) {
	// Reading happens in memory: the working directory and its parent stay
	// as they were, whatever the members' paths say.
	work := filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	defer func() {
		for _, d := range []string{work, filepath.Dir(work)} {
			ents, _ := os.ReadDir(d)
			if len(ents) > 1 || len(ents) == 1 && ents[0].Name() != "work" {
				t.Errorf("%s holds %v after reading hostile archives", d, ents)
			}
		}
	}()
	ok := tarOf(t, &tar.Header{Name: "packs/a.yaml", Size: 3})
	cases := []struct {
		name string
		data []byte
		want string
		code bundle.Code
	}{
		{"dotdot", tarOf(t, &tar.Header{Name: "../evil", Size: 1}), "", bundle.CodeUnsafePath},
		{"dotdot-inner", tarOf(t, &tar.Header{Name: "packs/../../evil", Size: 1}), "", bundle.CodeUnsafePath},
		{"absolute", tarOf(t, &tar.Header{Name: "/etc/passwd", Size: 1}), "", bundle.CodeUnsafePath},
		{"backslash", tarOf(t, &tar.Header{Name: "..\\evil", Size: 1}), "", bundle.CodeUnsafePath},
		{"dot-slash", tarOf(t, &tar.Header{Name: "./packs/a.yaml", Size: 1}), "", bundle.CodeUnsafePath},
		{"symlink", tarOf(t, &tar.Header{Name: "packs/a.yaml", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}), "", bundle.CodeLink},
		{"hardlink", tarOf(t, &tar.Header{Name: "packs/a.yaml", Typeflag: tar.TypeLink, Linkname: "x"}), "", bundle.CodeLink},
		{"dir", tarOf(t, &tar.Header{Name: "packs", Typeflag: tar.TypeDir}), "", bundle.CodeEntryType},
		{"fifo", tarOf(t, &tar.Header{Name: "p", Typeflag: tar.TypeFifo}), "", bundle.CodeEntryType},
		{"duplicate", tarOf(t, &tar.Header{Name: "a", Size: 1}, &tar.Header{Name: "a", Size: 2}), "", bundle.CodeDuplicate},
		{"file-and-dir", tarOf(t, &tar.Header{Name: "a", Size: 1}, &tar.Header{Name: "a/b", Size: 2}), "", bundle.CodeDuplicate},
		{"oversize", tarOf(t, &tar.Header{Name: "big", Size: bundle.MaxMemberSize + 1}), "", bundle.CodeTooLarge},
		{"digest", ok, "sha256:" + strings.Repeat("0", 64), bundle.CodeDigestMismatch},
		{"garbage", []byte("not a tar archive at all, but long enough to look like a header block? no"), "", bundle.CodeMalformed},
		{"truncated", ok[:514], "", bundle.CodeMalformed},
		// A sparse member reads as MaxMemberSize bytes of zeros from a
		// few hundred bytes: 100,000 of them would take 100 GiB.
		{"sparse", sparseTar(t, map[string]string{"major": "0", "minor": "1", "numblocks": "1", "map": "0,0", "size": "1048576"}), "", bundle.CodeEntryType},
		{"sparse-unversioned", sparseTar(t, map[string]string{"numblocks": "1", "map": "0,0", "size": "1048576"}), "", bundle.CodeEntryType},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := bundle.ReadArchive(c.data, c.want)
			if !errors.Is(err, &bundle.Error{Code: c.code}) {
				t.Fatalf("err = %v (archive %v), want %s", err, a != nil, c.code)
			}
		})
	}
	if _, err := bundle.ReadArchive(ok, bundle.Digest(ok)); err != nil {
		t.Fatal(err)
	}
}

// Build is deterministic: the same files give the same bytes whatever
// order, times or owners they had on disk, and ReadArchive gives them
// back.
func TestBuildDeterministic(t *testing.T) {
	files := map[string][]byte{"rolecall.yaml": []byte("default_pack: x\n"), "packs/x.yaml": []byte("name: x\n"), "agents/a/a.md": []byte("---\n---\n")}
	a1, err := bundle.Build(files)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for p, data := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(dir, ".hidden"), []byte("skipped"), 0o600)
	_ = os.Mkdir(filepath.Join(dir, ".git"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("skipped"), 0o600)
	a2, err := bundle.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a1.Digest != a2.Digest || !bytes.Equal(a1.Data, a2.Data) {
		t.Fatalf("Build %s, Pack %s", a1.Digest, a2.Digest)
	}
	back, err := bundle.ReadArchive(a1.Data, a1.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(back.FS.Paths(), ","); got != "agents/a/a.md,packs/x.yaml,rolecall.yaml" {
		t.Fatalf("paths %s", got)
	}
	tr := tar.NewReader(bytes.NewReader(a1.Data))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.ModTime.Unix() != 0 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Mode != 0o644 {
			t.Fatalf("member %s: %+v", h.Name, h)
		}
	}
}

// Pack never reads outside the root: a symlink out is refused, one to a
// file inside is packed as that file.
func TestPackSymlinks(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	_ = os.MkdirAll(filepath.Join(root, "packs"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "secret"), []byte("s"), 0o600)
	_ = os.WriteFile(filepath.Join(root, "packs", "a.yaml"), []byte("name: a\n"), 0o600)
	if err := os.Symlink("a.yaml", filepath.Join(root, "packs", "b.yaml")); err != nil {
		t.Fatal(err)
	}
	a, err := bundle.Pack(root)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := a.FS.ReadFile("packs/b.yaml"); string(d) != "name: a\n" {
		t.Fatalf("b.yaml = %q", d)
	}
	if err := os.Symlink("../../secret", filepath.Join(root, "packs", "c.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.Pack(root); !errors.Is(err, &bundle.Error{Code: bundle.CodeUnsafePath}) {
		t.Fatalf("err = %v", err)
	}
	_ = os.Remove(filepath.Join(root, "packs", "c.yaml"))

	// A symlink that leads to no file is a link problem, not a malformed
	// archive (it was bundle_malformed).
	for _, tc := range []struct {
		name  string
		links [][2]string // target, link
		code  bundle.Code
	}{
		{"dangling", [][2]string{{"nowhere.yaml", "d.yaml"}}, bundle.CodeLink},
		{"loop", [][2]string{{"f.yaml", "e.yaml"}, {"e.yaml", "f.yaml"}}, bundle.CodeLink},
		{"to a directory", [][2]string{{"..", "g.yaml"}}, bundle.CodeLink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, l := range tc.links {
				p := filepath.Join(root, "packs", l[1])
				if err := os.Symlink(l[0], p); err != nil {
					t.Fatal(err)
				}
				defer os.Remove(p)
			}
			if _, err := bundle.Pack(root); !errors.Is(err, &bundle.Error{Code: tc.code}) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
		})
	}
}

// FuzzReadArchive: whatever the bytes, ReadArchive returns a typed error
// or an archive whose every path is safe.
func FuzzReadArchive(f *testing.F) {
	f.Add(tarOf(f, &tar.Header{Name: "packs/a.yaml", Size: 3}))
	f.Add(tarOf(f, &tar.Header{Name: "../x", Size: 1}))
	f.Add(tarOf(f, &tar.Header{Name: "a", Typeflag: tar.TypeSymlink, Linkname: "/"}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := bundle.ReadArchive(data, "")
		if err != nil {
			var be *bundle.Error
			if !errors.As(err, &be) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		for _, p := range a.FS.Paths() {
			if strings.Contains(p, "..") && strings.Contains("/"+p+"/", "/../") || strings.HasPrefix(p, "/") {
				t.Fatalf("unsafe path %q accepted", p)
			}
		}
		// What was read builds back to an archive that reads the same
		// files, and builds to the same bytes every time. (Reading a.Data
		// again read the input a second time, which proved nothing.)
		files := map[string][]byte{}
		for _, p := range a.FS.Paths() {
			b, err := a.FS.ReadFile(p)
			if err != nil {
				t.Fatalf("ReadFile(%q) of a listed path: %v", p, err)
			}
			files[p] = b
		}
		built, err := bundle.Build(files)
		if err != nil {
			t.Fatalf("Build of what ReadArchive accepted: %v", err)
		}
		back, err := bundle.ReadArchive(built.Data, built.Digest)
		if err != nil {
			t.Fatalf("ReadArchive of what Build wrote: %v", err)
		}
		if !slices.Equal(a.FS.Paths(), back.FS.Paths()) {
			t.Fatalf("paths %q after a round trip, %q read", back.FS.Paths(), a.FS.Paths())
		}
		for p, want := range files {
			if got, err := back.FS.ReadFile(p); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s after a round trip: %q, %v; want %q", p, got, err, want)
			}
		}
		if again, err := bundle.Build(files); err != nil || again.Digest != built.Digest {
			t.Fatalf("building the same files again: %v, digest %v; want %s", err, again, built.Digest)
		}
	})
}
