package discover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

// Skills: a skill is a directory skills/<name>/ holding SKILL.md, in the
// config root (the source named "root") or in a source that rolecall.yaml
// declares under sources:. Each source is read through its own os.Root.

const (
	skillsDir = "skills"
	skillFile = "SKILL.md"
	// SourceRoot names the config root's own skills/ directory as a source.
	SourceRoot = "root"
	// DiagnosticSourceSkipped is the warning for an optional source that
	// is missing: its skills are simply not offered.
	DiagnosticSourceSkipped = "source_skipped"
)

// Bounds on one skill directory, so that a symlink loop or a stray tree
// is an error rather than a long read.
const (
	maxSkillDepth = 8
	maxSkillFiles = 256
	maxSkillBytes = 8 << 20
)

var (
	sourceKeys = []string{"name", "root", "required"}
	skillKeys  = []string{"name", "description"}
)

// SkillSource is one entry of rolecall.yaml sources:.
type SkillSource struct {
	Name string
	// Root is an absolute directory, or one inside the config root given
	// relative to it (cleaned, slash-separated).
	Root string
	// Required makes a missing source source_missing (the default); an
	// optional one that is missing is the diagnostic source_skipped.
	Required bool
}

// SkillFile is a discovered skill and where it was read.
type SkillFile struct {
	resolve.Skill
	Description string
	// Origin is the skill's SKILL.md.
	Origin Origin
	// Dir is the skill directory's display path.
	Dir string
	// Files lists what the digest covers: every regular file of the
	// directory, relative to it, sorted.
	Files []string
	// KeyLines maps each frontmatter key to its line in SKILL.md.
	KeyLines   map[string]int
	Extensions map[string]any
}

// sources decodes rolecall.yaml's sources: [{name, root, required}].
func (d *ydoc) sources(n *yaml.Node, at string, lines map[string]int) ([]SkillSource, *Error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errAt(n, at, "must be a list of {name, root, required} mappings, got %s", describeNode(n))
	}
	out := make([]SkillSource, 0, len(n.Content))
	for i, item := range n.Content {
		key := fmt.Sprintf("%s[%d]", at, i)
		lines[key] = item.Line + d.off
		if item.Kind != yaml.MappingNode {
			return nil, d.errAt(item, key, "must be a mapping with name, root and required, got %s", describeNode(item))
		}
		src := SkillSource{Required: true}
		err := d.fields(item, key, sourceKeys, nil, lines, func(f pair, key string) *Error {
			var err *Error
			switch f.key {
			case "name":
				if src.Name, err = d.name(f.v, key); err == nil && (src.Name == SourceRoot || src.Name == "builtin") {
					err = d.errAt(f.v, key, "%q is reserved (root is the config root's own skills/)", src.Name)
				}
			case "root":
				src.Root, err = d.sourceRoot(f.v, key)
			case "required":
				src.Required, err = d.boolean(f.v, key)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, req := range []struct{ k, v string }{{"name", src.Name}, {"root", src.Root}} {
			if req.v == "" {
				return nil, d.errAt(item, join(key, req.k), "is required in a skill source")
			}
		}
		for _, prev := range out {
			switch {
			case prev.Name == src.Name:
				return nil, d.errAt(item, join(key, "name"), "source %q is declared twice", src.Name)
			case prev.Root == src.Root:
				return nil, d.errAt(item, join(key, "root"), "%q is already the root of source %q", src.Root, prev.Name)
			}
		}
		out = append(out, src)
	}
	return out, nil
}

// sourceRoot decodes a source's root: an absolute path (a trusted
// directory anywhere), or a path inside the config root.
func (d *ydoc) sourceRoot(n *yaml.Node, key string) (string, *Error) {
	s, err := d.str(n, key)
	if err != nil {
		return "", err
	}
	if filepath.IsAbs(s) {
		return filepath.Clean(s), nil
	}
	r, err := d.localPath(n, key)
	if err == nil && r == "." {
		return "", d.errAt(n, key, "is the config root, whose skills/ is already the source named %q", SourceRoot)
	}
	return r, err
}

// decodeSkill decodes a SKILL.md: strict frontmatter with name (equal to
// the directory name) and description, both required; x- keys are kept.
func decodeSkill(file, dir string, data []byte) (*SkillFile, *Error) {
	code := resolve.CodeConfigInvalid
	d, root, fm, err := markdownDoc(file, code, data)
	if err != nil {
		err.Subject = dir
		return nil, err
	}
	sf := &SkillFile{KeyLines: map[string]int{"body": fm.bodyLine}, Origin: Origin{File: file}}
	var name string
	if root != nil {
		err = d.fields(root, "", skillKeys, &sf.Extensions, sf.KeyLines, func(f pair, key string) *Error {
			var err *Error
			switch f.key {
			case "name":
				if name, err = d.str(f.v, key); err == nil && name != dir {
					err = d.errAt(f.v, key, "is %q but the directory is named %q; they must match", name, dir)
				}
			case "description":
				sf.Description, err = d.str(f.v, key)
			}
			return err
		})
		if err != nil {
			err.Subject = dir
			return nil, err
		}
	}
	for _, k := range skillKeys {
		if _, ok := sf.KeyLines[k]; !ok {
			return nil, &Error{Code: code, File: file, Line: 1, Key: k, Subject: dir, Message: fmt.Sprintf("key %q: is required in SKILL.md", k)}
		}
	}
	sf.Name = dir
	return sf, nil
}

// sourceScan is what the scan found of one source.
type sourceScan struct {
	src   SkillSource // Name SourceRoot for the config root
	index int         // in Config.Sources; -1 for the config root
	// missing says why the source is absent ("" when present).
	missing string
	err     *Error // a problem with the source itself
	skills  []skillCand
}

// skillCand is one skills/<name> directory and its files.
type skillCand struct {
	name  string
	dir   string // display path
	files []cand // stem: the path relative to the skill directory
	err   *Error
}

type skillScan struct {
	sources []sourceScan
	opened  openedRoots
}

// scanSkills lists the skills of the config root and of every declared
// source, in that order, stat'ing every file (Load and the Source's sweep
// both run it). The caller closes the opened roots.
func (s *scanner) scanSkills(t tree, sources []SkillSource) skillScan {
	var out skillScan
	own := sourceScan{src: SkillSource{Name: SourceRoot}, index: -1}
	s.sourceSkills(t, &own)
	out.sources = append(out.sources, own)
	for i, src := range sources {
		sc := sourceScan{src: src, index: i}
		st, ok := s.openSource(t, &sc)
		if ok {
			out.opened.add(st)
			s.sourceSkills(st, &sc)
		}
		out.sources = append(out.sources, sc)
	}
	return out
}

// openSource opens a declared source's root as its own os.Root. Its files
// are shown as "<name>:/<path inside the root>".
func (s *scanner) openSource(t tree, sc *sourceScan) (tree, bool) {
	src := sc.src
	prefix := src.Name + ":"
	var (
		fi  fs.FileInfo
		err error
	)
	if filepath.IsAbs(src.Root) && t.fsys != nil {
		// A bundle must not read outside itself.
		sc.err = &Error{Code: resolve.CodeConfigInvalid, File: path.Clean(src.Root), Message: "is outside the configuration: a bundle can only name skill sources inside itself"}
		return tree{}, false
	}
	if filepath.IsAbs(src.Root) {
		fi, err = os.Stat(src.Root)
		st := stamp{path: prefix}
		switch {
		case err == nil && fi.IsDir():
			st.kind = 'd'
		case err == nil:
			st.kind = 'o'
		case errors.Is(err, fs.ErrNotExist):
			st.kind = '-'
		default:
			st.kind, st.err = 'e', err.Error()
		}
		s.stamps = append(s.stamps, st)
	} else {
		fi, err = s.stat(t, src.Root)
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		sc.missing = fmt.Sprintf("root %q does not exist", src.Root)
		return tree{}, false
	case err != nil:
		sc.err = fileError(resolve.CodeConfigInvalid, src.Root, err)
		return tree{}, false
	case !fi.IsDir():
		sc.err = &Error{Code: resolve.CodeConfigInvalid, Message: "is not a directory"}
		return tree{}, false
	}
	var st tree
	if filepath.IsAbs(src.Root) {
		st.root, err = os.OpenRoot(src.Root)
		st.prefix, st.hardLinks = prefix, t.hardLinks
	} else {
		st, err = t.sub(src.Root, prefix)
	}
	if err != nil {
		sc.err = fileError(resolve.CodeConfigInvalid, src.Root, err)
		return tree{}, false
	}
	return st, true
}

// sourceSkills lists skills/ of one source. Entries of skills/ that are
// not directories (a README) are not skills; a directory that is one
// must hold SKILL.md and have a valid name.
func (s *scanner) sourceSkills(t tree, sc *sourceScan) {
	code := resolve.CodeConfigInvalid
	ents, ok, err := s.list(t, skillsDir, code)
	switch {
	case err != nil:
		sc.err = err
		return
	case !ok:
		sc.missing = "it has no skills/ directory"
		return
	}
	for _, e := range ents {
		n := e.Name()
		dir := path.Join(skillsDir, n)
		c := skillCand{name: n, dir: t.display(dir)}
		fi, err := s.statEntry(t, dir, c.dir, e)
		switch {
		case err != nil:
			c.err = fileError(code, c.dir, err)
			c.err.Subject = n
		case !fi.IsDir():
			continue
		default:
			if verr := resolve.ValidateName("skill", n); verr != nil {
				c.err = &Error{Code: code, File: c.dir, Subject: n, Message: "the directory name is not a valid skill name: " + nameMsg(verr)}
			} else {
				c.err = s.skillFiles(t, dir, "", 0, &c)
			}
			if c.err == nil && !slices.ContainsFunc(c.files, func(f cand) bool { return f.stem == skillFile }) {
				c.err = &Error{Code: code, File: c.dir, Subject: n, Message: "a skill directory must hold " + skillFile}
			}
		}
		sc.skills = append(sc.skills, c)
	}
}

// skillFiles lists every regular file under dir (rel is dir relative to
// the skill directory), following symlinks only inside the source's root.
func (s *scanner) skillFiles(t tree, dir, rel string, depth int, c *skillCand) *Error {
	code := resolve.CodeConfigInvalid
	if depth > maxSkillDepth {
		return &Error{Code: code, File: t.display(dir), Subject: c.name, Message: fmt.Sprintf("is nested more than %d levels deep in skill %q (a symlink loop?)", maxSkillDepth, c.name)}
	}
	ents, ok, err := s.list(t, dir, code)
	if err != nil {
		return err
	}
	if !ok {
		return &Error{Code: code, File: t.display(dir), Subject: c.name, Message: "disappeared while it was read"}
	}
	for _, e := range ents {
		n := e.Name()
		p, r := path.Join(dir, n), path.Join(rel, n)
		display := t.display(p)
		fi, err := s.statEntry(t, p, display, e)
		switch {
		case err != nil:
			return fileError(code, display, err)
		case fi.IsDir():
			if err := s.skillFiles(t, p, r, depth+1, c); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			if len(c.files) == maxSkillFiles {
				return &Error{Code: code, File: c.dir, Subject: c.name, Message: fmt.Sprintf("skill %q holds more than %d files", c.name, maxSkillFiles)}
			}
			c.files = append(c.files, cand{t: t, name: p, path: display, stem: r})
		default:
			return &Error{Code: code, File: display, Subject: c.name, Message: fmt.Sprintf("is not a regular file (mode %s); a skill holds only files and directories", fi.Mode().Type())}
		}
	}
	return nil
}

// skillSet is what a load found of the skills.
type skillSet struct {
	list  []resolve.Skill
	files map[string]*SkillFile
	errs  []*Error
}

// loadSkills reads and checks every skill the scan found, source by
// source in declaration order. Nothing here fails the load: each problem
// is kept (Snapshot.SkillErrors) and fails the tasks that use skills.
func (l *loader) loadSkills(scan skillScan) {
	defer scan.opened.close()
	l.sk.files = map[string]*SkillFile{}
	first := map[string]string{}
	for _, sc := range scan.sources {
		if sc.err != nil || sc.missing != "" {
			l.sourceProblem(sc)
			continue
		}
		for _, c := range sc.skills {
			if c.err != nil {
				l.sk.errs = append(l.sk.errs, c.err)
				continue
			}
			skillMD := path.Join(c.dir, skillFile)
			if prev, dup := first[c.name]; dup {
				l.sk.errs = append(l.sk.errs, &Error{
					Code: resolve.CodeSkillDuplicate, File: skillMD, Line: 1, Subject: c.name, Paths: []string{prev, skillMD},
					Message: fmt.Sprintf("skill %q is offered twice: %s and %s", c.name, prev, skillMD),
				})
				continue
			}
			first[c.name] = skillMD
			sf, err := l.readSkill(sc.src.Name, c)
			if err != nil {
				l.sk.errs = append(l.sk.errs, err)
				continue
			}
			l.sk.files[c.name] = sf
			l.sk.list = append(l.sk.list, sf.Skill)
		}
	}
	slices.SortFunc(l.sk.list, func(a, b resolve.Skill) int { return strings.Compare(a.Name, b.Name) })
	for i, e := range l.sk.errs {
		l.sk.errs[i] = e.printable()
	}
	sortErrors(l.sk.errs)
}

// sourceProblem records a source that is missing or broken, at the
// rolecall.yaml entry that declares it.
func (l *loader) sourceProblem(sc sourceScan) {
	file, key := l.cfg.Origin.File, fmt.Sprintf("sources[%d]", sc.index)
	line := l.cfg.KeyLines[key]
	switch {
	case sc.index < 0 && sc.err != nil:
		// The config root's own skills/ is declared by no entry: its
		// problem stands where it was found.
		l.sk.errs = append(l.sk.errs, sc.err)
	case sc.index < 0:
		// Absent: the config root needs no skills/.
	case sc.err != nil:
		e := *sc.err
		e.File, e.Line, e.Key, e.Subject = file, line, key, sc.src.Name
		e.Message = fmt.Sprintf("skill source %q: root %q %s", sc.src.Name, sc.src.Root, sc.err.Message)
		l.sk.errs = append(l.sk.errs, &e)
	case sc.src.Required:
		l.sk.errs = append(l.sk.errs, &Error{
			Code: resolve.CodeSourceMissing, File: file, Line: line, Key: key, Subject: sc.src.Name,
			Message: fmt.Sprintf("skill source %q is required but %s (declare it required: false to go on without it)", sc.src.Name, sc.missing),
		})
	default:
		l.warnings = append(l.warnings, &Error{
			Code: DiagnosticSourceSkipped, File: file, Line: line, Key: key, Subject: sc.src.Name,
			Message: fmt.Sprintf("optional skill source %q is skipped: %s", sc.src.Name, sc.missing),
		})
	}
}

// readSkill reads every file of a skill, decodes its SKILL.md and hashes
// the directory: its files' relative paths and contents, sorted by path.
func (l *loader) readSkill(source string, c skillCand) (*SkillFile, *Error) {
	var (
		sf    *SkillFile
		total int
		recs  = make([]fileRec, 0, len(c.files))
	)
	for _, f := range c.files {
		data, err := readFile(f.t, f.name, resolve.CodeConfigInvalid)
		if err != nil {
			err.Subject = c.name
			return nil, err
		}
		if total += len(data); total > maxSkillBytes {
			return nil, &Error{Code: resolve.CodeConfigInvalid, File: c.dir, Subject: c.name, Message: fmt.Sprintf("skill %q is larger than %d MiB in all", c.name, maxSkillBytes>>20)}
		}
		l.files = append(l.files, fileRec{f.path, data, resolve.InputSkill, c.name})
		recs = append(recs, fileRec{path: f.stem, data: data})
		if f.stem == skillFile {
			if sf, err = decodeSkill(f.path, c.name, data); err != nil {
				return nil, err
			}
		}
	}
	sf.Source, sf.Dir = source, c.dir
	// The directory is hashed like a config tree, under its own tag, in
	// path order.
	slices.SortFunc(recs, func(a, b fileRec) int { return strings.Compare(a.path, b.path) })
	sf.Digest = digestFiles("rolecall.skill.v1", recs)
	for _, r := range recs {
		sf.Files = append(sf.Files, r.path)
	}
	return sf, nil
}

// skillProblem is the skill-source problem that fails a task, or nil. A
// task is failed only when its resolution consults skills: its own
// skills patterns, or those of its role's pack entry (or of a variant of
// that entry). Every other task keeps being served, since no skill source
// can change its outcome.
func (s *Snapshot) skillProblem(ref resolve.RoleRef, in *resolve.Inputs) error {
	if len(s.SkillErrors) == 0 {
		return nil
	}
	consults := len(in.Task.Skills) > 0
	if role, ok := ref.(resolve.RoleName); ok && !consults && in.Pack != nil {
		e := in.Pack.Roles[string(role)]
		consults = len(e.Skills) > 0 || slices.ContainsFunc(e.Variants, func(v resolve.Variant) bool { return len(v.Set.Skills) > 0 })
	}
	if !consults {
		return nil
	}
	return s.SkillErrors[0]
}

// SkillOrigin is the SKILL.md of the named skill, or the zero Origin.
func (s *Snapshot) SkillOrigin(name string) Origin {
	if sf, ok := s.SkillFiles[name]; ok {
		return sf.Origin
	}
	return Origin{}
}

// logSkills logs, once per snapshot that brings it, each skill-source
// problem (Warn: tasks that use skills fail with it) and each skipped
// optional source (Info), so a fleet's logs say why skills are missing
// without a line per task.
func (s *Source) logSkills(prev, snap *Snapshot) {
	seen := map[string]bool{}
	if prev != nil {
		for _, e := range prev.SkillErrors {
			seen[e.Error()] = true
		}
		for _, w := range prev.Warnings {
			seen[w.Error()] = true
		}
	}
	for _, e := range snap.SkillErrors {
		if !seen[e.Error()] {
			s.log.Warn("discover: skill source problem; tasks that use skills fail with it", "code", string(e.Code), "subject", e.Subject, "file", e.File, "line", e.Line, "message", e.Message)
		}
	}
	for _, w := range snap.Warnings {
		if w.Code == DiagnosticSourceSkipped && !seen[w.Error()] {
			s.log.Info("discover: optional skill source skipped", "code", string(w.Code), "source", w.Subject, "file", w.File, "line", w.Line, "message", w.Message)
		}
	}
}

// skillPatterns decodes a list of skill patterns (resolve.ValidateSkillPattern).
func (d *ydoc) skillPatterns(n *yaml.Node, key string) ([]string, *Error) {
	return d.list(n, key, func(n *yaml.Node, key string) (string, *Error) {
		p, err := d.str(n, key)
		if err != nil {
			return "", err
		}
		if verr := resolve.ValidateSkillPattern(key, p); verr != nil {
			return "", d.errAt(n, key, "invalid skill pattern: %s", nameMsg(verr))
		}
		return p, nil
	})
}
