package discover

import (
	"bytes"
	"strings"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

// parseCache lets a Source's reload re-read and re-decode only the files
// that changed since the load before. It maps a file's display path to its
// stamp, bytes and decoded value from the last load that read it.
//
// Bytes are reused without a read only when the stamp (size, mtime, inode,
// ctime) is unchanged and the mtime is older than racyWindow before that
// earlier scan began: an edit within the filesystem's timestamp
// granularity can leave the stamp as it was (git's "racily clean" entry),
// so a recent file is read again. A decoded value is reused whenever the
// bytes are equal, because decoding a catalog entry or a profile depends
// on nothing but its path and bytes. A pack is reused the same way only
// when it uses no placeholder (a placeholder reads the environment or
// another file, which the pack's bytes do not pin): its parsed tree
// always, its PackFile when it extends nothing; packs that extend others
// are composed again on every load, from the reused trees.
//
// A cache belongs to one Source and is used under its lock. Every load
// builds the next generation from what it touched, so a deleted file
// drops out and the cache never grows past the tree.
type parseCache struct {
	prev, next map[string]*cachedFile
	// reads and decodes count the files actually read and decoded by the
	// last load (tests and benchmarks check that unchanged files were not).
	reads, decodes int
	// The last sealed catalog and the files it was decoded from: sealing
	// hashes every entry (tens of ms for 2,000 roles), so a load that
	// decoded no catalog file and found the same ones reuses it.
	catalog    *resolve.Catalog
	catalogKey string
	// memo is the scan of the sweep that found a change, for the load
	// that follows it (one use); memoAt is when that sweep began. With
	// save set, the load keeps its own scan there: file events skipped
	// the sweep, memo is the last scan with what they named, and save
	// becomes the base of the next one.
	memo, save *scanMemo
	memoAt     int64
}

// takeMemo hands the sweep's scan to one load, when it began, and where
// the load keeps its scan (nil: nowhere).
func (c *parseCache) takeMemo() (*scanMemo, *scanMemo, int64) {
	if c == nil || c.memo == nil {
		return nil, nil, 0
	}
	m, save, at := c.memo, c.save, c.memoAt
	c.memo, c.save = nil, nil
	return m, save, at
}

func (c *parseCache) decodeCount() int {
	if c == nil {
		return 0
	}
	return c.decodes
}

func catalogKey(roles, modes []cand) string {
	var b strings.Builder
	for _, cs := range [][]cand{roles, modes} {
		for _, c := range cs {
			b.WriteString(c.path)
			b.WriteByte(0)
		}
		b.WriteByte(1)
	}
	return b.String()
}

// sameCatalog returns the previous sealed catalog when this load decoded
// no catalog file since decodesBefore and read the same files, else nil.
// Every file it lists was reused with equal bytes, so its entries are
// the ones that catalog was sealed from.
func (c *parseCache) sameCatalog(roles, modes []cand, decodesBefore int) *resolve.Catalog {
	if c == nil || c.catalog == nil || c.decodes != decodesBefore || c.catalogKey != catalogKey(roles, modes) {
		return nil
	}
	return c.catalog
}

func (c *parseCache) keepCatalog(roles, modes []cand, cat *resolve.Catalog) {
	if c != nil {
		c.catalog, c.catalogKey = cat, catalogKey(roles, modes)
	}
}

type cachedFile struct {
	st     stamp
	scanAt int64 // Unix ns when the scan that took st began
	data   []byte
	dec    any     // a decoded value or *packEntry; nil until decoded
	sum    *string // the digest of data, once a snapshot needed it
}

// digest is the digest of f's bytes, hashed once per cached file rather
// than once per load (a reload of a large root would otherwise hash every
// file again). Only bytes that are the cache entry's own qualify: a file
// read outside the cache (a ${file:…} target, even at a cached path) is
// hashed as read. It works on a nil cache.
func (c *parseCache) digest(f fileRec) *string {
	if c == nil {
		return fileDigest(f.data)
	}
	gen := c.next
	if gen == nil {
		gen = c.prev // committed: the generation this load filled
	}
	e := gen[f.path]
	if e == nil || len(e.data) != len(f.data) || (len(f.data) > 0 && &e.data[0] != &f.data[0]) {
		return fileDigest(f.data)
	}
	if e.sum == nil {
		e.sum = fileDigest(f.data)
	}
	return e.sum
}

// decoded is what a cache entry keeps of decoding its bytes.
type decoded[T any] struct {
	v   T
	err *Error
}

func newParseCache() *parseCache { return &parseCache{prev: map[string]*cachedFile{}} }

// begin starts the generation a load fills.
func (c *parseCache) begin() {
	c.next = make(map[string]*cachedFile, len(c.prev))
	c.reads, c.decodes = 0, 0
}

// commit makes the generation just filled the one the next load reuses.
func (c *parseCache) commit() {
	c.prev, c.next = c.next, nil
}

// bytes returns the cached bytes of path when its stamp st (zero when this
// scan did not take one) says they cannot have changed, else nil.
func (c *parseCache) bytes(path string, st stamp) ([]byte, *cachedFile) {
	e := c.prev[path]
	if e == nil {
		return nil, nil
	}
	if st.kind == 'f' && e.st == st && st.mtime < e.scanAt-int64(racyWindow) {
		c.next[path] = e
		return e.data, e
	}
	return nil, e
}

// store records bytes just read; the old entry's decoded value survives
// when the bytes are the same.
func (c *parseCache) store(path string, st stamp, scanAt int64, data []byte, old *cachedFile) *cachedFile {
	c.reads++
	e := &cachedFile{st: st, scanAt: scanAt, data: data}
	if old != nil && bytes.Equal(old.data, data) {
		e.dec, e.sum = old.dec, old.sum
	}
	c.next[path] = e
	return e
}

// readCached is read with the cache: the bytes, from the cache when they
// cannot have changed, and the cache entry the decoded value goes into
// (nil without a cache).
func (l *loader) readCached(c cand, code resolve.Code, kind string) ([]byte, *cachedFile, *Error) {
	if l.cache == nil || c.err != nil {
		data, err := l.read(c, code, kind)
		return data, nil, err
	}
	st := l.stamps[c.path]
	data, e := l.cache.bytes(c.path, st)
	if data != nil {
		l.files = append(l.files, fileRec{c.path, data, kind, c.stem})
		return data, e, nil
	}
	data, err := l.read(c, code, kind)
	if err != nil {
		return nil, nil, err
	}
	return data, l.cache.store(c.path, st, l.started, data, e), nil
}

// packEntry is a pack's parsed source and, for a pack that extends
// nothing, its decoded PackFile. Only a pack that uses no placeholder is
// kept: a placeholder reads the environment or another file, which the
// pack's own bytes do not pin.
type packEntry struct {
	src *packSource
	pf  *PackFile
}

// preparePackCached is prepareSource, reusing the previous load's parse of
// the same bytes. A reused tree is returned with reused set: its nodes are
// recorded in this load's origins only if composition reads it (compose),
// which most reused packs, flat and with their PackFile kept, never are.
// The entry is returned when the pack may be cached, so loadPacks can add
// its PackFile.
func (l *loader) preparePackCached(c cand, data []byte, e *cachedFile, o *nodeOrigins) (src *packSource, pe *packEntry, reused bool) {
	if e != nil {
		if pe, ok := e.dec.(*packEntry); ok {
			return pe.src, pe, true
		}
	}
	l.countDecode()
	src = prepareSource(c.stem, c.path, data, l.x, o)
	if e == nil || src.err != nil || len(src.used) > 0 {
		return src, nil, false
	}
	pe = &packEntry{src: src}
	e.dec = pe
	return src, pe, false
}

// addOrigins records every node of src's expanded tree as written in
// src's file (every node of a pack's tree was), so composition and error
// positions work on a reused tree as on a fresh parse.
func (src *packSource) addOrigins(o *nodeOrigins) {
	if src.root != nil {
		eachNode(src.root, func(n *yaml.Node) { o.files[n] = src.path })
	}
}

// decodeCached is decode of c's bytes, or what e (nil without a cache)
// kept of decoding the same bytes before.
func decodeCached[T any](l *loader, c cand, data []byte, e *cachedFile, decode func(path, stem string, data []byte) (T, *Error)) (T, *Error) {
	if e != nil {
		if d, ok := e.dec.(decoded[T]); ok {
			return d.v, d.err
		}
	}
	l.countDecode()
	v, err := decode(c.path, c.stem, data)
	if e != nil {
		e.dec = decoded[T]{v, err}
	}
	return v, err
}

func (l *loader) countDecode() {
	if l.cache != nil {
		l.cache.decodes++
	}
}
