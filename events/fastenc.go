package events

import (
	"errors"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/rolecall/rolecall/resolve"
)

// The outcome encoder below writes ResolvedData and FailureData by hand.
// The reflection encoder (json.MarshalWrite with dataOptions, in
// structured.go) was most of a task's encoding time; this one writes the
// same bytes. The reflection encoder stays the reference: tests compare
// the two on tables, generated values and fuzzed strings. Whatever the
// hand-written path does not reproduce itself (invalid UTF-8, a
// non-finite float, nesting deep enough to approach the reflection
// encoder's limits) makes it give up, and the caller reruns the
// reflection encoder, errors included. What it must match, for
// dataOptions and jsontext.AppendQuote:
//   - strings: '"', '\\' and bytes below 0x20 escaped (\b \f \n \r \t,
//     else \u00xx in lowercase hex); '<', '>', '&', DEL, U+2028 and U+2029
//     verbatim (neither EscapeForHTML nor EscapeForJS is set); invalid
//     UTF-8 is an error.
//   - struct fields in declaration order, the embedded ResolvedAgentSpec
//     inlined; nil slices, maps and pointers as null.
//   - map keys in Go string order (json.Deterministic sorts with
//     slices.Sort).
//   - float64 in the ECMAScript form: shortest round-trip digits, plain
//     notation for 1e-6 <= |f| < 1e21, exponent otherwise; -0 stays "-0".

// errFastDeferred reports, to tests only, that the hand-written encoder
// gave the value to the reflection encoder.
var errFastDeferred = errors.New("events: the fast encoder defers to the reflection encoder")

// fastEncoder appends JSON to b. bad is set when the value holds
// something only the reflection encoder reproduces exactly; b is then
// garbage and must be discarded.
type fastEncoder struct {
	b   []byte
	bad bool
}

// maxEncDepth bounds the nesting the hand-written path follows in
// open-typed values (and so a cyclic map); deeper values go to the
// reflection encoder, which applies its own depth and cycle rules.
const maxEncDepth = 64

// maxEncSubValue bounds a sub-value marshaled on its own by length: nesting
// needs a byte per level, so an output shorter than this cannot reach the
// reflection encoder's nesting limit (10,000) from depth ≤ maxEncDepth,
// where marshaling it in place might have failed.
const maxEncSubValue = 8192

// encVerbatim[c] is true for the ASCII bytes copied verbatim into a string.
var encVerbatim = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	encOnes  = 0x0101010101010101
	encHighs = 0x8080808080808080
)

// encSpecial8 marks, in the high bit of its byte, the first byte of the 8
// in x (little-endian) that is not copied verbatim: non-ASCII, below
// 0x20, '"' or '\\'. A byte's high bit ends up set if the byte has it,
// if subtracting 0x20 from it, or 1 from it xor '"' or xor '\\', wraps.
// For a verbatim byte none does, unless a borrow from a lower byte
// arrives; borrows only come from marked bytes, so the lowest marked byte
// is exact (the ones above it may be marked falsely), and zero means all
// 8 are verbatim.
func encSpecial8(x uint64) uint64 {
	return (x | (x - 0x20*encOnes) | (x ^ '"'*encOnes - encOnes) | (x ^ '\\'*encOnes - encOnes)) & encHighs
}

// plainPrefix returns the length of s's leading run of bytes copied
// verbatim.
func plainPrefix(s string) int {
	i := 0
	for ; i+16 <= len(s); i += 16 {
		w := s[i : i+16]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		y := uint64(w[8]) | uint64(w[9])<<8 | uint64(w[10])<<16 | uint64(w[11])<<24 |
			uint64(w[12])<<32 | uint64(w[13])<<40 | uint64(w[14])<<48 | uint64(w[15])<<56
		if m, n := encSpecial8(x), encSpecial8(y); m|n != 0 {
			if m != 0 {
				return i + bits.TrailingZeros64(m)>>3
			}
			return i + 8 + bits.TrailingZeros64(n)>>3
		}
	}
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8]
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		if m := encSpecial8(x); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || !encVerbatim[c] {
			break
		}
	}
	return i
}

// appendStringBody appends s's JSON string contents without the quotes;
// false means s is not valid UTF-8.
func appendStringBody(b []byte, s string) ([]byte, bool) {
	start := 0
	for i := plainPrefix(s); i < len(s); i += plainPrefix(s[i:]) {
		if c := s[i]; c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			if e := encShort[c]; e != 0 {
				b = append(b, '\\', e)
			} else {
				const hex = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
		} else {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return b, false
			}
			i += n
		}
	}
	return append(b, s[start:]...), true
}

// encShort holds the two-character escapes: \" \\ \b \f \n \r \t.
var encShort = [utf8.RuneSelf]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// str appends s as a JSON string. Most strings need no escaping: they
// are copied in one piece.
func (e *fastEncoder) str(s string) {
	b := append(e.b, '"')
	if n := plainPrefix(s); n == len(s) {
		b = append(b, s...)
	} else {
		// s[:n] is ASCII: the rest starts at a rune boundary.
		var ok bool
		if b, ok = appendStringBody(append(b, s[:n]...), s[n:]); !ok {
			e.bad = true
		}
	}
	e.b = append(b, '"')
}

// raw appends JSON text known to need no quoting (names, punctuation).
func (e *fastEncoder) raw(s string) { e.b = append(e.b, s...) }

func (e *fastEncoder) boolean(v bool) {
	if v {
		e.raw("true")
	} else {
		e.raw("false")
	}
}

func (e *fastEncoder) strPtr(p *string) {
	if p == nil {
		e.raw("null")
	} else {
		e.str(*p)
	}
}

func (e *fastEncoder) strings(v []string) {
	if v == nil {
		e.raw("null")
		return
	}
	e.b = append(e.b, '[')
	for i, s := range v {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(s)
	}
	e.b = append(e.b, ']')
}

// sortEncEntries orders map entries by key as slices.Sort orders strings;
// maps here have a handful of keys, where insertion sort is quickest.
func sortEncEntries[V any](es []encEntry[V]) {
	if len(es) > 12 {
		slices.SortFunc(es, func(a, b encEntry[V]) int { return strings.Compare(a.k, b.k) })
		return
	}
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].k < es[j-1].k; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

type encEntry[V any] struct {
	k string
	v V
}

// sortedEntries collects m's entries sorted by key, into buf when they fit.
func sortedEntries[V any](m map[string]V, buf []encEntry[V]) []encEntry[V] {
	es := buf[:0]
	for k, v := range m {
		es = append(es, encEntry[V]{k, v})
	}
	sortEncEntries(es)
	return es
}

// stringLists writes a map[string][]string (permission rules).
func (e *fastEncoder) stringLists(m map[string][]string) {
	if m == nil {
		e.raw("null")
		return
	}
	var buf [16]encEntry[[]string]
	e.b = append(e.b, '{')
	for i, en := range sortedEntries(m, buf[:]) {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(en.k)
		e.b = append(e.b, ':')
		e.strings(en.v)
	}
	e.b = append(e.b, '}')
}

// object writes a map[string]any at nesting depth (1 = a member of data).
func (e *fastEncoder) object(m map[string]any, depth int) {
	if m == nil {
		e.raw("null")
		return
	}
	if depth > maxEncDepth {
		e.bad = true
		return
	}
	var buf [16]encEntry[any]
	e.b = append(e.b, '{')
	for i, en := range sortedEntries(m, buf[:]) {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(en.k)
		e.b = append(e.b, ':')
		e.value(en.v, depth+1)
		if e.bad {
			return
		}
	}
	e.b = append(e.b, '}')
}

// value writes an open-typed value: the types JSON decoding and the
// resolver's details produce are written here, anything else is
// marshaled on its own with dataOptions.
func (e *fastEncoder) value(v any, depth int) {
	switch v := v.(type) {
	case nil:
		e.raw("null")
	case string:
		e.str(v)
	case bool:
		e.boolean(v)
	case float64:
		e.float(v)
	case int:
		e.b = strconv.AppendInt(e.b, int64(v), 10)
	case int64:
		e.b = strconv.AppendInt(e.b, v, 10)
	case int32:
		e.b = strconv.AppendInt(e.b, int64(v), 10)
	case uint64:
		e.b = strconv.AppendUint(e.b, v, 10)
	case uint32:
		e.b = strconv.AppendUint(e.b, uint64(v), 10)
	case uint:
		e.b = strconv.AppendUint(e.b, uint64(v), 10)
	case map[string]any:
		e.object(v, depth)
	case []any:
		if v == nil {
			e.raw("null")
			return
		}
		if depth > maxEncDepth {
			e.bad = true
			return
		}
		e.b = append(e.b, '[')
		for i, x := range v {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.value(x, depth+1)
			if e.bad {
				return
			}
		}
		e.b = append(e.b, ']')
	case []string:
		e.strings(v)
	default:
		e.marshal(v, depth)
	}
}

// float writes f as the reflection encoder does (ECMAScript number
// formatting); NaN and ±Inf are its errors.
func (e *fastEncoder) float(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.bad = true
		return
	}
	if a := math.Abs(f); a == 0 || a >= 1e-6 && a < 1e21 {
		e.b = strconv.AppendFloat(e.b, f, 'f', -1, 64)
		return
	}
	start := len(e.b)
	e.b = strconv.AppendFloat(e.b, f, 'e', -1, 64)
	// strconv writes at least two exponent digits ("1e-07"), ECMAScript
	// as many as needed ("1e-7").
	if n := len(e.b); n-start >= 4 && e.b[n-2] == '0' && (e.b[n-3] == '-' || e.b[n-3] == '+') {
		e.b[n-2] = e.b[n-1]
		e.b = e.b[:n-1]
	}
}

// marshal appends v marshaled on its own with dataOptions.
func (e *fastEncoder) marshal(v any, depth int) {
	if depth > maxEncDepth {
		e.bad = true
		return
	}
	w := encWriter{b: e.b}
	start := len(e.b)
	err := json.MarshalWrite(&w, v, dataOptions)
	e.b = w.b
	if err != nil || len(e.b)-start >= maxEncSubValue {
		e.bad = true
	}
}

type encWriter struct{ b []byte }

func (w *encWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (e *fastEncoder) policy(p *resolve.PermissionPolicy) {
	if p == nil {
		e.raw("null")
		return
	}
	e.raw(`{"mode":`)
	e.str(string(p.Mode))
	e.raw(`,"allow":`)
	e.stringLists(p.Allow)
	e.raw(`,"deny":`)
	e.stringLists(p.Deny)
	e.raw(`,"escalate":`)
	e.stringLists(p.Escalate)
	e.b = append(e.b, '}')
}

func (e *fastEncoder) sources(s *resolve.Sources) {
	e.raw(`{"identity":`)
	e.str(s.Identity)
	e.raw(`,"pack":`)
	e.str(s.Pack)
	e.raw(`,"model":`)
	e.str(s.Model)
	e.raw(`,"effort":`)
	e.str(s.Effort)
	e.raw(`,"modes":`)
	e.str(s.Modes)
	e.raw(`,"tools":`)
	e.str(s.Tools)
	e.raw(`,"permissions":`)
	e.str(s.Permissions)
	e.raw(`,"yolo":`)
	e.str(s.Yolo)
	e.raw(`,"bypass":`)
	e.str(s.Bypass)
	e.raw(`,"fast_mode":`)
	e.str(s.FastMode)
	e.raw(`,"lion_system":`)
	e.str(s.LionSystem)
	e.raw(`,"prompt":`)
	e.str(s.Prompt)
	e.raw(`,"artifact_defaults":`)
	e.str(s.ArtifactDefaults)
	e.raw(`,"timeout":`)
	e.str(s.Timeout)
	e.raw(`,"active":`)
	e.str(s.Active)
	e.b = append(e.b, '}')
}

func (e *fastEncoder) diagnostics(ds []resolve.Diagnostic) {
	if ds == nil {
		e.raw("null")
		return
	}
	e.b = append(e.b, '[')
	for i := range ds {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.raw(`{"code":`)
		e.str(ds[i].Code)
		e.raw(`,"message":`)
		e.str(ds[i].Message)
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ']')
}

// resolved writes ResolvedData. The system message is usually the prompt
// body, or a preamble and the body: the body's quoted form is then copied
// rather than quoted a second time.
func (e *fastEncoder) resolved(d *ResolvedData) {
	s := &d.ResolvedAgentSpec
	e.raw(`{"task_id":`)
	e.str(d.TaskID)
	e.raw(`,"identity":{"kind":`)
	e.str(string(s.Identity.Kind))
	e.raw(`,"name":`)
	e.str(s.Identity.Name)
	e.raw(`,"modes":`)
	e.strings(s.Identity.Modes)
	e.raw(`},"pack":{"name":`)
	e.str(s.Pack.Name)
	e.raw(`,"digest":`)
	e.str(s.Pack.Digest)
	e.raw(`},"active":`)
	e.boolean(s.Active)
	e.raw(`,"model":`)
	e.str(s.Model)
	e.raw(`,"effort":`)
	e.strPtr(s.Effort)
	e.raw(`,"tools":`)
	e.strings(s.Tools)
	e.raw(`,"permissions":`)
	e.policy(s.Permissions)
	e.raw(`,"yolo":`)
	e.boolean(s.Yolo)
	e.raw(`,"bypass":`)
	e.boolean(s.Bypass)
	e.raw(`,"fast_mode":`)
	e.boolean(s.FastMode)
	e.raw(`,"lion_system":`)
	e.boolean(s.LionSystem)
	e.raw(`,"prompt_disposition":`)
	e.str(string(s.PromptDisposition))
	e.raw(`,"prompt_body":`)
	bodyStart := len(e.b)
	e.str(s.PromptBody)
	bodyEnd := len(e.b)
	e.raw(`,"prompt_overlays":`)
	e.strings(s.PromptOverlays)
	e.raw(`,"grant_role_emissions":`)
	e.boolean(s.GrantRoleEmission)
	e.raw(`,"emits":`)
	e.strings(s.Emits)
	e.raw(`,"artifact_defaults":`)
	e.object(s.ArtifactDefaults, 1)
	e.raw(`,"timeout":`)
	if s.Timeout == nil {
		e.raw("null")
	} else {
		e.b = strconv.AppendInt(e.b, int64(*s.Timeout), 10)
	}
	e.raw(`,"resume_on_timeout":`)
	e.boolean(s.ResumeOnTimeout)
	e.raw(`,"sources":`)
	e.sources(&s.Sources)
	e.raw(`,"diagnostics":`)
	e.diagnostics(s.Diagnostics)
	e.raw(`,"system_message":`)
	// A string's quoted form is the concatenation of its parts' when each
	// part is valid UTF-8 (escaping is per rune); a valid body cannot
	// begin with a continuation byte, so the split is at a rune boundary.
	// If anything was invalid, e.bad is already set.
	if msg := d.SystemMessage; len(s.PromptBody) >= 64 && strings.HasSuffix(msg, s.PromptBody) {
		var ok bool
		e.b = append(e.b, '"')
		e.b, ok = appendStringBody(e.b, msg[:len(msg)-len(s.PromptBody)])
		e.bad = e.bad || !ok
		e.b = append(e.b, e.b[bodyStart+1:bodyEnd]...)
	} else {
		e.str(msg)
	}
	e.raw(`,"inputs_digest":`)
	e.str(d.InputsDigest)
	e.b = append(e.b, '}')
}

// failure writes FailureData as normalizedFailure(d) would be written.
func (e *fastEncoder) failure(d *FailureData) {
	stage := d.Stage
	if stage == "" {
		stage = d.Code.Stage()
	}
	e.raw(`{"task_id":`)
	e.strPtr(d.TaskID)
	e.raw(`,"stage":`)
	e.str(string(stage))
	e.raw(`,"code":`)
	e.str(string(d.Code))
	e.raw(`,"subject":`)
	e.strPtr(d.Subject)
	e.raw(`,"details":`)
	if d.Details == nil {
		e.raw("{}")
	} else {
		e.object(d.Details, 1)
	}
	e.raw(`,"message":`)
	e.str(d.Message)
	e.b = append(e.b, '}')
}

// data writes outcome data of the types encodeOutcome is given.
func (e *fastEncoder) data(v any) {
	switch d := v.(type) {
	case *ResolvedData:
		e.resolved(d)
	case *FailureData:
		e.failure(d)
	default:
		e.marshal(v, 0)
	}
}

// appendFast writes the event as appendTo does, with the hand-written
// data encoder, appending to b[:0]; false means appendTo must be used.
func (ev *outEvent) appendFast(b []byte, data any) ([]byte, bool) {
	e := fastEncoder{b: b[:0]}
	e.raw(`{"specversion":"` + SpecVersion + `","id":`)
	e.str(ev.id)
	e.raw(`,"source":`)
	e.str(ev.source)
	e.raw(`,"type":`)
	e.str(ev.typ)
	if ev.subject != "" {
		e.raw(`,"subject":`)
		e.str(ev.subject)
	}
	e.raw(`,"datacontenttype":"` + ContentTypeJSON + `"`)
	if ev.dataSchema != "" || ev.schemaFile != "" {
		// Quoting the two parts is quoting their concatenation when both
		// are valid UTF-8 (see resolved), and nothing else gets this far.
		var ok1, ok2 bool
		e.raw(`,"dataschema":"`)
		e.b, ok1 = appendStringBody(e.b, ev.dataSchema)
		e.b, ok2 = appendStringBody(e.b, ev.schemaFile)
		e.b = append(e.b, '"')
		e.bad = e.bad || !ok1 || !ok2
	}
	if !ev.time.IsZero() {
		// RFC 3339 text in UTC is digits and "-:.TZ": nothing to escape.
		e.raw(`,"time":"`)
		e.b = ev.time.UTC().AppendFormat(e.b, time.RFC3339Nano)
		e.b = append(e.b, '"')
	}
	e.raw(`,"data":`)
	e.data(data)
	e.ext(`,"`+ExtCausationID+`":`, ev.causationID)
	e.ext(`,"`+ExtTaskID+`":`, ev.taskID)
	e.ext(`,"`+ExtTraceParent+`":`, ev.traceParent)
	e.ext(`,"`+ExtTraceState+`":`, ev.traceState)
	e.b = append(e.b, '}')
	return e.b, !e.bad
}

// outcomeSizeHint guesses the encoded size of an outcome, a little high, so that
// a body usually gets one array of the right size.
func outcomeSizeHint(ev *outEvent, data any) int {
	n := 512 + len(ev.id) + len(ev.source) + len(ev.subject) + len(ev.dataSchema) +
		len(ev.causationID) + len(ev.taskID) + len(ev.traceParent) + len(ev.traceState)
	switch d := data.(type) {
	case *ResolvedData:
		text := len(d.PromptBody) + len(d.SystemMessage)
		n += 1536 + text + text/8 + 64*len(d.ArtifactDefaults)
	case *FailureData:
		n += 256 + len(d.Message) + len(d.Message)/8 + 64*len(d.Details)
	}
	return n
}

func (e *fastEncoder) ext(member, value string) {
	if value != "" {
		e.raw(member)
		e.str(value)
	}
}
