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

// fastEncoder's writers append JSON to a buffer. bad is set when the
// value holds something only the reflection encoder reproduces exactly;
// the buffer is then garbage and must be discarded.
type fastEncoder struct {
	bad   bool
	fixed *FixedFields // see OutcomeMeta.Fixed
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

// The writers below take the buffer and return it extended, so that it
// lives in registers rather than behind the encoder pointer (which would
// also cost a write barrier per store while the GC runs).

// str appends s as a JSON string. Most strings need no escaping: they
// are copied in one piece.
func (e *fastEncoder) str(b []byte, s string) []byte {
	b = append(b, '"')
	if n := plainPrefix(s); n == len(s) {
		b = append(b, s...)
	} else {
		// s[:n] is ASCII: the rest starts at a rune boundary.
		var ok bool
		if b, ok = appendStringBody(append(b, s[:n]...), s[n:]); !ok {
			e.bad = true
		}
	}
	return append(b, '"')
}

func boolean(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

func (e *fastEncoder) strPtr(b []byte, p *string) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return e.str(b, *p)
}

func (e *fastEncoder) strings(b []byte, v []string) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.str(b, s)
	}
	return append(b, ']')
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
func (e *fastEncoder) stringLists(b []byte, m map[string][]string) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var buf [16]encEntry[[]string]
	b = append(b, '{')
	for i, en := range sortedEntries(m, buf[:]) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(e.str(b, en.k), ':')
		b = e.strings(b, en.v)
	}
	return append(b, '}')
}

// object writes a map[string]any at nesting depth (1 = a member of data).
func (e *fastEncoder) object(b []byte, m map[string]any, depth int) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	if depth > maxEncDepth {
		e.bad = true
		return b
	}
	var buf [16]encEntry[any]
	b = append(b, '{')
	for i, en := range sortedEntries(m, buf[:]) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(e.str(b, en.k), ':')
		if b = e.value(b, en.v, depth+1); e.bad {
			return b
		}
	}
	return append(b, '}')
}

// value writes an open-typed value: the types JSON decoding and the
// resolver's details produce are written here, anything else is
// marshaled on its own with dataOptions.
func (e *fastEncoder) value(b []byte, v any, depth int) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case string:
		return e.str(b, v)
	case bool:
		return boolean(b, v)
	case float64:
		return e.float(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case int32:
		return strconv.AppendInt(b, int64(v), 10)
	case uint64:
		return strconv.AppendUint(b, v, 10)
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10)
	case uint:
		return strconv.AppendUint(b, uint64(v), 10)
	case map[string]any:
		return e.object(b, v, depth)
	case []any:
		if v == nil {
			return append(b, "null"...)
		}
		if depth > maxEncDepth {
			e.bad = true
			return b
		}
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b = e.value(b, x, depth+1); e.bad {
				return b
			}
		}
		return append(b, ']')
	case []string:
		return e.strings(b, v)
	}
	return e.marshal(b, v, depth)
}

// float writes f as the reflection encoder does (ECMAScript number
// formatting); NaN and ±Inf are its errors.
func (e *fastEncoder) float(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		e.bad = true
		return b
	}
	if a := math.Abs(f); a == 0 || a >= 1e-6 && a < 1e21 {
		return strconv.AppendFloat(b, f, 'f', -1, 64)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'e', -1, 64)
	// strconv writes at least two exponent digits ("1e-07"), ECMAScript
	// as many as needed ("1e-7").
	if n := len(b); n-start >= 4 && b[n-2] == '0' && (b[n-3] == '-' || b[n-3] == '+') {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

// marshal appends v marshaled on its own with dataOptions.
func (e *fastEncoder) marshal(b []byte, v any, depth int) []byte {
	if depth > maxEncDepth {
		e.bad = true
		return b
	}
	w := encWriter{b: b}
	err := json.MarshalWrite(&w, v, dataOptions)
	if err != nil || len(w.b)-len(b) >= maxEncSubValue {
		e.bad = true
	}
	return w.b
}

type encWriter struct{ b []byte }

func (w *encWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (e *fastEncoder) policy(b []byte, p *resolve.PermissionPolicy) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	b = e.str(append(b, `{"mode":`...), string(p.Mode))
	b = e.stringLists(append(b, `,"allow":`...), p.Allow)
	b = e.stringLists(append(b, `,"deny":`...), p.Deny)
	b = e.stringLists(append(b, `,"escalate":`...), p.Escalate)
	return append(b, '}')
}

func (e *fastEncoder) sources(b []byte, s *resolve.Sources) []byte {
	b = e.str(append(b, `{"identity":`...), s.Identity)
	b = e.str(append(b, `,"pack":`...), s.Pack)
	b = e.str(append(b, `,"model":`...), s.Model)
	b = e.str(append(b, `,"effort":`...), s.Effort)
	b = e.str(append(b, `,"modes":`...), s.Modes)
	b = e.str(append(b, `,"tools":`...), s.Tools)
	b = e.str(append(b, `,"permissions":`...), s.Permissions)
	b = e.str(append(b, `,"yolo":`...), s.Yolo)
	b = e.str(append(b, `,"bypass":`...), s.Bypass)
	b = e.str(append(b, `,"fast_mode":`...), s.FastMode)
	b = e.str(append(b, `,"lion_system":`...), s.LionSystem)
	b = e.str(append(b, `,"prompt":`...), s.Prompt)
	b = e.str(append(b, `,"artifact_defaults":`...), s.ArtifactDefaults)
	b = e.str(append(b, `,"timeout":`...), s.Timeout)
	b = e.str(append(b, `,"active":`...), s.Active)
	return append(b, '}')
}

func (e *fastEncoder) diagnostics(b []byte, ds []resolve.Diagnostic) []byte {
	if ds == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.str(append(b, `{"code":`...), ds[i].Code)
		b = e.str(append(b, `,"message":`...), ds[i].Message)
		b = append(b, '}')
	}
	return append(b, ']')
}

// resolved writes ResolvedData. The system message is usually the prompt
// body, or a preamble and the body: the body's quoted form is then copied
// rather than quoted a second time.
func (e *fastEncoder) resolved(b []byte, d *ResolvedData) []byte {
	s := &d.ResolvedAgentSpec
	b = e.str(append(b, `{"task_id":`...), d.TaskID)
	b = e.fixedPart(b, 0, s, (*fastEncoder).fixedHead)
	b = append(b, `,"prompt_body":`...)
	bodyStart := len(b)
	if d.PromptTail == "" {
		b = e.strCached(b, s.PromptBody)
	} else {
		// Kept apart, the body before the tail is the same text in every
		// outcome of a plan, and is cached whole.
		b = e.tail(e.contentsCached(append(b, '"'), s.PromptBody), d.PromptTail)
	}
	bodyEnd := len(b)
	b = e.strings(append(b, `,"prompt_overlays":`...), s.PromptOverlays)
	b = e.fixedPart(b, 1, s, (*fastEncoder).fixedMid)
	if f := e.fixed; f != nil && !f.filled {
		// Kept only when all of it was written here: an invalid string
		// sends the whole outcome to the reflection encoder.
		f.filled = !e.bad
	}
	b = append(b, `,"system_message":`...)
	// A string's quoted form is the concatenation of its parts' when each
	// part is valid UTF-8 (escaping is per rune); a valid body cannot
	// begin with a continuation byte, so the split is at a rune boundary.
	// If anything was invalid, e.bad is already set. The part before the
	// body is the preamble, the same in every outcome, so its quoted form
	// comes from the table too. With a tail, both texts end with it after
	// a separator: the body's quoted form, copied, includes them.
	if msg := d.SystemMessage; len(s.PromptBody) >= 64 && strings.HasSuffix(msg, s.PromptBody) {
		b = e.contentsCached(append(b, '"'), msg[:len(msg)-len(s.PromptBody)])
		b = append(b, b[bodyStart+1:bodyEnd]...)
	} else if d.PromptTail != "" {
		b = e.tail(e.contentsCached(append(b, '"'), msg), d.PromptTail)
	} else {
		b = e.str(b, msg)
	}
	b = e.str(append(b, `,"inputs_digest":`...), d.InputsDigest)
	return append(b, '}')
}

// tail ends a string whose contents b holds so far with a block
// separator and t, and its closing quote. The parts' quoted forms make
// the whole's when each is valid UTF-8; if t is not, e.bad is set.
func (e *fastEncoder) tail(b []byte, t string) []byte {
	b, ok := appendStringBody(append(b, quotedSeparator...), t)
	e.bad = e.bad || !ok
	return append(b, '"')
}

// quotedSeparator is resolve.BlockSeparator's quoted form, the one
// Complete puts between the parts.
var quotedSeparator, _ = appendStringBody(nil, resolve.BlockSeparator)

// fixedPart appends part i of the fixed fields (see FixedFields): copied
// from e.fixed once it is filled, else written by write and kept there.
func (e *fastEncoder) fixedPart(b []byte, i int, s *resolve.ResolvedAgentSpec, write func(*fastEncoder, []byte, *resolve.ResolvedAgentSpec) []byte) []byte {
	f := e.fixed
	if f != nil && f.filled {
		return append(b, f.parts[i]...)
	}
	start := len(b)
	b = write(e, b, s)
	if f != nil {
		f.parts[i] = append(f.parts[i][:0], b[start:]...)
	}
	return b
}

// fixedHead and fixedMid write the fields of a resolved spec that every
// result of one plan shares (see FixedFields): those before the prompt
// body, and those between the prompt overlays and the system message.
func (e *fastEncoder) fixedHead(b []byte, s *resolve.ResolvedAgentSpec) []byte {
	b = e.str(append(b, `,"identity":{"kind":`...), string(s.Identity.Kind))
	b = e.str(append(b, `,"name":`...), s.Identity.Name)
	b = e.strings(append(b, `,"modes":`...), s.Identity.Modes)
	b = e.str(append(b, `},"pack":{"name":`...), s.Pack.Name)
	b = e.str(append(b, `,"digest":`...), s.Pack.Digest)
	b = boolean(append(b, `},"active":`...), s.Active)
	b = e.str(append(b, `,"model":`...), s.Model)
	b = e.strPtr(append(b, `,"effort":`...), s.Effort)
	b = e.strings(append(b, `,"tools":`...), s.Tools)
	b = e.policy(append(b, `,"permissions":`...), s.Permissions)
	b = boolean(append(b, `,"yolo":`...), s.Yolo)
	b = boolean(append(b, `,"bypass":`...), s.Bypass)
	b = boolean(append(b, `,"fast_mode":`...), s.FastMode)
	b = boolean(append(b, `,"lion_system":`...), s.LionSystem)
	return e.str(append(b, `,"prompt_disposition":`...), string(s.PromptDisposition))
}

func (e *fastEncoder) fixedMid(b []byte, s *resolve.ResolvedAgentSpec) []byte {
	b = boolean(append(b, `,"grant_role_emissions":`...), s.GrantRoleEmission)
	b = e.strings(append(b, `,"emits":`...), s.Emits)
	b = e.object(append(b, `,"artifact_defaults":`...), s.ArtifactDefaults, 1)
	b = append(b, `,"timeout":`...)
	if s.Timeout == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendInt(b, int64(*s.Timeout), 10)
	}
	b = boolean(append(b, `,"resume_on_timeout":`...), s.ResumeOnTimeout)
	b = e.sources(append(b, `,"sources":`...), &s.Sources)
	return e.diagnostics(append(b, `,"diagnostics":`...), s.Diagnostics)
}

// failure writes FailureData as normalizedFailure(d) would be written.
func (e *fastEncoder) failure(b []byte, d *FailureData) []byte {
	stage := d.Stage
	if stage == "" {
		stage = d.Code.Stage()
	}
	b = e.strPtr(append(b, `{"task_id":`...), d.TaskID)
	b = e.str(append(b, `,"stage":`...), string(stage))
	b = e.str(append(b, `,"code":`...), string(d.Code))
	b = e.strPtr(append(b, `,"subject":`...), d.Subject)
	b = append(b, `,"details":`...)
	if d.Details == nil {
		b = append(b, "{}"...)
	} else {
		b = e.object(b, d.Details, 1)
	}
	b = e.str(append(b, `,"message":`...), d.Message)
	return append(b, '}')
}

// data writes outcome data of the types encodeOutcome is given.
func (e *fastEncoder) data(b []byte, v any) []byte {
	switch d := v.(type) {
	case *ResolvedData:
		return e.resolved(b, d)
	case *FailureData:
		return e.failure(b, d)
	}
	return e.marshal(b, v, 0)
}

// appendFast writes the event as appendTo does, with the hand-written
// data encoder, appending to b[:0]; false means appendTo must be used.
func (ev *outEvent) appendFast(b []byte, data any) ([]byte, bool) {
	e := fastEncoder{fixed: ev.fixed}
	b = e.str(append(b[:0], `{"specversion":"`+SpecVersion+`","id":`...), ev.id)
	b = e.str(append(b, `,"source":`...), ev.source)
	b = e.str(append(b, `,"type":`...), ev.typ)
	if ev.subject != "" {
		b = e.str(append(b, `,"subject":`...), ev.subject)
	}
	b = append(b, `,"datacontenttype":"`+ContentTypeJSON+`"`...)
	if ev.dataSchema != "" || ev.schemaFile != "" {
		// Quoting the two parts is quoting their concatenation when both
		// are valid UTF-8 (see resolved), and nothing else gets this far.
		var ok1, ok2 bool
		b, ok1 = appendStringBody(append(b, `,"dataschema":"`...), ev.dataSchema)
		b, ok2 = appendStringBody(b, ev.schemaFile)
		b = append(b, '"')
		e.bad = e.bad || !ok1 || !ok2
	}
	if !ev.time.IsZero() {
		// RFC 3339 text in UTC is digits and "-:.TZ": nothing to escape.
		b = ev.time.UTC().AppendFormat(append(b, `,"time":"`...), time.RFC3339Nano)
		b = append(b, '"')
	}
	b = e.data(append(b, `,"data":`...), data)
	b = e.ext(b, `,"`+ExtCausationID+`":`, ev.causationID)
	b = e.ext(b, `,"`+ExtTaskID+`":`, ev.taskID)
	b = e.ext(b, `,"`+ExtTraceParent+`":`, ev.traceParent)
	b = e.ext(b, `,"`+ExtTraceState+`":`, ev.traceState)
	return append(b, '}'), !e.bad
}

func (e *fastEncoder) ext(b []byte, member, value string) []byte {
	if value == "" {
		return b
	}
	return e.str(append(b, member...), value)
}

// outcomeSizeHint guesses the encoded size of an outcome, a little high,
// so that a body usually gets one array of the right size.
func outcomeSizeHint(ev *outEvent, data any) int {
	n := 512 + len(ev.id) + len(ev.source) + len(ev.subject) + len(ev.dataSchema) +
		len(ev.causationID) + len(ev.taskID) + len(ev.traceParent) + len(ev.traceState)
	switch d := data.(type) {
	case *ResolvedData:
		text := len(d.PromptBody) + len(d.SystemMessage) + 2*(len(d.PromptTail)+len(resolve.BlockSeparator))
		n += 1536 + text + text/8 + 64*len(d.ArtifactDefaults)
	case *FailureData:
		n += 256 + len(d.Message) + len(d.Message)/8 + 64*len(d.Details)
	}
	return n
}
