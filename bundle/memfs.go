package bundle

import (
	"bytes"
	"io"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// FS is a read-only file system in memory: the files of one bundle. It
// has no links, no owners and no times, so nothing read from it can lead
// anywhere else. It is safe for concurrent use.
type FS struct {
	// Every key is a valid fs path, so a lookup of an invalid name fails.
	files map[string][]byte
	dirs  map[string][]string // directory → sorted child names; "." is the top
}

// newFS builds an FS from clean, valid, non-conflicting paths (ReadArchive
// and Build check them first).
func newFS(files map[string][]byte) *FS {
	m := &FS{files: files, dirs: map[string][]string{".": nil}}
	for p := range files {
		// Each name joins its directory once: a directory already seen
		// was listed in its parent, and so were the parent's ancestors.
		for {
			dir := path.Dir(p)
			_, seen := m.dirs[dir]
			m.dirs[dir] = append(m.dirs[dir], path.Base(p))
			if seen {
				break
			}
			p = dir
		}
	}
	for d := range m.dirs {
		slices.Sort(m.dirs[d])
	}
	return m
}

// Paths lists the files, sorted.
func (m *FS) Paths() []string {
	return slices.Sorted(maps.Keys(m.files))
}

// Open implements fs.FS.
func (m *FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	info, ok := m.lookup(name)
	switch {
	case !ok:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case info.dir:
		ents, _ := m.ReadDir(name)
		return &memDir{info: info, ents: ents}, nil
	}
	return &memFile{info: info, r: bytes.NewReader(m.files[name])}, nil
}

// Stat implements fs.StatFS.
func (m *FS) Stat(name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if info, ok := m.lookup(name); ok {
		return info, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

// lookup is the info of a file or directory, and whether there is one.
func (m *FS) lookup(name string) (memInfo, bool) {
	if data, ok := m.files[name]; ok {
		return memInfo{name: path.Base(name), size: int64(len(data))}, true
	}
	_, ok := m.dirs[name]
	return memInfo{name: path.Base(name), dir: true}, ok
}

// ReadDir implements fs.ReadDirFS.
func (m *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	kids, ok := m.dirs[name]
	if !ok {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	out := make([]fs.DirEntry, 0, len(kids))
	for _, k := range kids {
		info, _ := m.lookup(path.Join(name, k))
		out = append(out, fs.FileInfoToDirEntry(info))
	}
	return out, nil
}

// ReadFile implements fs.ReadFileFS; the caller gets its own copy.
func (m *FS) ReadFile(name string) ([]byte, error) {
	data, ok := m.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
	}
	return bytes.Clone(data), nil
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	info memInfo
	r    *bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Read(b []byte) (int, error) { return f.r.Read(b) }
func (f *memFile) Close() error               { return nil }

type memDir struct {
	info memInfo
	ents []fs.DirEntry
	off  int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}
func (d *memDir) Close() error { return nil }

// ReadDir implements fs.ReadDirFile.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.ents[d.off:]
	if n <= 0 {
		d.off = len(d.ents)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return rest[:n], nil
}

// checkPath is the rule every member path obeys: slash-separated, relative,
// clean, no "..", no backslash (which another OS would read as a
// separator), no NUL, no empty or dot-named part.
func checkPath(p string) *Error {
	switch {
	case p == "":
		return errf(CodeUnsafePath, p, "an empty path")
	case strings.HasPrefix(p, "/"):
		return errf(CodeUnsafePath, p, "an absolute path")
	case strings.ContainsAny(p, "\\\x00"):
		return errf(CodeUnsafePath, p, "a backslash or NUL in a path")
	case !fs.ValidPath(p) || p == ".":
		return errf(CodeUnsafePath, p, "a path with \"..\", \".\" or an empty part")
	}
	return nil
}
