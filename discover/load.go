package discover

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rolecall/rolecall/resolve"
)

// Snapshot is everything discovery read from one config root, decoded and
// checked. It is immutable after Load: nothing in it (maps, slices, the
// sealed catalog and packs, the profiles) may be modified by anyone, which
// is what lets Inputs hand out references without copying and lets many
// goroutines share one snapshot. The resolver never mutates its inputs.
type Snapshot struct {
	Root string // the root as given
	// Digest is "sha256:" over every file read (path and content, both
	// length-prefixed) in canonical (sorted path) order, embedded files
	// included: equal digests mean the same configuration.
	Digest   string
	Catalog  *resolve.Catalog     // sealed (resolve.Catalog.Seal)
	Packs    map[string]*PackFile // sealed packs
	Profiles map[string]*Profile
	Config   Config
	// Defaults come from rolecall.yaml defaults; lion_system defaults to true.
	Defaults resolve.RuntimeDefaults
	// Policy: legacy_profiles: reject sets RejectLegacyProfiles.
	Policy   resolve.Policy
	Preamble string
	Files    []Origin // every file read, canonical order
	// Warnings are non-fatal facts, one per legacy profile (code
	// legacy_profile_replacement, or profile_disposition_required when
	// legacy profiles are rejected).
	Warnings []*Error
	// RoleFiles and ModeFiles say where each catalog entry was read.
	RoleFiles map[string]*CatalogFile
	ModeFiles map[string]*CatalogFile

	profileList []resolve.ExternalProfile // for Roster, by name
}

// Load reads the config root through os.Root and returns an immutable
// snapshot, or the first problem found (a *Error; problems are ordered by
// file and line, so the same tree always reports the same one). Validate
// reports every problem instead. opts is accepted for symmetry with
// NewSource; Load itself uses none of it today.
func Load(root string, opts Options) (*Snapshot, error) {
	l := load(root)
	if len(l.errs) > 0 {
		return nil, l.errs[0]
	}
	return l.snapshot(), nil
}

// loader holds one run over a config root. Every file is decoded
// independently, so one run collects every file's first problem.
type loader struct {
	rootPath string
	files    []fileRec
	errs     []*Error
	fp       [sha256.Size]byte // the scan's fingerprint, compared by sweeps
	started  int64             // Unix ns when the scan began
	scan     scanPaths

	cfg       Config
	cfgOK     bool
	catalog   *resolve.Catalog
	roleFiles map[string]*CatalogFile
	modeFiles map[string]*CatalogFile
	packs     map[string]*PackFile
	profiles  map[string]*Profile
	preamble  string
	warnings  []*Error
	// broken names whose file failed to decode, so Validate does not report
	// follow-on problems for them.
	brokenRoles, brokenModes, brokenPacks, brokenProfiles map[string]bool
}

func (l *loader) fail(e *Error) {
	if e != nil {
		l.errs = append(l.errs, e)
	}
}

func (l *loader) read(c cand, code resolve.Code) ([]byte, bool) {
	if c.err != nil {
		l.fail(c.err)
		return nil, false
	}
	data, err := readFile(c.t, c.name, code)
	if err != nil {
		l.fail(err)
		return nil, false
	}
	l.files = append(l.files, fileRec{c.path, data})
	return data, true
}

func load(rootPath string) *loader {
	l := &loader{
		rootPath: rootPath,
		cfg:      defaultConfig(),
		packs:    map[string]*PackFile{}, profiles: map[string]*Profile{},
		brokenRoles: map[string]bool{}, brokenModes: map[string]bool{}, brokenPacks: map[string]bool{}, brokenProfiles: map[string]bool{},
	}
	l.started = time.Now().UnixNano()
	r, err := os.OpenRoot(rootPath)
	if err != nil {
		// The root's own path stays out of the message: it ends up in
		// failure JSON and readiness output, which name only root-relative
		// paths (callers that print the root add it themselves).
		l.fail(&Error{Code: resolve.CodeConfigInvalid, Message: fmt.Sprintf("cannot open the config root: %v", unwrapPath(err))})
		l.useBuiltins(true, true)
		l.fp, _ = fingerprint([]stamp{{kind: 'e', err: err.Error()}})
		return l
	}
	defer r.Close()
	t := tree{root: r}
	var sc scanner
	fixed := sc.scanFixed(t)
	for _, e := range fixed.errs {
		l.fail(e)
	}

	if fixed.config != nil {
		if data, ok := l.read(*fixed.config, resolve.CodeConfigInvalid); ok {
			cfg, err := decodeConfig(fixed.config.path, data)
			if err != nil {
				l.fail(err)
			} else {
				l.cfg, l.cfgOK = cfg, true
			}
		}
	} else {
		l.cfgOK = true
	}
	if l.cfgOK {
		l.scan = scanPaths{roots: l.cfg.ProfileRoots, preamble: l.cfg.PreambleFile}
	}
	conf := sc.scanConfigured(t, l.scan, ConfigFile, l.cfg.KeyLines)
	defer func() {
		for _, o := range conf.opened {
			o.Close()
		}
	}()
	for _, e := range conf.errs {
		l.fail(e)
	}

	_, hasDefault := findStem(fixed.packs, "default")
	l.useBuiltins(!fixed.hasCatalog, !hasDefault)
	if fixed.hasCatalog {
		l.loadCatalog(fixed.roles, fixed.modes)
	}
	for _, c := range fixed.packs {
		data, ok := l.read(c, resolve.CodePackInvalid)
		if !ok {
			l.brokenPacks[c.stem] = true
			continue
		}
		pf, err := decodePack(c.path, c.stem, data)
		if err != nil {
			l.fail(err)
			l.brokenPacks[c.stem] = true
			continue
		}
		l.packs[c.stem] = pf
	}
	l.loadProfiles(append([][]cand{fixed.agents}, conf.roots...))
	if c := conf.preamble; c != nil {
		var data []byte
		err := c.err
		if err == nil {
			data, err = readFile(c.t, c.name, resolve.CodeConfigInvalid)
		}
		switch {
		case err != nil:
			// Report a missing or escaping preamble where it was named.
			l.fail(&Error{
				Code: err.Code, File: l.cfg.Origin.File, Line: l.cfg.KeyLines["preamble_file"], Key: "preamble_file",
				Message: fmt.Sprintf("key \"preamble_file\": %q %s", l.cfg.PreambleFile, err.Message),
			})
		default:
			l.files = append(l.files, fileRec{c.path, data})
			if line, msg := checkText(data); msg != "" {
				l.fail(&Error{Code: resolve.CodeConfigInvalid, File: c.path, Line: line, Message: msg})
			}
			l.preamble = lfLines(string(data))
		}
	}
	l.fp, _ = fingerprint(sc.stamps)
	sortErrors(l.errs)
	return l
}

// useBuiltins installs the embedded catalog, default pack and preamble
// where no file replaces them.
func (l *loader) useBuiltins(catalog, pack bool) {
	b := builtins()
	for _, e := range b.errs {
		l.fail(e)
	}
	if catalog {
		l.catalog, l.roleFiles, l.modeFiles = b.catalog, b.roleFiles, b.modeFiles
		l.files = append(l.files, b.catalogFiles...)
	}
	if pack && b.pack != nil {
		l.packs["default"] = b.pack
		l.files = append(l.files, b.packFile)
	}
	if l.cfg.PreambleFile == "" {
		l.preamble = b.preamble
		l.files = append(l.files, b.preambleFile)
	}
}

func (l *loader) loadCatalog(roles, modes []cand) {
	cat := resolve.Catalog{Roles: map[string]resolve.Role{}, Modes: map[string]resolve.Mode{}}
	l.roleFiles, l.modeFiles = map[string]*CatalogFile{}, map[string]*CatalogFile{}
	for _, c := range roles {
		data, ok := l.read(c, resolve.CodeCatalogInvalid)
		if !ok {
			l.brokenRoles[c.stem] = true
			continue
		}
		r, cf, err := decodeRole(c.path, c.stem, data)
		if err != nil {
			l.fail(err)
			l.brokenRoles[c.stem] = true
			continue
		}
		cat.Roles[c.stem], l.roleFiles[c.stem] = r, cf
	}
	for _, c := range modes {
		data, ok := l.read(c, resolve.CodeCatalogInvalid)
		if !ok {
			l.brokenModes[c.stem] = true
			continue
		}
		m, cf, err := decodeMode(c.path, c.stem, data)
		if err != nil {
			l.fail(err)
			l.brokenModes[c.stem] = true
			continue
		}
		cat.Modes[c.stem], l.modeFiles[c.stem] = m, cf
	}
	for _, e := range checkConflicts(cat.Modes, l.modeFiles, l.brokenModes) {
		l.fail(e)
	}
	sealed := cat.Seal()
	l.catalog = &sealed
}

// loadProfiles decodes the profiles of every profile root, in root order.
// A name seen twice (either layout, any root) is profile_duplicate naming
// both files; the first file stays loaded.
func (l *loader) loadProfiles(roots [][]cand) {
	first := map[string]string{}
	for _, cands := range roots {
		for _, c := range cands {
			if prev, dup := first[c.stem]; dup {
				if prev == c.path {
					continue // a profile root nested in another lists it again
				}
				l.fail(&Error{
					Code: resolve.CodeProfileDuplicate, File: c.path, Line: 1, Subject: c.stem, Paths: []string{prev, c.path},
					Message: fmt.Sprintf("profile %q is defined twice: %s and %s", c.stem, prev, c.path),
				})
				continue
			}
			first[c.stem] = c.path
			data, ok := l.read(c, resolve.CodeProfileInvalid)
			if !ok {
				l.brokenProfiles[c.stem] = true
				continue
			}
			p, err := decodeProfile(c.path, c.stem, data)
			if err != nil {
				l.fail(err)
				l.brokenProfiles[c.stem] = true
				continue
			}
			l.profiles[c.stem] = p
			if p.Disposition == resolve.DispositionLegacy {
				l.warnings = append(l.warnings, legacyWarning(p, l.cfg.LegacyProfiles == LegacyReject))
			}
		}
	}
}

func legacyWarning(p *Profile, reject bool) *Error {
	if reject {
		return &Error{
			Code: resolve.CodeProfileDispositionRequired, File: p.Origin.File, Line: 1, Subject: p.Name,
			Message: fmt.Sprintf("External profile '%s' has no disposition and legacy profiles are rejected; selecting it fails with %s.", p.Name, resolve.CodeProfileDispositionRequired),
		}
	}
	return &Error{
		Code: resolve.Code(resolve.DiagnosticLegacyProfileReplacement), File: p.Origin.File, Line: 1, Subject: p.Name,
		Message: fmt.Sprintf("External profile '%s' has no disposition; treating it as 'replacement' during the compatibility window.", p.Name),
	}
}

func findStem(cands []cand, stem string) (cand, bool) {
	for _, c := range cands {
		if c.stem == stem {
			return c, true
		}
	}
	return cand{}, false
}

func (l *loader) snapshot() *Snapshot {
	slices.SortFunc(l.files, func(a, b fileRec) int { return strings.Compare(a.path, b.path) })
	s := &Snapshot{
		Root:      l.rootPath,
		Digest:    digestFiles(l.files),
		Catalog:   l.catalog,
		Packs:     l.packs,
		Profiles:  l.profiles,
		Config:    l.cfg,
		Defaults:  l.cfg.Defaults,
		Policy:    resolve.Policy{RejectLegacyProfiles: l.cfg.LegacyProfiles == LegacyReject},
		Preamble:  l.preamble,
		Files:     make([]Origin, len(l.files)),
		Warnings:  l.warnings,
		RoleFiles: l.roleFiles,
		ModeFiles: l.modeFiles,
	}
	for i, f := range l.files {
		s.Files[i] = Origin{File: f.path}
	}
	sortErrors(s.Warnings)
	for _, name := range sortedKeys(l.profiles) {
		s.profileList = append(s.profileList, l.profiles[name].ExternalProfile)
	}
	return s
}

// digestFiles hashes sorted files: a version tag, then for each file its
// path and content, both length-prefixed so no two trees collide.
func digestFiles(files []fileRec) string {
	h := sha256.New()
	h.Write([]byte("rolecall.discover.v1\x00"))
	var n [8]byte
	for _, f := range files {
		binary.BigEndian.PutUint64(n[:], uint64(len(f.path)))
		h.Write(n[:])
		h.Write([]byte(f.path))
		binary.BigEndian.PutUint64(n[:], uint64(len(f.data)))
		h.Write(n[:])
		h.Write(f.data)
	}
	return resolve.DigestPrefix + hex.EncodeToString(h.Sum(nil))
}

// fingerprint hashes the stamps of a scan and returns the newest file
// mtime among them.
func fingerprint(stamps []stamp) (fp [sha256.Size]byte, newest int64) {
	h := sha256.New()
	var n [8]byte
	put := func(v uint64) {
		binary.BigEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	for _, s := range stamps {
		newest = max(newest, s.mtime)
		put(uint64(len(s.path)))
		h.Write([]byte(s.path))
		h.Write([]byte{s.kind})
		put(uint64(s.size))
		put(uint64(s.mtime))
		put(s.ino)
		put(uint64(s.ctime))
		put(uint64(len(s.err)))
		h.Write([]byte(s.err))
	}
	h.Sum(fp[:0])
	return fp, newest
}

func sortErrors(errs []*Error) {
	slices.SortStableFunc(errs, func(a, b *Error) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), strings.Compare(string(a.Code), string(b.Code)))
	})
}

func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
