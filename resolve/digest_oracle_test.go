package resolve_test

// The canonical encoder as it was before it became append-style (with the
// whole per-task encoding hashed in one call) and before it wrote
// JSON-like mappings itself: kept as the oracle the digests must equal
// byte for byte, since the golden files and every recorded outcome pin them.

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"math"
	"sort"
	"strconv"

	"github.com/rolecall/rolecall/resolve"
)

const (
	tagNil byte = iota
	tagString
	tagTrue
	tagFalse
	tagInt
	tagList
	tagMap
	tagStruct
	tagJSON
)

func oldSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// oldEnc feeds the canonical encoding to the hash through a fixed buffer, so
// encoding allocates nothing per value (a []byte(s) conversion per string
// would).
type oldEnc struct {
	h   hash.Hash
	buf []byte
	mem [512]byte
}

func oldNewEnc() *oldEnc {
	e := &oldEnc{h: sha256.New()}
	e.buf = e.mem[:0]
	return e
}

func (e *oldEnc) flush() {
	e.h.Write(e.buf)
	e.buf = e.buf[:0]
}

func (e *oldEnc) sum() string {
	e.flush()
	var s [sha256.Size]byte
	var out [len(resolve.DigestPrefix) + 2*sha256.Size]byte
	copy(out[:], resolve.DigestPrefix)
	hex.Encode(out[len(resolve.DigestPrefix):], e.h.Sum(s[:0]))
	return string(out[:])
}

// raw appends bytes of s, flushing whenever the buffer is full.
func (e *oldEnc) raw(s string) {
	for len(s) > 0 {
		if len(e.buf) == cap(e.buf) {
			e.flush()
		}
		n := copy(e.buf[len(e.buf):cap(e.buf)], s)
		e.buf = e.buf[:len(e.buf)+n]
		s = s[n:]
	}
}

func (e *oldEnc) tag(t byte) {
	if len(e.buf) == cap(e.buf) {
		e.flush()
	}
	e.buf = append(e.buf, t)
}

func (e *oldEnc) uint(n uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	e.raw(string(b[:]))
}

func (e *oldEnc) str(s string) {
	e.tag(tagString)
	e.uint(uint64(len(s)))
	e.raw(s)
}

func (e *oldEnc) optStr(s *string) {
	if s == nil {
		e.tag(tagNil)
		return
	}
	e.str(*s)
}

func (e *oldEnc) boolean(b bool) {
	if b {
		e.tag(tagTrue)
	} else {
		e.tag(tagFalse)
	}
}

func (e *oldEnc) optBool(b *bool) {
	if b == nil {
		e.tag(tagNil)
		return
	}
	e.boolean(*b)
}

func (e *oldEnc) optInt(n *int) {
	if n == nil {
		e.tag(tagNil)
		return
	}
	e.tag(tagInt)
	e.uint(uint64(int64(*n)))
}

func (e *oldEnc) strs(list []string) {
	if list == nil {
		e.tag(tagNil)
		return
	}
	e.tag(tagList)
	e.uint(uint64(len(list)))
	for _, s := range list {
		e.str(s)
	}
}

// mapLen starts a map: nil (absent) and empty encode differently, like
// lists, so the digest tells them apart.
func (e *oldEnc) mapLen(isNil bool, n int) {
	if isNil {
		e.tag(tagNil)
		return
	}
	e.tag(tagMap)
	e.uint(uint64(n))
}

func (e *oldEnc) rules(m map[string][]string) {
	if m == nil {
		e.tag(tagNil)
		return
	}
	e.tag(tagMap)
	e.uint(uint64(len(m)))
	for _, k := range oldSortedKeys(m) {
		e.str(k)
		e.strs(m[k])
	}
}

// anyMap encodes a JSON-like mapping through encoding/json, whose output is
// canonical for such values (sorted keys, fixed number formatting).
func (e *oldEnc) anyMap(m map[string]any) {
	if m == nil {
		e.tag(tagNil)
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		// Values that JSON cannot encode (NaN, channels…) cannot come from
		// YAML or JSON decoding; encode their Go-syntax form so the digest
		// stays total and deterministic.
		b = []byte(strconv.Quote(oldDescribe(m)))
	}
	e.tag(tagJSON)
	e.uint(uint64(len(b)))
	e.flush()
	e.h.Write(b)
}

func oldDescribe(m map[string]any) string {
	keys := oldSortedKeys(m)
	out := ""
	for _, k := range keys {
		out += k + "=" + strconv.Quote(oldStringOf(m[k])) + ";"
	}
	return out
}

func oldStringOf(v any) string {
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) {
			return "NaN"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case map[string]any:
		return oldDescribe(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "?"
		}
		return string(b)
	}
}

func (e *oldEnc) policy(p *resolve.PermissionPolicy) {
	if p == nil {
		e.tag(tagNil)
		return
	}
	e.tag(tagStruct)
	e.str(string(p.Mode))
	e.rules(p.Allow)
	e.rules(p.Deny)
	e.rules(p.Escalate)
}

// CatalogDigest is the canonical digest of a catalog.
func oldCatalogDigest(c *resolve.Catalog) string {
	if c == nil {
		return ""
	}
	e := oldNewEnc()
	e.mapLen(c.Roles == nil, len(c.Roles))
	for _, k := range oldSortedKeys(c.Roles) {
		r := c.Roles[k]
		e.str(k)
		e.str(r.Name)
		e.str(r.Description)
		e.str(r.Body)
		e.strs(r.Emits)
		e.anyMap(r.ArtifactDefaults)
	}
	e.mapLen(c.Modes == nil, len(c.Modes))
	for _, k := range oldSortedKeys(c.Modes) {
		m := c.Modes[k]
		e.str(k)
		e.str(m.Name)
		e.str(m.Description)
		e.str(m.Behaviors)
		e.strs(m.ConflictsWith)
	}
	return e.sum()
}

// PackDigest is the canonical digest of a pack.
func oldPackDigest(p *resolve.Pack) string {
	if p == nil {
		return ""
	}
	if p.Digest != "" {
		return p.Digest
	}
	e := oldNewEnc()
	e.str(p.Name)
	e.mapLen(p.Roles == nil, len(p.Roles))
	for _, k := range oldSortedKeys(p.Roles) {
		r := p.Roles[k]
		e.str(k)
		e.optStr(r.Model)
		e.optStr(r.Effort)
		e.strs(r.DefaultModes)
		e.strs(r.ModesAllow)
		e.optBool(r.Active)
		e.strs(r.Authority)
		e.strs(r.Boundaries)
		e.strs(r.Escalations)
	}
	return e.sum()
}

func oldCatalogDigestOf(c *resolve.Catalog) string {
	if c != nil && c.Digest != "" {
		return c.Digest
	}
	return oldCatalogDigest(c)
}

// InputsDigest is the sha256 digest of the canonical encoding of ref and in:
// equal inputs give equal digests, and any field change changes it. The
// catalog and pack enter through their own digests.
func oldInputsDigest(ref resolve.RoleRef, in resolve.Inputs) string {
	e := oldNewEnc()
	e.str("rolecall.inputs.v1")
	if ref == nil {
		e.tag(tagNil)
	} else {
		e.str(ref.Token())
	}
	e.str(oldCatalogDigestOf(in.Catalog))
	e.str(oldPackDigest(in.Pack))
	e.str(string(in.PackSelection))
	if p := in.Profile; p == nil {
		e.tag(tagNil)
	} else {
		e.tag(tagStruct)
		e.str(p.Name)
		e.str(p.Description)
		e.str(string(p.Disposition))
		e.optStr(p.BaseRole)
		e.optStr(p.Model)
		e.optStr(p.Effort)
		e.optBool(p.Yolo)
		e.optBool(p.Bypass)
		e.optBool(p.FastMode)
		e.optBool(p.LionSystem)
		e.anyMap(p.ArtifactDefaults)
		e.optInt(p.Timeout)
		e.boolean(p.ResumeOnTimeout)
		e.optBool(p.Enabled)
		e.str(p.Body)
	}
	t := in.Task
	e.tag(tagStruct)
	e.optStr(t.Model)
	e.optStr(t.Effort)
	e.strs(t.Modes)
	e.optStr(t.ExtraPrompt)
	e.strs(t.Tools)
	e.policy(t.Permissions)
	e.optBool(t.Yolo)
	e.optBool(t.Bypass)
	e.optBool(t.FastMode)
	e.optBool(t.LionSystem)
	d := in.Defaults
	e.tag(tagStruct)
	e.optStr(d.Model)
	e.optStr(d.Effort)
	e.strs(d.Tools)
	e.policy(d.Permissions)
	e.boolean(d.Yolo)
	e.boolean(d.Bypass)
	e.boolean(d.FastMode)
	e.boolean(d.LionSystem)
	e.boolean(in.Policy.RejectLegacyProfiles)
	return e.sum()
}
