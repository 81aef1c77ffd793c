package resolve

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
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

// canon is the canonical encoding being built. Its methods append and
// return the grown slice, like append itself, so a caller can keep the
// bytes in a stack array: the per-task digest then hashes its whole
// encoding in one call and allocates only the digest string.
type canon []byte

// digest is "sha256:" and the hex of the SHA-256 of the encoding.
func (e canon) digest() string { return digestString(sha256.Sum256(e)) }

// digestString is "sha256:" and the hex of sum.
func digestString(sum [sha256.Size]byte) string {
	var out [len(DigestPrefix) + 2*sha256.Size]byte
	copy(out[:], DigestPrefix)
	hex.Encode(out[len(DigestPrefix):], sum[:])
	return string(out[:])
}

func (e canon) tag(t byte) canon { return append(e, t) }

func (e canon) uint(n uint64) canon { return binary.BigEndian.AppendUint64(e, n) }

func (e canon) str(s string) canon {
	e = append(e, tagString)
	e = e.uint(uint64(len(s)))
	return append(e, s...)
}

func (e canon) optStr(s *string) canon {
	if s == nil {
		return e.tag(tagNil)
	}
	return e.str(*s)
}

func (e canon) boolean(b bool) canon {
	if b {
		return e.tag(tagTrue)
	}
	return e.tag(tagFalse)
}

func (e canon) optBool(b *bool) canon {
	if b == nil {
		return e.tag(tagNil)
	}
	return e.boolean(*b)
}

func (e canon) optInt(n *int) canon {
	if n == nil {
		return e.tag(tagNil)
	}
	e = e.tag(tagInt)
	return e.uint(uint64(int64(*n)))
}

func (e canon) strs(list []string) canon {
	if list == nil {
		return e.tag(tagNil)
	}
	e = e.tag(tagList)
	e = e.uint(uint64(len(list)))
	for _, s := range list {
		e = e.str(s)
	}
	return e
}

// mapLen starts a map: nil (absent) and empty encode differently, like
// lists, so the digest tells them apart.
func (e canon) mapLen(isNil bool, n int) canon {
	if isNil {
		return e.tag(tagNil)
	}
	e = e.tag(tagMap)
	return e.uint(uint64(n))
}

func (e canon) rules(m map[string][]string) canon {
	if m == nil {
		return e.tag(tagNil)
	}
	e = e.tag(tagMap)
	e = e.uint(uint64(len(m)))
	var arr [8]string
	for _, k := range appendSortedKeys(arr[:0], m) {
		e = e.str(k)
		e = e.strs(m[k])
	}
	return e
}

// appendSortedKeys appends m's keys to keys in sorted order; with a stack
// array behind keys, a small map's keys cost no allocation.
func appendSortedKeys[V any](keys []string, m map[string]V) []string {
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// anyMap encodes a JSON-like mapping as encoding/json encodes it, whose
// output is canonical for such values (sorted keys, fixed number
// formatting): written directly by appendJSON for the values that YAML
// and JSON decoding give, through encoding/json itself otherwise.
func (e canon) anyMap(m map[string]any) canon {
	if m == nil {
		return e.tag(tagNil)
	}
	e = e.tag(tagJSON)
	at := len(e)
	if out, ok := appendJSON(e.uint(0), m, 0); ok {
		binary.BigEndian.PutUint64(out[at:], uint64(len(out)-at-8))
		return out
	}
	// appendJSON wrote past at only: e[:at] is intact.
	e = e[:at]
	b, err := json.Marshal(m)
	if err != nil {
		// Values that JSON cannot encode (NaN, channels…) cannot come from
		// YAML or JSON decoding; encode their Go-syntax form so the digest
		// stays total and deterministic.
		b = []byte(strconv.Quote(describe(m)))
	}
	e = e.uint(uint64(len(b)))
	return append(e, b...)
}

// maxJSONDepth bounds appendJSON's recursion; deeper values (or a cycle)
// go to encoding/json, which reports cycles.
const maxJSONDepth = 64

// appendJSON appends json.Marshal(v) for v made of nil, bool, int,
// float64, string, []any and map[string]any, byte for byte (HTML-safe
// string escapes, ES6 number formatting, sorted keys). It reports false
// for anything else — another type, a non-finite number, nesting deeper
// than maxJSONDepth — leaving the caller to use encoding/json.
func appendJSON(b []byte, v any, depth int) ([]byte, bool) {
	if depth > maxJSONDepth {
		return b, false
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, v), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case float64:
		return appendJSONFloat(b, v)
	case string:
		return appendJSONString(b, v), true
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJSON(b, x, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '{')
		var arr [8]string
		for i, k := range appendSortedKeys(arr[:0], v) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendJSON(b, v[k], depth+1); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	default:
		return b, false
	}
}

// appendJSONFloat formats f as encoding/json does: like %g but with the
// exponent cutoffs of ES6 and an unpadded exponent.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// appendJSONString quotes s as encoding/json does with HTML escaping on
// (json.Marshal's default): \" \\ \b \f \n \r \t, other control bytes and
// < > & as \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func describe(m map[string]any) string {
	keys := appendSortedKeys(nil, m)
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

func (e canon) policy(p *PermissionPolicy) canon {
	if p == nil {
		return e.tag(tagNil)
	}
	e = e.tag(tagStruct)
	e = e.str(string(p.Mode))
	e = e.rules(p.Allow)
	e = e.rules(p.Deny)
	return e.rules(p.Escalate)
}

// CatalogDigest is the canonical digest of a catalog.
func CatalogDigest(c *Catalog) string {
	if c == nil {
		return ""
	}
	var e canon
	e = e.mapLen(c.Roles == nil, len(c.Roles))
	for _, k := range appendSortedKeys(nil, c.Roles) {
		r := c.Roles[k]
		e = e.str(k)
		e = e.str(r.Name)
		e = e.str(r.Description)
		e = e.str(r.Body)
		e = e.strs(r.Emits)
		e = e.anyMap(r.ArtifactDefaults)
	}
	e = e.mapLen(c.Modes == nil, len(c.Modes))
	for _, k := range appendSortedKeys(nil, c.Modes) {
		m := c.Modes[k]
		e = e.str(k)
		e = e.str(m.Name)
		e = e.str(m.Description)
		e = e.str(m.Behaviors)
		e = e.strs(m.ConflictsWith)
	}
	return e.digest()
}

// PackDigest is the canonical digest of a pack.
func PackDigest(p *Pack) string {
	if p == nil {
		return ""
	}
	if p.Digest != "" {
		return p.Digest
	}
	var e canon
	e = e.str(p.Name)
	e = e.mapLen(p.Roles == nil, len(p.Roles))
	for _, k := range appendSortedKeys(nil, p.Roles) {
		r := p.Roles[k]
		e = e.str(k)
		e = e.optStr(r.Model)
		e = e.optStr(r.Effort)
		e = e.strs(r.DefaultModes)
		e = e.strs(r.ModesAllow)
		e = e.optBool(r.Active)
		e = e.strs(r.Authority)
		e = e.strs(r.Boundaries)
		e = e.strs(r.Escalations)
	}
	return e.digest()
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

// inputsBuf is the stack space for one task's canonical inputs: a task
// with a long profile body or extra prompt grows onto the heap, once.
const inputsBuf = 2048

// InputsDigest is the sha256 digest of the canonical encoding of ref and in:
// equal inputs give equal digests, and any field change changes it. The
// catalog and pack enter through their own digests.
func InputsDigest(ref RoleRef, in Inputs) string {
	var mem [inputsBuf]byte
	return canon(mem[:0]).inputs(ref, in).digest()
}

func (e canon) inputs(ref RoleRef, in Inputs) canon {
	e = e.beforeExtra(ref, in)
	e = e.optStr(in.Task.ExtraPrompt)
	return e.afterExtra(in)
}

// beforeExtra is the canonical encoding of ref and in up to the task's
// extra prompt, and afterExtra the rest after it: a Plan hashes the first
// once and keeps the second, since only the extra prompt differs between
// the tasks it serves.
func (e canon) beforeExtra(ref RoleRef, in Inputs) canon {
	e = e.str("rolecall.inputs.v1")
	e = e.ref(ref)
	e = e.str(catalogDigest(in.Catalog))
	e = e.str(PackDigest(in.Pack))
	e = e.str(string(in.PackSelection))
	if p := in.Profile; p == nil {
		e = e.tag(tagNil)
	} else {
		e = e.tag(tagStruct)
		e = e.str(p.Name)
		e = e.str(p.Description)
		e = e.str(string(p.Disposition))
		e = e.optStr(p.BaseRole)
		e = e.optStr(p.Model)
		e = e.optStr(p.Effort)
		e = e.optBool(p.Yolo)
		e = e.optBool(p.Bypass)
		e = e.optBool(p.FastMode)
		e = e.optBool(p.LionSystem)
		e = e.anyMap(p.ArtifactDefaults)
		e = e.optInt(p.Timeout)
		e = e.boolean(p.ResumeOnTimeout)
		e = e.optBool(p.Enabled)
		e = e.str(p.Body)
	}
	return e.taskBeforeExtra(in.Task)
}

func (e canon) afterExtra(in Inputs) canon {
	e = e.taskAfterExtra(in.Task)
	d := in.Defaults
	e = e.tag(tagStruct)
	e = e.optStr(d.Model)
	e = e.optStr(d.Effort)
	e = e.strs(d.Tools)
	e = e.policy(d.Permissions)
	e = e.boolean(d.Yolo)
	e = e.boolean(d.Bypass)
	e = e.boolean(d.FastMode)
	e = e.boolean(d.LionSystem)
	return e.boolean(in.Policy.RejectLegacyProfiles)
}

// taskBeforeExtra and taskAfterExtra encode the task's overrides before
// and after its extra prompt, for the digest and for AppendTaskKey alike.
func (e canon) taskBeforeExtra(t TaskOverrides) canon {
	e = e.tag(tagStruct)
	e = e.optStr(t.Model)
	e = e.optStr(t.Effort)
	return e.strs(t.Modes)
}

func (e canon) taskAfterExtra(t TaskOverrides) canon {
	e = e.strs(t.Tools)
	e = e.policy(t.Permissions)
	e = e.optBool(t.Yolo)
	e = e.optBool(t.Bypass)
	e = e.optBool(t.FastMode)
	return e.optBool(t.LionSystem)
}

// AppendTaskKey appends to b the canonical encoding of ref and of every
// override in t but its extra prompt: two tasks whose keys are equal ask
// for the same resolution but for the prompt's last block, so against the
// same catalog, pack, profile, defaults and policy they share a Plan.
func AppendTaskKey(b []byte, ref RoleRef, t TaskOverrides) []byte {
	e := canon(b).ref(ref)
	e = e.taskBeforeExtra(t)
	return e.taskAfterExtra(t)
}

// ref encodes a role reference as its token (nil as nil).
func (e canon) ref(ref RoleRef) canon {
	switch ref := ref.(type) {
	case nil:
		return e.tag(tagNil)
	case ExternalRef:
		// e.str(ref.Token()) without building the token.
		e = append(e, tagString)
		e = e.uint(uint64(len(ExternalPrefix) + len(ref.Name)))
		e = append(e, ExternalPrefix...)
		return append(e, ref.Name...)
	default:
		return e.str(ref.Token())
	}
}
