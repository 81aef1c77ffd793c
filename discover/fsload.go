package discover

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Location says where a configuration read from an fs.FS came from: what
// the snapshot reports as Root, ConfigSource and Revision.
type Location struct {
	Root     string // e.g. "nats:ROLECALL_CONFIG"
	Source   string // ConfigFromNATS for a bundle; "" means ConfigFromFiles
	Revision uint64
}

// LoadFS is Load over a file system instead of a directory: the same
// decoders, the same order and the same checks, for a configuration that
// lives in memory (a config bundle from NATS). fsys is trusted to confine itself: names are
// checked with fs.ValidPath, so no ".." or absolute path reaches it, but
// it must not follow links out of itself (an in-memory fs has none; for
// a directory on disk use Load, which goes through os.Root). A skill
// source with an absolute root is refused, since nothing outside fsys may
// be read.
func LoadFS(fsys fs.FS, at Location, opts Options) (*Snapshot, error) {
	l := loadFrom(at.Root, fsys, opts, nil)
	if len(l.errs) > 0 {
		return nil, l.errs[0]
	}
	s := l.snapshot()
	if at.Source != "" {
		s.ConfigSource = at.Source
	}
	s.Revision = at.Revision
	return s, nil
}

// ValidateFS is ValidateWith over a file system (see LoadFS).
func ValidateFS(fsys fs.FS, opts Options) []*Error {
	return validateLoaded(loadFrom("", fsys, opts, nil))
}

// errOutside has the text os.Root gives a path that leaves it, so
// isEscape and fileError treat an fs.FS the same way.
var errOutside = errors.New("path escapes from parent")

// The methods below are the few operations discovery performs on a tree;
// each goes to os.Root for a directory and to fs.FS for a bundle. Names
// are slash-separated.

func (t tree) stat(name string) (fs.FileInfo, error) {
	if t.fsys == nil {
		return t.root.Stat(filepath.FromSlash(name))
	}
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: errOutside}
	}
	return fs.Stat(t.fsys, name)
}

// open opens a file for reading. On disk the open is non-blocking, so a
// FIFO swapped in after the Stat cannot block.
func (t tree) open(name string) (fs.File, error) {
	if t.fsys == nil {
		return t.root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: errOutside}
	}
	return t.fsys.Open(name)
}

func (t tree) readDir(dir string) ([]fs.DirEntry, error) {
	if t.fsys == nil {
		f, err := t.root.Open(filepath.FromSlash(dir))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return f.ReadDir(-1)
	}
	if !fs.ValidPath(dir) {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: errOutside}
	}
	return fs.ReadDir(t.fsys, dir)
}

// sub opens dir as a tree of its own, confined to dir, shown under
// prefix. The caller closes the os.Root it may hold (tree.close).
func (t tree) sub(dir, prefix string) (tree, error) {
	s := tree{prefix: prefix, hardLinks: t.hardLinks}
	if t.fsys == nil {
		r, err := t.root.OpenRoot(filepath.FromSlash(dir))
		s.root = r
		return s, err
	}
	if !fs.ValidPath(dir) {
		return s, &fs.PathError{Op: "open", Path: dir, Err: errOutside}
	}
	f, err := fs.Sub(t.fsys, dir)
	s.fsys = f
	return s, err
}

// openedRoots are the os.Roots a scan opened (profile roots, skill
// sources), which its caller closes.
type openedRoots []*os.Root

// add keeps t's os.Root for closing; a tree over an fs.FS holds nothing
// to close.
func (rs *openedRoots) add(t tree) {
	if t.root != nil {
		*rs = append(*rs, t.root)
	}
}

func (rs openedRoots) close() {
	for _, r := range rs {
		r.Close()
	}
}
