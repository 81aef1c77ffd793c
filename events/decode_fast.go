package events

import (
	"hash/maphash"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// eventBlock holds the pointer targets of one decoded task event: the
// event context and its optional attributes (but the rare dataschema),
// and the task's.
type eventBlock struct {
	ctx     event.EventContextV1
	dct     string
	subject string
	time    types.Timestamp
	task    taskBlock
}

// Bounds past which the fast path leaves a message to the slow one (they
// keep its duplicate checks linear in practice).
const (
	maxFastHeaders = 32
	maxFastExt     = 32
)

// decodeTaskFast is DecodeTask for the messages it can judge; ok is
// false for everything else, every invalid message among them (see
// task_fast.go).
func decodeTaskFast(h nats.Header, body []byte, opts DecodeOptions) (Incoming, bool) {
	p := getParser(nil, "")
	defer p.release()
	env := &p.env

	mode, ok := p.headers(h)
	if !ok {
		return Incoming{}, false
	}
	eb := new(eventBlock)
	p.blk = &eb.task
	var t Task
	if mode == modeStructured {
		p.b, p.s = body, string(body)
		if !p.structured(&t) || !env.hasData || len(env.data) > opts.maxData() {
			return Incoming{}, false
		}
	} else {
		if len(body) == 0 || len(body) > opts.maxData() {
			return Incoming{}, false
		}
		p.b, p.s = body, string(body)
		env.data, env.hasData = body, true
		if !p.task(&t) {
			return Incoming{}, false
		}
		if p.ws(); p.i != len(p.b) {
			return Incoming{}, false
		}
	}
	src, ok := p.check()
	if !ok {
		return Incoming{}, false
	}
	ref, ok := taskOK(&t)
	if !ok {
		return Incoming{}, false
	}

	inc := Incoming{ID: env.id.v, Source: env.source.v, Task: t, Ref: ref,
		TraceParent: env.traceParent, TraceState: env.traceState}
	if inc.TraceParent == "" {
		inc.TraceParent, inc.TraceState = env.extString(ExtTraceParent), env.extString(ExtTraceState)
	}
	inc.Event = p.event(eb, src)
	return inc, true
}

// headers reads what readEnvelope reads from the headers and picks the
// content mode the same way. It declines what readEnvelope would reject,
// and also non-ASCII header names (strings.ToLower folds some of them
// onto ASCII ones) and a name spelled twice. The ce- headers are read
// (as readBinary reads them) in the same pass, before the mode is known;
// in structured mode, which ignores them, what they set is dropped
// again, and so is any fault found in them.
func (p *fastParser) headers(h nats.Header) (mode contentMode, ok bool) {
	if len(h) > maxFastHeaders {
		return 0, false
	}
	env := &p.env
	var (
		contentType                                       string
		hasContentType, hasTP, hasTS, hasSpecVersion, bad bool
		nce                                               int
	)
	for k, vs := range h {
		if !isASCII(k) {
			return 0, false
		}
		switch {
		case len(k) >= len(ceHeaderPrefix) && foldEqual(k[:len(ceHeaderPrefix)], ceHeaderPrefix):
			name := lowerAttrName(k[len(ceHeaderPrefix):])
			hasSpecVersion = hasSpecVersion || name == "specversion"
			nce++
			bad = bad || !p.ceAttr(name, vs)
		case foldEqual(k, HeaderContentType):
			if hasContentType || len(vs) != 1 {
				return 0, false
			}
			hasContentType, contentType = true, strings.TrimSpace(vs[0])
		case foldEqual(k, HeaderTraceParent):
			if hasTP {
				return 0, false
			}
			hasTP = true
			if len(vs) > 0 {
				env.traceParent = strings.TrimSpace(vs[0])
			}
		case foldEqual(k, HeaderTraceState):
			if hasTS {
				return 0, false
			}
			hasTS = true
			if len(vs) > 0 {
				env.traceState = strings.TrimSpace(vs[0])
			}
		}
	}
	switch {
	case hasContentType && (contentType == ContentTypeCloudEventsJSON || isCloudEventsMediaType(contentType)):
		if !isStructuredJSON(contentType) {
			return 0, false
		}
		mode = modeStructured
	case hasSpecVersion:
		mode = modeBinary
	case !hasContentType && nce == 0:
		mode = modeStructured
	default:
		return 0, false
	}
	if mode == modeStructured {
		clear(env.ext)
		*env = envelope{ext: env.ext[:0], traceParent: env.traceParent, traceState: env.traceState}
	} else if bad || !p.binaryContentType(contentType, hasContentType) {
		return 0, false
	}
	env.mode = mode
	return mode, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// foldEqual reports whether ASCII s equals lower (lowercase) but for case.
func foldEqual(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// knownNames are the attribute names a ce- header most often carries;
// lowerAttrName returns these constants rather than allocating.
var knownNames = []string{"specversion", "id", "source", "type", "datacontenttype", "dataschema",
	"subject", "time", ExtTraceParent, ExtTraceState, ExtTaskID, ExtCausationID}

// lowerAttrName is strings.ToLower for an ASCII name.
func lowerAttrName(n string) string {
	upper := false
	for i := 0; i < len(n) && !upper; i++ {
		upper = 'A' <= n[i] && n[i] <= 'Z'
	}
	if !upper {
		return n
	}
	for _, k := range knownNames {
		if foldEqual(n, k) {
			return k
		}
	}
	return strings.ToLower(n)
}

// ceAttr reads one ce- header as readBinary does; false for anything it
// would report (a bad name, a repeated attribute, a bad value).
func (p *fastParser) ceAttr(name string, vs []string) bool {
	env := &p.env
	if !validAttrName(name) || name == "data" || len(vs) != 1 {
		return false
	}
	a := env.known(name)
	if a != nil && a.seen || a == nil && len(env.ext) >= maxFastExt {
		return false
	}
	if a == nil {
		for _, e := range env.ext {
			if e.name == name {
				return false
			}
		}
	}
	v, err := decodeHeaderValue(vs[0])
	if err != nil {
		return false
	}
	if a != nil {
		*a = attr{set: true, seen: true, v: v}
	} else {
		env.ext = append(env.ext, extAttr{name: name, value: v})
	}
	return true
}

// binaryContentType is readBinary's content-type rule: it must agree
// with ce-datacontenttype, and stands in for it when that is absent.
func (p *fastParser) binaryContentType(contentType string, hasContentType bool) bool {
	env := &p.env
	if hasContentType {
		if env.dataContentType.set && !sameMediaType(contentType, env.dataContentType.v) {
			return false
		}
		if !env.dataContentType.set {
			env.dataContentType = attr{set: true, v: contentType}
		}
	}
	return true
}

// structured reads the JSON event format as readStructured does, and the
// data member (which must be an object) straight into t.
func (p *fastParser) structured(t *Task) bool {
	env := &p.env
	if !p.consume('{') {
		return false
	}
	for {
		name, ok := p.name()
		if !ok {
			return false
		}
		switch a := env.known(name); {
		case name == "data":
			if env.hasData || p.peek() != '{' {
				return false
			}
			start := p.i
			if !p.task(t) {
				return false
			}
			env.data, env.hasData = p.b[start:p.i], true
		case a != nil:
			if a.seen {
				return false
			}
			a.seen = true
			v, null, ok := p.strOrNull()
			if !ok {
				return false
			}
			if !null {
				a.set, a.v = true, v
			}
		default:
			if !validAttrName(name) || len(p.extNames) >= maxFastExt || slices.Contains(p.extNames, name) {
				return false
			}
			p.extNames = append(p.extNames, name)
			v, ok := p.extValue()
			if !ok {
				return false
			}
			if v != nil {
				env.ext = append(env.ext, extAttr{name: name, value: v})
			}
		}
		more, ok := p.more('}')
		if !ok {
			return false
		}
		if !more {
			break
		}
	}
	p.ws()
	return p.i == len(p.b)
}

// extValue reads an extension value as extensionValue maps it: a string,
// a boolean, a 32-bit integer, or null (nil).
func (p *fastParser) extValue() (any, bool) {
	switch c := p.peek(); {
	case c == 'n':
		return nil, p.lit("null")
	case c == 't':
		return true, p.lit("true")
	case c == 'f':
		return false, p.lit("false")
	case c == '"':
		s, ok := p.str()
		if !ok {
			return nil, false
		}
		return s, true
	case c == '-' || '0' <= c && c <= '9':
		// An integer; a fraction or exponent is declined (by more, at
		// the '.' or 'e'), as is a leading zero before a digit.
		start := p.i
		if c == '-' {
			p.i++
		}
		digits := p.i
		if p.i < len(p.b) && p.b[p.i] == '0' {
			p.i++
		} else {
			for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
				p.i++
			}
		}
		if p.i == digits {
			return nil, false
		}
		n, err := strconv.ParseInt(p.s[start:p.i], 10, 32)
		if err != nil {
			return nil, false
		}
		return int32(n), true
	}
	return nil, false
}

// check is envelope.check's success condition for a task event. It
// returns the parsed source and fills env.schemaURL and env.timeVal.
func (p *fastParser) check() (url.URL, bool) {
	env := &p.env
	if !env.specVersion.set || env.specVersion.v != SpecVersion ||
		!requiredOK(env.id) || !requiredOK(env.source) || !requiredOK(env.typ) ||
		env.typ.v != TypeTaskAssigned ||
		len(env.id.v) > MaxAttributeBytes || len(env.source.v) > MaxAttributeBytes ||
		len(env.subject.v) > MaxAttributeBytes || len(env.dataSchema.v) > MaxAttributeBytes {
		return url.URL{}, false
	}
	if a := env.dataContentType; a.set && !isJSONMediaType(a.v) {
		return url.URL{}, false
	}
	if a := env.subject; a.set && !requiredOK(a) {
		return url.URL{}, false
	}
	for _, e := range env.ext {
		if s, ok := e.value.(string); ok && (len(s) > MaxAttributeBytes || !noControl(s)) {
			return url.URL{}, false
		}
	}
	if a := env.time; a.set {
		t, err := time.Parse(time.RFC3339Nano, a.v)
		if err != nil {
			return url.URL{}, false
		}
		env.timeVal = t
	}
	if a := env.dataSchema; a.set {
		u, err := url.Parse(a.v)
		if err != nil || !u.IsAbs() {
			return url.URL{}, false
		}
		env.schemaURL = u
	}
	return sourceURL(env.source.v)
}

// event is toEvent for a checked envelope, with the context and its
// pointer targets in eb.
func (p *fastParser) event(eb *eventBlock, src url.URL) event.Event {
	env := &p.env
	ctx := &eb.ctx
	ctx.ID, ctx.Type, ctx.Source = env.id.v, env.typ.v, types.URIRef{URL: src}
	if a := env.dataContentType; a.set {
		eb.dct = a.v
		ctx.DataContentType = &eb.dct
	}
	if a := env.subject; a.set {
		eb.subject = a.v
		ctx.Subject = &eb.subject
	}
	if env.schemaURL != nil {
		ctx.DataSchema = &types.URI{URL: *env.schemaURL}
	}
	if !env.timeVal.IsZero() {
		eb.time = types.Timestamp{Time: env.timeVal}
		ctx.Time = &eb.time
	}
	if len(env.ext) > 0 {
		ctx.Extensions = make(map[string]any, len(env.ext))
		for _, x := range env.ext {
			ctx.Extensions[x.name] = x.value
		}
	}
	return event.Event{Context: ctx, DataEncoded: env.data}
}

// sourceURL is url.Parse(source) through a small cache: a fleet's tasks
// come from a few sources, and parsing one is a third of an envelope's
// cost. Entries hold their own copy of the source, never a substring of
// a message. A URL is copied out by value; its only pointer (User) is to
// an immutable Userinfo.
func sourceURL(source string) (url.URL, bool) {
	slot := &sourceCache[maphash.String(sourceSeed, source)%uint64(len(sourceCache))]
	if e := slot.Load(); e != nil && e.source == source {
		return e.u, true
	}
	s := strings.Clone(source)
	u, err := url.Parse(s)
	if err != nil {
		return url.URL{}, false
	}
	slot.Store(&sourceEntry{source: s, u: *u})
	return *u, true
}

type sourceEntry struct {
	source string
	u      url.URL
}

var (
	sourceSeed  = maphash.MakeSeed()
	sourceCache [64]atomic.Pointer[sourceEntry]
)
