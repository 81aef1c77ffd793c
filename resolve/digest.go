package resolve

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"math"

	"strconv"
)

// DigestPrefix starts every digest string.
const DigestPrefix = "sha256:"

// The canonical encoding is a tagged, length-prefixed byte stream: every
// value is written with a one-byte kind, strings and lists carry their
// length, maps are written in sorted key order, nil and empty are distinct,
// and every struct field is written in a fixed order. Two inputs encode the
// same iff they are equal, so the digest changes with any field.
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

type enc struct {
	h   hash.Hash
	buf [9]byte
}

func newEnc() *enc { return &enc{h: sha256.New()} }

func (e *enc) sum() string {
	var s [sha256.Size]byte
	return DigestPrefix + hex.EncodeToString(e.h.Sum(s[:0]))
}

func (e *enc) tag(t byte) { e.buf[0] = t; e.h.Write(e.buf[:1]) }

func (e *enc) uint(n uint64) {
	binary.BigEndian.PutUint64(e.buf[1:], n)
	e.h.Write(e.buf[1:9])
}

func (e *enc) str(s string) {
	e.tag(tagString)
	e.uint(uint64(len(s)))
	e.h.Write([]byte(s))
}

func (e *enc) optStr(s *string) {
	if s == nil {
		e.tag(tagNil)
		return
	}
	e.str(*s)
}

func (e *enc) boolean(b bool) {
	if b {
		e.tag(tagTrue)
	} else {
		e.tag(tagFalse)
	}
}

func (e *enc) optBool(b *bool) {
	if b == nil {
		e.tag(tagNil)
		return
	}
	e.boolean(*b)
}

func (e *enc) optInt(n *int) {
	if n == nil {
		e.tag(tagNil)
		return
	}
	e.tag(tagInt)
	e.uint(uint64(int64(*n)))
}

func (e *enc) strs(list []string) {
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

func (e *enc) rules(m map[string][]string) {
	if m == nil {
		e.tag(tagNil)
		return
	}
	e.tag(tagMap)
	e.uint(uint64(len(m)))
	for _, k := range sortedKeys(m) {
		e.str(k)
		e.strs(m[k])
	}
}

// anyMap encodes a JSON-like mapping through encoding/json, whose output is
// canonical for such values (sorted keys, fixed number formatting).
func (e *enc) anyMap(m map[string]any) {
	if m == nil {
		e.tag(tagNil)
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		// Values that JSON cannot encode (NaN, channels…) cannot come from
		// YAML or JSON decoding; encode their Go-syntax form so the digest
		// stays total and deterministic.
		b = []byte(strconv.Quote(describe(m)))
	}
	e.tag(tagJSON)
	e.uint(uint64(len(b)))
	e.h.Write(b)
}

func describe(m map[string]any) string {
	keys := sortedKeys(m)
	out := ""
	for _, k := range keys {
		out += k + "=" + strconv.Quote(stringOf(m[k])) + ";"
	}
	return out
}

func stringOf(v any) string {
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) {
			return "NaN"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case map[string]any:
		return describe(v)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return "?"
		}
		return string(b)
	}
}

func (e *enc) policy(p *PermissionPolicy) {
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
func CatalogDigest(c *Catalog) string {
	if c == nil {
		return ""
	}
	e := newEnc()
	e.tag(tagMap)
	e.uint(uint64(len(c.Roles)))
	for _, k := range sortedKeys(c.Roles) {
		r := c.Roles[k]
		e.str(k)
		e.str(r.Name)
		e.str(r.Description)
		e.str(r.Body)
		e.strs(r.Emits)
		e.anyMap(r.ArtifactDefaults)
	}
	e.tag(tagMap)
	e.uint(uint64(len(c.Modes)))
	for _, k := range sortedKeys(c.Modes) {
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
func PackDigest(p *Pack) string {
	if p == nil {
		return ""
	}
	if p.Digest != "" {
		return p.Digest
	}
	e := newEnc()
	e.str(p.Name)
	e.tag(tagMap)
	e.uint(uint64(len(p.Roles)))
	for _, k := range sortedKeys(p.Roles) {
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

// Seal returns a copy of c with Digest set, so per-task digests reuse it.
// A sealed catalog must not be modified afterwards.
func (c Catalog) Seal() Catalog {
	c.Digest = ""
	c.Digest = CatalogDigest(&c)
	return c
}

// Seal returns a copy of p with Digest set; see Catalog.Seal.
func (p Pack) Seal() Pack {
	p.Digest = ""
	p.Digest = PackDigest(&p)
	return p
}

func catalogDigest(c *Catalog) string {
	if c != nil && c.Digest != "" {
		return c.Digest
	}
	return CatalogDigest(c)
}

// InputsDigest is the sha256 digest of the canonical encoding of ref and in:
// equal inputs give equal digests, and any field change changes it. The
// catalog and pack enter through their own digests.
func InputsDigest(ref RoleRef, in Inputs) string {
	e := newEnc()
	e.str("rolecall.inputs.v1")
	if ref == nil {
		e.tag(tagNil)
	} else {
		e.str(ref.Token())
	}
	e.str(catalogDigest(in.Catalog))
	e.str(PackDigest(in.Pack))
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
