package discover

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/rolecall/rolecall/resolve"
)

// The layout of a config root (docs/CONFIG.md).
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
	fsys   fs.FS // instead of root: a configuration in memory (fsload.go)
	prefix string
	// hardLinks: files with several links are read (hardlink.go).
	hardLinks bool
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
		return &Error{Code: resolve.CodePathEscape, File: display, Message: "leads outside its trusted root through a symlink"}
	case errors.Is(err, fs.ErrNotExist):
		msg = "does not exist"
	case errors.Is(err, syscall.ELOOP):
		msg = "has too many levels of symbolic links"
	case errors.Is(err, fs.ErrPermission):
		msg = "is not readable: permission denied"
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		msg = "cannot be read: " + err.Error()
	}
	return &Error{Code: code, File: display, Message: msg}
}

// readFile reads one regular file of at most MaxFileSize through its root.
// The mode is checked with Stat before opening, so a FIFO or device is
// refused without being opened; the open is non-blocking and re-checked
// with fstat, so a FIFO swapped in between cannot block either.
func readFile(t tree, name string, code resolve.Code) ([]byte, *Error) {
	return readFileLimit(t, name, code, MaxFileSize)
}

// readFileLimit is readFile with another size limit.
func readFileLimit(t tree, name string, code resolve.Code, limit int64) ([]byte, *Error) {
	display := t.display(name)
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return nil, &Error{Code: resolve.CodePathEscape, File: display, Message: "leaves its trusted root"}
	}
	fi, err := t.stat(name)
	if err != nil {
		return nil, fileError(code, display, err)
	}
	if e := checkRegular(code, display, fi, limit); e != nil {
		return nil, e
	}
	f, err := t.open(name)
	if err != nil {
		return nil, fileError(code, display, err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, fileError(code, display, err)
	}
	if e := checkRegular(code, display, fi, limit); e != nil {
		return nil, e
	}
	if e := t.checkLinks(display, fi); e != nil {
		return nil, e
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fileError(code, display, err)
	}
	if int64(len(data)) > limit {
		return nil, tooBig(code, display, limit)
	}
	return data, nil
}

func checkRegular(code resolve.Code, display string, fi fs.FileInfo, limit int64) *Error {
	if !fi.Mode().IsRegular() {
		return &Error{Code: code, File: display, Message: fmt.Sprintf("is not a regular file (mode %s); only regular files are read", fi.Mode().Type())}
	}
	if fi.Size() > limit {
		return tooBig(code, display, limit)
	}
	return nil
}

func tooBig(code resolve.Code, display string, limit int64) *Error {
	size := fmt.Sprintf("%d KiB", limit>>10)
	if limit >= 1<<20 {
		size = fmt.Sprintf("%d MiB", limit>>20)
	}
	return &Error{Code: code, File: display, Message: fmt.Sprintf("is larger than the %d-byte (%s) limit", limit, size)}
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
	// save, when set, keeps every stat and listing of this scan; use, when
	// set, answers from a kept scan instead of the file system (scanMemo).
	save, use *scanMemo
}

// scanMemo is one scan's stats and directory listings, by display path. A
// Source's sweep keeps them, and the load that follows a sweep which saw a
// change answers from them instead of statting and listing every file a
// second time: the load then describes the tree as the sweep saw it, a
// few milliseconds earlier, which is what a load that began then would
// have seen. Only paths the sweep covered are answered; a path that a
// changed rolecall.yaml adds is scanned afresh.
//
// The Source also keeps the last scan's memo: when file events name what
// changed (notify.go), the next load answers from it all but those paths
// (changed), which it stats again, and the listings of their
// directories, which it patches (relist).
type scanMemo struct {
	stats map[string]statResult
	lists map[string]listResult
	// dirs maps each directory this scan read on disk (listed, or holding
	// a path it stat'ed) to its display path: what a watcher watches.
	dirs map[string]string
	// links: the scan met a symbolic link. An edit behind a link changes
	// no watched directory, so events then only trigger full sweeps.
	links bool
	// changed is what file events named since the scan; none of it is
	// reused. Set only on the memo a load on file events uses.
	changed *changes
}

// changes are the display paths file events named: each one changed (a
// directory with everything in it), and dirs holds their directories,
// whose listings are read again.
type changes struct {
	paths []string
	dirs  map[string]bool
}

func newChanges(paths []string) *changes {
	c := &changes{paths: paths, dirs: map[string]bool{}}
	for _, p := range paths {
		c.dirs[path.Dir(p)] = true
	}
	return c
}

// holds reports whether the directory dir holds a changed path.
func (c *changes) holds(dir string) bool { return c != nil && c.dirs[dir] }

// has reports whether key is a changed path or lies below one.
func (c *changes) has(key string) bool {
	if c == nil {
		return false
	}
	for _, p := range c.paths {
		if key == p || strings.HasPrefix(key, p) && key[len(p)] == '/' {
			return true
		}
	}
	return false
}

type statResult struct {
	fi  fs.FileInfo
	err error
}

type listResult struct {
	ents []fs.DirEntry
	err  *Error
}

func newScanMemo() *scanMemo {
	return &scanMemo{stats: map[string]statResult{}, lists: map[string]listResult{}, dirs: map[string]string{}}
}

// size is how many stamps a scan answered from m takes, about.
func (m *scanMemo) size() int {
	n := len(m.stats)
	for _, r := range m.lists {
		n += len(r.ents)
	}
	return n
}

// withChanges is m for a scan that trusts everything in it but what the
// events named.
func (m *scanMemo) withChanges(c *changes) *scanMemo {
	u := *m
	u.changed = c
	return &u
}

// keepDir notes on save a directory the scan read from.
func (s *scanner) keepDir(t tree, dir string) {
	if s.save == nil || t.root == nil {
		return
	}
	s.save.dirs[filepath.Join(t.root.Name(), filepath.FromSlash(dir))] = t.display(dir)
}

func (s *scanner) stat(t tree, name string) (fs.FileInfo, error) {
	key := t.display(name)
	r, kept := statResult{}, false
	if s.use != nil && !s.use.changed.has(key) {
		r, kept = s.use.stats[key]
	}
	if !kept {
		r.fi, r.err = s.statFS(t, name)
	}
	if s.save != nil {
		s.save.stats[key] = r
		s.keepDir(t, path.Dir(name))
	}
	s.record(key, r.fi, r.err)
	return r.fi, r.err
}

// statFS follows a symbolic link as t.stat does; on disk it looks with
// lstat first (the same one system call when there is no link), so the
// scan knows whether it met one.
func (s *scanner) statFS(t tree, name string) (fs.FileInfo, error) {
	if t.root == nil {
		return t.stat(name)
	}
	fi, err := t.root.Lstat(filepath.FromSlash(name))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return fi, err
	}
	if s.save != nil {
		s.save.links = true
	}
	return t.stat(name)
}

// statEntry is stat for an entry of a directory list just read. A symlink
// is stat'ed through the root, which follows it only while it stays
// inside; anything else is what the listing already lstat'ed (or one
// lstat relative to the open directory), since lstat and stat agree on
// it. That is one system call per file instead of os.Root's walk of every
// path component, which on a root of 12,000 files is most of a sweep.
// name is the entry's path in t and display its display path (the
// caller has both).
func (s *scanner) statEntry(t tree, name, display string, e fs.DirEntry) (fs.FileInfo, error) {
	if e.Type()&fs.ModeSymlink != 0 {
		if s.save != nil {
			s.save.links = true
		}
		return s.stat(t, name)
	}
	fi, err := e.Info()
	if err != nil {
		// Removed since the listing, or unreadable: let the root say how.
		return s.stat(t, name)
	}
	// Not kept in save: a load that reuses the listing gets the same
	// entry back, whose Info is already filled in.
	s.record(display, fi, nil)
	return fi, nil
}

func (s *scanner) record(display string, fi fs.FileInfo, err error) {
	st := stamp{path: display}
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
}

// list returns the entries of dir sorted by name, skipping dot-entries
// (editor temporaries and the ..data links of Kubernetes ConfigMap
// mounts). A missing dir gives (nil, false, nil).
func (s *scanner) list(t tree, dir string, code resolve.Code) ([]fs.DirEntry, bool, *Error) {
	fi, err := s.stat(t, dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, nil
	case err != nil:
		return nil, true, fileError(code, t.display(dir), err)
	case !fi.IsDir():
		return nil, true, &Error{Code: code, File: t.display(dir), Message: "is not a directory"}
	}
	display := t.display(dir)
	key := display + "\x00" + string(code)
	var ents []fs.DirEntry
	var lerr *Error
	r, kept := listResult{}, false
	if s.use != nil {
		r, kept = s.use.lists[key]
	}
	switch {
	case !kept || s.use.changed.has(display):
		ents, lerr = s.readDir(t, dir, code)
	case !s.use.changed.holds(display):
		ents, lerr = r.ents, r.err
	case r.err == nil && t.root != nil:
		ents, lerr = s.relist(t, dir, code, r.ents)
	default:
		ents, lerr = s.readDir(t, dir, code)
	}
	if s.save != nil {
		s.save.lists[key] = listResult{ents, lerr}
		s.keepDir(t, dir)
	}
	return ents, true, lerr
}

// readDir lists dir's entries sorted by name, without dot-entries.
func (s *scanner) readDir(t tree, dir string, code resolve.Code) ([]fs.DirEntry, *Error) {
	ents, err := t.readDir(dir)
	if err != nil {
		return nil, fileError(code, t.display(dir), err)
	}
	out := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// relist is readDir for a directory holding paths the events named,
// given its last listing: events name every entry added, removed or
// changed in a watched directory, so only those are looked at again (one
// lstat each) and the rest of the listing stays. readDir would lstat
// every entry: 10,000 system calls for a directory of 10,000 profiles.
func (s *scanner) relist(t tree, dir string, code resolve.Code, old []fs.DirEntry) ([]fs.DirEntry, *Error) {
	display := t.display(dir)
	out := slices.Clone(old)
	for _, p := range s.use.changed.paths {
		n := path.Base(p)
		if path.Dir(p) != display || strings.HasPrefix(n, ".") {
			continue
		}
		i, found := slices.BinarySearchFunc(out, n, func(e fs.DirEntry, n string) int { return strings.Compare(e.Name(), n) })
		fi, err := t.root.Lstat(filepath.FromSlash(path.Join(dir, n)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if found {
				out = slices.Delete(out, i, i+1)
			}
		case err != nil:
			return nil, fileError(code, display, err)
		case found:
			out[i] = fs.FileInfoToDirEntry(fi)
		default:
			out = slices.Insert(out, i, fs.FileInfoToDirEntry(fi))
		}
	}
	return out, nil
}

// cand is a file the scan found and the load will read.
type cand struct {
	t    tree
	name string // slash path inside t
	path string // display path
	stem string // the name it is read as (the preamble: as rolecall.yaml names it)
	err  *Error // a problem found while scanning (escape, not regular…)
}

// files lists dir's files ending in ext (followed through symlinks); a
// missing dir has none.
func (s *scanner) files(t tree, dir, ext string, code resolve.Code) ([]cand, *Error) {
	ents, _, err := s.list(t, dir, code)
	if err != nil {
		return nil, err
	}
	var out []cand
	for _, e := range ents {
		n := e.Name()
		stem, isExt := strings.CutSuffix(n, ext)
		if !isExt {
			continue
		}
		name := path.Join(dir, n)
		c := cand{t: t, name: name, path: t.display(name), stem: stem}
		if _, err := s.statEntry(t, name, c.path, e); err != nil {
			c.err = fileError(code, c.path, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// profiles lists the profiles in dir of t: <name>.md files and
// <name>/<name>.md. Entries that are neither are ignored.
func (s *scanner) profiles(t tree, dir string) ([]cand, *Error) {
	code := resolve.CodeProfileInvalid
	ents, ok, err := s.list(t, dir, code)
	if err != nil || !ok {
		return nil, err
	}
	out := make([]cand, 0, len(ents))
	for _, e := range ents {
		n := e.Name()
		name := path.Join(dir, n)
		display := t.display(name)
		fi, err := s.statEntry(t, name, display, e)
		if err != nil {
			// Only report what would have been a profile.
			if strings.HasSuffix(n, mdExt) || isEscape(err) {
				out = append(out, cand{t: t, name: name, path: display, stem: strings.TrimSuffix(n, mdExt), err: fileError(code, display, err)})
			}
			continue
		}
		if fi.IsDir() {
			inner := path.Join(name, n+mdExt)
			c := cand{t: t, name: inner, path: t.display(inner), stem: n}
			if _, err := s.stat(t, inner); errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				c.err = fileError(code, c.path, err)
			}
			out = append(out, c)
			continue
		}
		if stem, isMD := strings.CutSuffix(n, mdExt); isMD {
			out = append(out, cand{t: t, name: name, path: display, stem: stem})
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
	p.packs, err = s.files(t, packDir, packExt, resolve.CodePackInvalid)
	add(err)
	if _, ok, err := s.list(t, catalogDir, resolve.CodeCatalogInvalid); ok || err != nil {
		p.hasCatalog = true
		add(err)
		if err == nil {
			p.roles, err = s.files(t, rolesDir, mdExt, resolve.CodeCatalogInvalid)
			add(err)
			p.modes, err = s.files(t, modesDir, mdExt, resolve.CodeCatalogInvalid)
			add(err)
		}
	}
	p.agents, err = s.profiles(t, profileDir)
	add(err)
	return p
}

// scanPaths are the rolecall.yaml values that extend the scan, and the
// ${file:…} targets the last load read (sorted).
type scanPaths struct {
	sources  []SkillSource
	roots    []string
	preamble string
	files    []string
	stamps   int // how many stamps the load took: the next sweep's capacity
}

// configuredScan is the part of the layout named by rolecall.yaml.
type configuredScan struct {
	roots    [][]cand // per profile root, in order
	preamble *cand
	errs     []*Error
	opened   openedRoots
}

// scanConfigured opens each profile root as its own os.Root (inside the
// config root) and lists it. The caller closes the opened roots.
func (s *scanner) scanConfigured(t tree, sp scanPaths, lines map[string]int) configuredScan {
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
		var sub tree
		if e == nil {
			sub, err = t.sub(r, t.display(r))
			if err != nil {
				e = fileError(resolve.CodeConfigInvalid, t.display(r), err)
			}
		}
		if e != nil {
			// Report at the rolecall.yaml key and line that named the root.
			key := fmt.Sprintf("profile_roots[%d]", i)
			p.errs = append(p.errs, &Error{
				Code: e.Code, File: ConfigFile, Line: lines[key], Key: key,
				Message: fmt.Sprintf("key %q: profile root %q %s", key, r, e.Message),
			})
			p.roots = append(p.roots, nil)
			continue
		}
		p.opened.add(sub)
		cands, perr := s.profiles(sub, ".")
		if perr != nil {
			p.errs = append(p.errs, perr)
		}
		p.roots = append(p.roots, cands)
	}
	if sp.preamble != "" {
		c := cand{t: t, name: sp.preamble, path: t.display(sp.preamble), stem: sp.preamble}
		if _, err := s.stat(t, sp.preamble); err != nil {
			c.err = fileError(resolve.CodeConfigInvalid, c.path, err)
		}
		p.preamble = &c
	}
	for _, f := range sp.files {
		s.stat(t, f)
	}
	return p
}
