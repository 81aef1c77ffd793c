package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/rolecall/rolecall/discover"
)

// Limits of a bundle. A member is one config file, so it has the loader's
// own limit; the rest bound the memory a worker spends on one bundle.
const (
	MaxMemberSize  = discover.MaxFileSize
	MaxMembers     = 100_000
	MaxArchiveSize = 128 << 20
)

// DigestPrefix starts every bundle digest: the sha256 of the archive bytes.
const DigestPrefix = "sha256:"

// Digest is the digest of archive bytes.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// Archive is a packed bundle: its bytes, their digest and the files in it.
type Archive struct {
	Data   []byte
	Digest string
	FS     *FS
}

// Build writes files as a deterministic tar archive: members sorted by
// path, regular files only (directories are implied), mode 0644, owner 0,
// no user or group names, time zero (the Unix epoch). Equal files give
// equal bytes, so the digest names the content.
func Build(files map[string][]byte) (*Archive, error) {
	if len(files) > MaxMembers {
		return nil, errf(CodeTooLarge, "", "%d files, more than the %d a bundle may hold", len(files), MaxMembers)
	}
	// In path order, so that of several bad files the same one is named.
	paths := slices.Sorted(maps.Keys(files))
	for _, p := range paths {
		if e := checkPath(p); e != nil {
			return nil, e
		}
		if len(files[p]) > MaxMemberSize {
			return nil, errf(CodeTooLarge, p, "%d bytes, more than the %d-byte limit of one file", len(files[p]), MaxMemberSize)
		}
	}
	if e := checkConflicts(files); e != nil {
		return nil, e
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: p, Size: int64(len(files[p])), Mode: 0o644,
			ModTime: time.Unix(0, 0), Format: tar.FormatPAX,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, errf(CodeMalformed, p, "%v", err)
		}
		if _, err := tw.Write(files[p]); err != nil {
			return nil, errf(CodeMalformed, p, "%v", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, errf(CodeMalformed, "", "%v", err)
	}
	if buf.Len() > MaxArchiveSize {
		return nil, errf(CodeTooLarge, "", "the archive is %d bytes, more than the %d-byte limit", buf.Len(), MaxArchiveSize)
	}
	return &Archive{Data: buf.Bytes(), Digest: Digest(buf.Bytes()), FS: newFS(files)}, nil
}

// checkConflicts finds a file that another path needs as a directory ("a"
// and "a/b"): such an archive has no single meaning. Paths are tried in
// order, so the one reported does not depend on the map's.
func checkConflicts(files map[string][]byte) *Error {
	for _, p := range slices.Sorted(maps.Keys(files)) {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := files[d]; ok {
				return errf(CodeDuplicate, d, "is a file and also the directory of %s", p)
			}
		}
	}
	return nil
}

// ReadArchive reads an archive into memory, refusing anything a
// deterministic Build would not write: a digest other than want (when want
// is not ""), a path with ".." or an absolute one, a link, a directory,
// a sparse file or other special member, a duplicate, a member over MaxMemberSize, more than
// MaxMembers members or more than MaxArchiveSize bytes. Every failure is a
// *Error. Nothing is written anywhere but memory.
func ReadArchive(data []byte, want string) (*Archive, error) {
	if len(data) > MaxArchiveSize {
		return nil, errf(CodeTooLarge, "", "the archive is %d bytes, more than the %d-byte limit", len(data), MaxArchiveSize)
	}
	got := Digest(data)
	if want != "" && got != want {
		return nil, errf(CodeDigestMismatch, "", "the archive's digest is %s, not the %s recorded", got, want)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, errf(CodeMalformed, "", "not a readable tar archive: %v", err)
		}
		name := hdr.Name
		if e := checkPath(name); e != nil {
			return nil, e
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			// A sparse file is a regular member whose holes the reader
			// fills with zeros: a few hundred bytes of archive would take
			// MaxMemberSize of memory, and the archive's size would bound
			// nothing.
			for k := range hdr.PAXRecords {
				if strings.HasPrefix(k, "GNU.sparse.") {
					return nil, errf(CodeEntryType, name, "a sparse file; a bundle holds regular files only")
				}
			}
		case tar.TypeSymlink, tar.TypeLink:
			return nil, errf(CodeLink, name, "a link (to %q); a bundle holds regular files only", hdr.Linkname)
		default:
			return nil, errf(CodeEntryType, name, "member type %q; a bundle holds regular files only", hdr.Typeflag)
		}
		if _, dup := files[name]; dup {
			return nil, errf(CodeDuplicate, name, "listed twice")
		}
		if len(files) >= MaxMembers {
			return nil, errf(CodeTooLarge, "", "more than %d members", MaxMembers)
		}
		if hdr.Size < 0 || hdr.Size > MaxMemberSize {
			return nil, errf(CodeTooLarge, name, "%d bytes, more than the %d-byte limit of one file", hdr.Size, MaxMemberSize)
		}
		body, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil || int64(len(body)) != hdr.Size {
			return nil, errf(CodeMalformed, name, "truncated member: %v", err)
		}
		files[name] = body
	}
	if e := checkConflicts(files); e != nil {
		return nil, e
	}
	return &Archive{Data: data, Digest: got, FS: newFS(files)}, nil
}

// Pack reads every regular file under root through os.Root (so nothing
// outside root is read, even through a symlink) and builds the archive.
// Dot-entries (.git, editor files, the ..data links of a Kubernetes
// ConfigMap) are skipped, as discovery skips them. A symlink to a file
// inside root is packed as that file; a symlink to a directory is refused,
// so a loop cannot make the walk endless, and so is one that leads to no
// file (dangling, or a loop of links).
func Pack(root string) (*Archive, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, errf(CodeNotFound, root, "cannot open the config root: %v", err)
	}
	defer r.Close()
	fsys := r.FS()
	files := map[string][]byte{}
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return errf(CodeMalformed, p, "%v", err)
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		fi, err := fs.Stat(fsys, p) // follows a symlink, inside root only
		switch {
		case err != nil && strings.Contains(err.Error(), "escapes"):
			return errf(CodeUnsafePath, p, "a symlink that leads outside the config root")
		case err != nil && d.Type()&fs.ModeSymlink != 0:
			return errf(CodeLink, p, "a symlink that leads to no file: %v", err)
		case err != nil:
			return errf(CodeMalformed, p, "%v", err)
		case fi.IsDir():
			return errf(CodeLink, p, "a symlink to a directory; copy the directory instead")
		case !fi.Mode().IsRegular():
			return errf(CodeEntryType, p, "not a regular file (mode %s)", fi.Mode().Type())
		case fi.Size() > MaxMemberSize:
			return errf(CodeTooLarge, p, "%d bytes, more than the %d-byte limit of one file", fi.Size(), MaxMemberSize)
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return errf(CodeMalformed, p, "%v", err)
		}
		files[p] = data
		return nil
	})
	if err != nil {
		var be *Error
		if errors.As(err, &be) {
			return nil, be
		}
		return nil, errf(CodeMalformed, "", "%v", err)
	}
	return Build(files)
}
