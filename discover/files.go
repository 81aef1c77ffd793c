package discover

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/rolecall/rolecall/resolve"
)

// The layout of a config root (DESIGN.md §5).
const (
	packDir    = "packs"
	profileDir = "agents"
	catalogDir = "catalog"
	rolesDir   = "catalog/roles"
	modesDir   = "catalog/modes"
	packExt    = ".yaml"
	mdExt      = ".md"
)

// tree is one trusted root: the config root itself or a profile root
// opened from it. prefix is the tree's path relative to the config root,
// so every display path is config-root-relative.
type tree struct {
	root   *os.Root
	prefix string
}

func (t tree) display(name string) string { return path.Join(t.prefix, name) }

// isEscape reports os.Root's refusal of a path or symlink that leaves the
// root. os.Root has no exported sentinel for it (checked on Go 1.26), so the
// inner error's text is compared; names are also checked with
// filepath.IsLocal before any call, so this covers symlinks only.
func isEscape(err error) bool {
	var pe *fs.PathError
	for errors.As(err, &pe) {
		if pe.Err != nil && pe.Err.Error() == "path escapes from parent" {
			return true
		}
		err = pe.Err
		pe = nil
	}
	return false
}

// fileError turns an I/O error on display into a typed *Error.
func fileError(code resolve.Code, display string, err error) *Error {
	var msg string
	switch {
	case isEscape(err):
		return &Error{Code: resolve.CodePathEscape, File: display, Message: "the path or a symlink on it leads outside its trusted root"}
	case errors.Is(err, fs.ErrNotExist):
		msg = "does not exist"
	case errors.Is(err, syscall.ELOOP):
		msg = "too many levels of symbolic links"
	case errors.Is(err, fs.ErrPermission):
		msg = "permission denied"
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		msg = "cannot read: " + err.Error()
	}
	return &Error{Code: code, File: display, Message: msg}
}

// readFile reads one regular file of at most MaxFileSize through its root.
// The mode is checked with Stat before opening, so a FIFO or device is
// refused without being opened; the open is non-blocking and re-checked
// with fstat, so a FIFO swapped in between cannot block either.
func readFile(t tree, name string, code resolve.Code) ([]byte, *Error) {
	display := t.display(name)
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return nil, &Error{Code: resolve.CodePathEscape, File: display, Message: "the path leaves its trusted root"}
	}
	osName := filepath.FromSlash(name)
	fi, err := t.root.Stat(osName)
	if err != nil {
		return nil, fileError(code, display, err)
	}
	if e := checkRegular(code, display, fi); e != nil {
		return nil, e
	}
	f, err := t.root.OpenFile(osName, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fileError(code, display, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fileError(code, display, err)
	}
	if e := checkRegular(code, display, fi); e != nil {
		return nil, e
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fileError(code, display, err)
	}
	if len(data) > MaxFileSize {
		return nil, tooBig(code, display)
	}
	return data, nil
}

func checkRegular(code resolve.Code, display string, fi fs.FileInfo) *Error {
	if !fi.Mode().IsRegular() {
		return &Error{Code: code, File: display, Message: fmt.Sprintf("is not a regular file (mode %s); only regular files are read", fi.Mode().Type())}
	}
	if fi.Size() > MaxFileSize {
		return tooBig(code, display)
	}
	return nil
}

func tooBig(code resolve.Code, display string) *Error {
	return &Error{Code: code, File: display, Message: fmt.Sprintf("is larger than the %d-byte (1 MiB) limit", MaxFileSize)}
}

// stamp is what the stat sweep compares: one path's kind and, for files,
// size, mtime, inode and ctime. kind: 'f' regular file, 'd' directory,
// '-' missing, 'o' other, 'e' error.
type stamp struct {
	path  string
	kind  byte
	size  int64
	mtime int64
	ino   uint64
	ctime int64
	err   string
}

// scanner stats and lists a config root. Load and the Source's sweep run
// the same scan, so the stamps of a sweep equal those of the Load that saw
// the same files.
type scanner struct {
	stamps []stamp
}

func (s *scanner) stat(t tree, name string) (fs.FileInfo, error) {
	fi, err := t.root.Stat(filepath.FromSlash(name))
	st := stamp{path: t.display(name)}
	switch {
	case err == nil:
		st.kind = 'o'
		switch {
		case fi.Mode().IsRegular():
			st.kind = 'f'
			st.size, st.mtime = fi.Size(), fi.ModTime().UnixNano()
			st.ino, st.ctime = sysStat(fi)
		case fi.IsDir():
			st.kind = 'd'
		}
	case errors.Is(err, fs.ErrNotExist):
		st.kind = '-'
	default:
		st.kind, st.err = 'e', err.Error()
	}
	s.stamps = append(s.stamps, st)
	return fi, err
}

// list returns the sorted names in dir, skipping dot-entries (editor
// temporaries and the ..data links of Kubernetes ConfigMap mounts). A
// missing dir gives (nil, false, nil).
func (s *scanner) list(t tree, dir string, code resolve.Code) ([]string, bool, *Error) {
	fi, err := s.stat(t, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, true, fileError(code, t.display(dir), err)
	case !fi.IsDir():
		return nil, true, &Error{Code: code, File: t.display(dir), Message: "is not a directory"}
	}
	f, err := t.root.Open(filepath.FromSlash(dir))
	if err != nil {
		return nil, true, fileError(code, t.display(dir), err)
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, true, fileError(code, t.display(dir), err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names, true, nil
}

// cand is a file the scan found and the load will read.
type cand struct {
	t    tree
	name string // slash path inside t
	path string // display path
	stem string
	err  *Error // a problem found while scanning (escape, not regular…)
}

// files lists dir's files ending in ext (followed through symlinks).
func (s *scanner) files(t tree, dir, ext string, code resolve.Code) ([]cand, bool, *Error) {
	names, ok, err := s.list(t, dir, code)
	if err != nil || !ok {
		return nil, ok, err
	}
	var out []cand
	for _, n := range names {
		stem, isExt := strings.CutSuffix(n, ext)
		if !isExt {
			continue
		}
		c := cand{t: t, name: path.Join(dir, n), path: t.display(path.Join(dir, n)), stem: stem}
		if _, err := s.stat(t, c.name); err != nil {
			c.err = fileError(code, c.path, err)
		}
		out = append(out, c)
	}
	return out, true, nil
}

// profiles lists the profiles in dir of t: <name>.md files and
// <name>/<name>.md. Entries that are neither are ignored.
func (s *scanner) profiles(t tree, dir string) ([]cand, *Error) {
	code := resolve.CodeProfileInvalid
	names, ok, err := s.list(t, dir, code)
	if err != nil || !ok {
		return nil, err
	}
	var out []cand
	for _, n := range names {
		name := path.Join(dir, n)
		fi, err := s.stat(t, name)
		if err != nil {
			// Only report what would have been a profile.
			if strings.HasSuffix(n, mdExt) || isEscape(err) {
				out = append(out, cand{t: t, name: name, path: t.display(name), stem: strings.TrimSuffix(n, mdExt), err: fileError(code, t.display(name), err)})
			}
			continue
		}
		if fi.IsDir() {
			inner := path.Join(name, n+mdExt)
			if _, err := s.stat(t, inner); err != nil {
				if !errors.Is(err, fs.ErrNotExist) {
					out = append(out, cand{t: t, name: inner, path: t.display(inner), stem: n, err: fileError(code, t.display(inner), err)})
				}
				continue
			}
			out = append(out, cand{t: t, name: inner, path: t.display(inner), stem: n})
			continue
		}
		if stem, isMD := strings.CutSuffix(n, mdExt); isMD {
			out = append(out, cand{t: t, name: name, path: t.display(name), stem: stem})
		}
	}
	return out, nil
}

// fixedScan is the part of the layout that does not depend on
// rolecall.yaml.
type fixedScan struct {
	config     *cand // nil when there is no rolecall.yaml
	packs      []cand
	hasCatalog bool
	roles      []cand
	modes      []cand
	agents     []cand
	errs       []*Error
}

func (s *scanner) scanFixed(t tree) fixedScan {
	var p fixedScan
	add := func(e *Error) {
		if e != nil {
			p.errs = append(p.errs, e)
		}
	}
	if _, err := s.stat(t, ConfigFile); err == nil || !errors.Is(err, fs.ErrNotExist) {
		c := cand{t: t, name: ConfigFile, path: t.display(ConfigFile)}
		if err != nil {
			c.err = fileError(resolve.CodeConfigInvalid, c.path, err)
		}
		p.config = &c
	}
	var err *Error
	p.packs, _, err = s.files(t, packDir, packExt, resolve.CodePackInvalid)
	add(err)
	if _, ok, err := s.list(t, catalogDir, resolve.CodeCatalogInvalid); ok || err != nil {
		p.hasCatalog = true
		add(err)
		if err == nil {
			p.roles, _, err = s.files(t, rolesDir, mdExt, resolve.CodeCatalogInvalid)
			add(err)
			p.modes, _, err = s.files(t, modesDir, mdExt, resolve.CodeCatalogInvalid)
			add(err)
		}
	}
	p.agents, err = s.profiles(t, profileDir)
	add(err)
	return p
}

// scanPaths are the rolecall.yaml values that extend the scan.
type scanPaths struct {
	roots    []string
	preamble string
}

// configuredScan is the part of the layout named by rolecall.yaml.
type configuredScan struct {
	roots    [][]cand // per profile root, in order
	preamble *cand
	errs     []*Error
	opened   []*os.Root
}

// scanConfigured opens each profile root as its own os.Root (inside the
// config root) and lists it. The caller closes the opened roots.
func (s *scanner) scanConfigured(t tree, sp scanPaths, cfgFile string, lines map[string]int) configuredScan {
	var p configuredScan
	for i, r := range sp.roots {
		fi, err := s.stat(t, r)
		var e *Error
		switch {
		case err != nil:
			e = fileError(resolve.CodeConfigInvalid, t.display(r), err)
		case !fi.IsDir():
			e = &Error{Code: resolve.CodeConfigInvalid, File: t.display(r), Message: "is not a directory"}
		}
		var sub *os.Root
		if e == nil {
			sub, err = t.root.OpenRoot(filepath.FromSlash(r))
			if err != nil {
				e = fileError(resolve.CodeConfigInvalid, t.display(r), err)
			}
		}
		if e != nil {
			// Report at the rolecall.yaml line that named the root.
			p.errs = append(p.errs, &Error{
				Code: e.Code, File: cfgFile, Line: lines[fmt.Sprintf("profile_roots[%d]", i)], Key: "profile_roots",
				Message: fmt.Sprintf("profile root %q: %s", r, e.Message),
			})
			p.roots = append(p.roots, nil)
			continue
		}
		p.opened = append(p.opened, sub)
		cands, perr := s.profiles(tree{root: sub, prefix: t.display(r)}, ".")
		if perr != nil {
			p.errs = append(p.errs, perr)
		}
		p.roots = append(p.roots, cands)
	}
	if sp.preamble != "" {
		c := cand{t: t, name: sp.preamble, path: t.display(sp.preamble)}
		if _, err := s.stat(t, sp.preamble); err != nil {
			c.err = fileError(resolve.CodeConfigInvalid, c.path, err)
		}
		p.preamble = &c
	}
	return p
}
