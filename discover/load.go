package discover

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
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
	// ConfigSource says where the files came from: ConfigFromFiles (a
	// config root on disk) or ConfigFromNATS (a bundle). Revision is the
	// bundle's revision in NATS, 0 for files.
	ConfigSource string
	Revision     uint64
	// Digest is "sha256:" over every file read (path and content, both
	// length-prefixed) in canonical (sorted path) order, embedded files
	// included: equal digests mean the same configuration.
	Digest   string
	Catalog  *resolve.Catalog     // sealed (resolve.Catalog.Seal)
	Packs    map[string]*PackFile // sealed packs
	Profiles map[string]*Profile
	Config   Config
	// PackErrors holds, by pack name, each pack that failed to read, decode
	// or compose (with what it extends). A task that selects one fails
	// with that error; every other pack keeps working.
	PackErrors map[string]*Error
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
	// Models is the model catalog (rolecall.yaml models:), sealed; nil
	// without one, which makes every tier symbol tier_unknown.
	Models *resolve.ModelCatalog
	// Skills are the skills of every source, by name; SkillFiles says
	// where each was read.
	Skills     []resolve.Skill
	SkillFiles map[string]*SkillFile
	// SkillErrors are the problems of the skill sources (source_missing,
	// skill_duplicate, a SKILL.md that does not decode, path_escape),
	// sorted. They do not fail the load: Inputs fails a task with the
	// first of them only when its resolution consults skills.
	SkillErrors []*Error

	profileList []resolve.ExternalProfile // for Roster, by name
	hints       packHints                 // for pack_not_found (hints.go)
	inputs      *decisionIndex            // for DecisionInputs (decisioninputs.go)
}

// Where a snapshot's files came from (Snapshot.ConfigSource).
const (
	ConfigFromFiles = "files"
	ConfigFromNATS  = "nats"
)

// Load reads the config root through os.Root and returns an immutable
// snapshot, or the first problem found (a *Error; problems are ordered by
// file and line, so the same tree always reports the same one). A broken
// pack is not such a problem: it is kept in Snapshot.PackErrors. Validate
// reports every problem instead.
func Load(root string, opts Options) (*Snapshot, error) {
	l := load(root, opts)
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
	packErrs map[string]*Error
	x        *expander         // the placeholders of this load
	fp       [sha256.Size]byte // the scan's fingerprint, compared by sweeps
	started  int64             // Unix ns when the scan began
	scan     scanPaths
	// cache, when a Source loads, supplies the unchanged files of the
	// previous load (cache.go); stamps are this scan's, by display path.
	cache  *parseCache
	stamps map[string]stamp

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
	// follow-on problems for them (a broken pack is in packErrs).
	brokenRoles, brokenModes, brokenProfiles map[string]bool
	sk                                       skillSet
}

func (l *loader) fail(errs ...*Error) {
	for _, e := range errs {
		l.errs = append(l.errs, e.printable())
	}
}

// read reads the file c and records it as kind.
func (l *loader) read(c cand, code resolve.Code, kind string) ([]byte, *Error) {
	if c.err != nil {
		return nil, c.err
	}
	data, err := readFile(c.t, c.name, code)
	if err == nil {
		l.files = append(l.files, fileRec{c.path, data, kind, c.stem})
	}
	return data, err
}

func load(rootPath string, opts Options) *loader { return loadFrom(rootPath, nil, opts, nil) }

// loadFrom reads rootPath through os.Root, or fsys when it is not nil,
// reusing what cache (when not nil) holds of unchanged files; the result
// is the same with or without a cache (the property test in cache_test.go
// checks it).
func loadFrom(rootPath string, fsys fs.FS, opts Options, cache *parseCache) *loader {
	l := &loader{
		cache:       cache,
		rootPath:    rootPath,
		cfg:         defaultConfig(),
		x:           &expander{lookupEnv: opts.LookupEnv},
		packErrs:    map[string]*Error{},
		packs:       map[string]*PackFile{},
		brokenRoles: map[string]bool{}, brokenModes: map[string]bool{}, brokenProfiles: map[string]bool{},
	}
	l.started = time.Now().UnixNano()
	if cache != nil {
		// About as many files as the load before read.
		l.files = make([]fileRec, 0, len(cache.prev)+8)
	}
	// A sweep's scan serves this load only (taken even if the root fails
	// to open, so no later load sees it stale).
	memo, save, memoAt := l.cache.takeMemo()
	t := tree{fsys: fsys, hardLinks: opts.AllowHardLinks}
	var err error
	if fsys == nil {
		t.root, err = os.OpenRoot(rootPath)
	}
	if err != nil {
		// The root's own path stays out of the message: it ends up in
		// failure JSON and readiness output, which name only root-relative
		// paths (callers that print the root add it themselves).
		l.fail(&Error{Code: resolve.CodeConfigInvalid, Message: fmt.Sprintf("cannot open the config root: %v", unwrapPath(err))})
		l.useBuiltins(true, true)
		l.fp, _ = fingerprint([]stamp{{kind: 'e', err: err.Error()}})
		return l
	}
	if t.root != nil {
		defer t.root.Close()
	}
	var sc scanner
	if memo != nil {
		// The tree as the sweep just saw it: the cache's racy check must
		// count from when that sweep began.
		sc.use, sc.save, l.started = memo, save, memoAt
		sc.stamps = make([]stamp, 0, memo.size())
	}
	// ${file:…} targets are stat'ed before they are read, into their own
	// scan: their stamps join the others, sorted, when the load ends, in
	// the order a sweep stats them. They are kept with the scan, so that a
	// watcher watches their directories too.
	psc := scanner{save: sc.save}
	l.x.read = func(rel string) ([]byte, *Error) {
		psc.stat(t, rel)
		data, err := readFileLimit(t, rel, resolve.CodePlaceholderUnresolved, MaxPlaceholderFile)
		if err == nil {
			l.files = append(l.files, fileRec{t.display(rel), data, resolve.InputPlaceholderFile, t.display(rel)})
		}
		return data, err
	}
	fixed := sc.scanFixed(t)
	l.fail(fixed.errs...)

	if c := fixed.config; c == nil {
		l.cfgOK = true
	} else if data, err := l.read(*c, resolve.CodeConfigInvalid, resolve.InputConfig); err != nil {
		l.fail(err)
	} else if cfg, err := decodeConfig(c.path, data, l.x); err != nil {
		l.fail(err)
	} else {
		l.cfg, l.cfgOK = cfg, true
	}
	if l.cfgOK {
		l.scan = scanPaths{roots: l.cfg.ProfileRoots, preamble: l.cfg.PreambleFile, sources: l.cfg.Sources}
	}
	conf := sc.scanConfigured(t, l.scan, l.cfg.KeyLines)
	defer conf.opened.close()
	l.fail(conf.errs...)
	l.loadSkills(sc.scanSkills(t, l.scan.sources))
	if l.cache != nil {
		l.stamps = make(map[string]stamp, len(sc.stamps))
		for _, st := range sc.stamps {
			l.stamps[st.path] = st
		}
	}

	hasDefault := slices.ContainsFunc(fixed.packs, func(c cand) bool { return c.stem == DefaultPack })
	l.useBuiltins(!fixed.hasCatalog, !hasDefault)
	if fixed.hasCatalog {
		l.loadCatalog(fixed.roles, fixed.modes)
	}
	l.loadPacks(fixed.packs)
	l.loadProfiles(append([][]cand{fixed.agents}, conf.roots...))
	if c := conf.preamble; c != nil {
		switch data, err := l.read(*c, resolve.CodeConfigInvalid, resolve.InputPreamble); {
		case err != nil:
			// Report a missing or escaping preamble where it was named.
			l.fail(&Error{
				Code: err.Code, File: l.cfg.Origin.File, Line: l.cfg.KeyLines["preamble_file"], Key: "preamble_file",
				Message: fmt.Sprintf("key \"preamble_file\": %q %s", l.cfg.PreambleFile, err.Message),
			})
		default:
			if line, msg := checkText(data); msg != "" {
				l.fail(&Error{Code: resolve.CodeConfigInvalid, File: c.path, Line: line, Message: msg})
			}
			l.preamble = lfLines(string(data))
		}
	}
	slices.SortFunc(psc.stamps, func(a, b stamp) int { return strings.Compare(a.path, b.path) })
	sc.stamps = append(sc.stamps, psc.stamps...)
	l.scan.files = make([]string, len(psc.stamps))
	for i, st := range psc.stamps {
		l.scan.files[i] = st.path
	}
	l.scan.stamps = len(sc.stamps)
	l.fp, _ = fingerprint(sc.stamps)
	for i, e := range l.errs {
		if e.File == ConfigFile {
			l.errs[i] = l.cfg.masks.mask(e)
		}
	}
	sortErrors(l.errs)
	return l
}

// loadPacks reads, composes and decodes every pack. A pack that fails is
// kept as its error, and so is a pack that extends it; neither stops the
// load.
func (l *loader) loadPacks(cands []cand) {
	o := newNodeOrigins()
	srcs := make(map[string]*packSource, len(cands))
	cached := map[string]*packEntry{}
	reused := map[*packSource]bool{}
	for _, c := range cands {
		src := &packSource{name: c.stem, path: c.path}
		if data, ce, err := l.readCached(c, resolve.CodePackInvalid, resolve.InputPack); err != nil {
			src.err = err
		} else {
			var r bool
			src, cached[c.stem], r = l.preparePackCached(c, data, ce, o)
			if r {
				reused[src] = true
			}
		}
		if src.err != nil && src.err.Subject == "" {
			e := *src.err
			e.Subject = c.stem
			src.err = &e
		}
		srcs[c.stem] = src
	}
	// Inside packs/default.yaml (and when there is none), "default" is
	// the embedded pack, prepared only when something extends it.
	var embedded *packSource
	ownDefault := packDir + "/" + DefaultPack + packExt
	lookup := func(from *packSource, name string) *packSource {
		if name != DefaultPack || (from.path != ownDefault && srcs[DefaultPack] != nil) {
			return srcs[name]
		}
		if embedded == nil {
			b := builtins()
			embedded = prepareSource(DefaultPack, b.packFile.path, b.packFile.data, &expander{}, o)
			// Read here only because a pack extends it: a mixin.
			f := b.packFile
			f.kind = resolve.InputMixin
			l.files = append(l.files, f)
		}
		return embedded
	}
	c := &composer{o: o, lookup: lookup, reused: reused}
	layers := map[string][]*packSource{}
	own := map[*packSource]*Error{}
	for _, name := range sortedKeys(srcs) {
		src := srcs[name]
		if src.err != nil {
			own[src] = src.err
			continue
		}
		if pe := cached[name]; pe != nil && pe.pf != nil {
			l.packs[name], layers[name] = pe.pf, []*packSource{src}
			continue
		}
		pf, ls, err := c.pack(src)
		if err != nil {
			own[src] = err
			continue
		}
		l.packs[name], layers[name] = pf, ls
		if pe := cached[name]; pe != nil && len(src.extends) == 0 {
			pe.pf = pf
		}
	}
	// A pack is broken too when anything it was composed from is: the
	// first broken layer, in the order applied, is named as the cause.
	for _, name := range sortedKeys(layers) {
		ls := layers[name]
		for _, layer := range ls[:len(ls)-1] {
			if cause, ok := own[layer]; ok {
				own[ls[len(ls)-1]] = brokenMixin(ls[len(ls)-1], layer.name, "", cause)
				delete(l.packs, name)
				break
			}
		}
	}
	for name, src := range srcs {
		if err, ok := own[src]; ok {
			l.packErrs[name] = err.printable()
		}
	}
}

// useBuiltins installs the embedded catalog, default pack and preamble
// where no file replaces them.
func (l *loader) useBuiltins(catalog, pack bool) {
	b := builtins()
	l.fail(b.errs...)
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
	decodes := l.cache.decodeCount()
	l.roleFiles, l.modeFiles = map[string]*CatalogFile{}, map[string]*CatalogFile{}
	loadCatalogFiles(l, roles, resolve.InputCatalogRole, decodeRole, cat.Roles, l.roleFiles, l.brokenRoles)
	loadCatalogFiles(l, modes, resolve.InputCatalogMode, decodeMode, cat.Modes, l.modeFiles, l.brokenModes)
	l.fail(checkConflicts(cat.Modes, l.modeFiles, l.brokenModes)...)
	// Only a catalog whose every file was read and decoded is reused: a
	// file that fails now may have been an entry of the previous one.
	if c := l.cache.sameCatalog(roles, modes, decodes); c != nil && len(l.brokenRoles)+len(l.brokenModes) == 0 {
		l.catalog = c
		return
	}
	sealed := cat.Seal()
	l.catalog = &sealed
	l.cache.keepCatalog(roles, modes, l.catalog)
}

// catalogDecoder is decodeRole or decodeMode.
type catalogDecoder[T any] func(path, stem string, data []byte) (T, *CatalogFile, *Error)

// catalogEntry is a decoded catalog file: a resolve.Role or resolve.Mode.
type catalogEntry[T any] struct {
	v  T
	cf *CatalogFile
}

// loadCatalogFiles reads and decodes the catalog files of one kind into
// entries and files; a name whose file fails is broken.
func loadCatalogFiles[T any](l *loader, cands []cand, kind string, decode catalogDecoder[T], entries map[string]T, files map[string]*CatalogFile, broken map[string]bool) {
	for _, c := range cands {
		data, ce, err := l.readCached(c, resolve.CodeCatalogInvalid, kind)
		var d catalogEntry[T]
		if err == nil {
			d, err = decodeCached(l, c, data, ce, func(path, stem string, data []byte) (catalogEntry[T], *Error) {
				v, cf, err := decode(path, stem, data)
				return catalogEntry[T]{v, cf}, err
			})
		}
		if err != nil {
			l.fail(err)
			broken[c.stem] = true
			continue
		}
		entries[c.stem], files[c.stem] = d.v, d.cf
	}
}

// loadProfiles decodes the profiles of every profile root, in root order.
// A name seen twice (either layout, any root) is profile_duplicate naming
// both files; the first file stays loaded.
func (l *loader) loadProfiles(roots [][]cand) {
	n := 0
	for _, cands := range roots {
		n += len(cands)
	}
	first := make(map[string]string, n)
	l.profiles = make(map[string]*Profile, n)
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
			data, ce, err := l.readCached(c, resolve.CodeProfileInvalid, resolve.InputProfile)
			var p *Profile
			if err == nil {
				p, err = decodeCached(l, c, data, ce, decodeProfile)
			}
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

func (l *loader) snapshot() *Snapshot {
	slices.SortStableFunc(l.files, func(a, b fileRec) int { return strings.Compare(a.path, b.path) })
	// A file read twice (a ${file:…} target that is also a pack, the
	// embedded pack as a mixin) is listed once.
	l.files = slices.CompactFunc(l.files, func(a, b fileRec) bool { return a.path == b.path })
	s := &Snapshot{
		Root:         l.rootPath,
		ConfigSource: ConfigFromFiles,
		PackErrors:   l.packErrs,
		Digest:       digestFiles("rolecall.discover.v1", l.files),
		Catalog:      l.catalog,
		Packs:        l.packs,
		Profiles:     l.profiles,
		Config:       l.cfg,
		Defaults:     l.cfg.Defaults,
		Policy:       resolve.Policy{RejectLegacyProfiles: l.cfg.LegacyProfiles == LegacyReject},
		Preamble:     l.preamble,
		Files:        make([]Origin, len(l.files)),
		Warnings:     l.warnings,
		RoleFiles:    l.roleFiles,
		ModeFiles:    l.modeFiles,
		Models:       l.cfg.Models,
		// nil when there are none, so that a configuration without skills
		// keeps the inputs digests it had before skills existed.
		Skills:      l.sk.list,
		SkillFiles:  l.sk.files,
		SkillErrors: l.sk.errs,
	}
	for i, f := range l.files {
		s.Files[i] = Origin{File: f.path}
	}
	sortErrors(s.Warnings)
	s.profileList = make([]resolve.ExternalProfile, 0, len(l.profiles))
	for _, name := range sortedKeys(l.profiles) {
		s.profileList = append(s.profileList, l.profiles[name].ExternalProfile)
	}
	s.inputs = newDecisionIndex(s, l.files, l.cache.digest)
	return s
}

// digestFiles hashes sorted files: a version tag, then for each file its
// path and content, both length-prefixed so no two trees collide.
func digestFiles(tag string, files []fileRec) string {
	h := sha256.New()
	h.Write([]byte(tag + "\x00"))
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

// fingerprint hashes the stamps of a scan, in path order (so a load and
// a sweep may stat in different orders), and returns the newest file
// mtime among them. It sorts stamps in place: its callers are done with
// their order, and a copy of 12,000 stamps per sweep is garbage a large
// root does not need.
func fingerprint(stamps []stamp) (fp [sha256.Size]byte, newest int64) {
	slices.SortStableFunc(stamps, func(a, b stamp) int { return strings.Compare(a.path, b.path) })
	h := sha256.New()
	var n [8]byte
	put := func(v uint64) {
		binary.BigEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	var buf []byte // one buffer for the paths, not a conversion each
	for _, s := range stamps {
		newest = max(newest, s.mtime)
		put(uint64(len(s.path)))
		buf = append(buf[:0], s.path...)
		h.Write(buf)
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
