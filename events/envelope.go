package events

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// Media types and header names of the CloudEvents NATS binding.
const (
	ContentTypeCloudEventsJSON = "application/cloudevents+json"
	ContentTypeJSON            = "application/json"
	SpecVersion                = "1.0"

	HeaderContentType = "content-type"
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
	HeaderMsgID       = "Nats-Msg-Id"
	ceHeaderPrefix    = "ce-"
)

// Extension attribute names carried by outcome events.
const (
	ExtTaskID      = "taskid"
	ExtCausationID = "causationid"
	ExtTraceParent = "traceparent"
	ExtTraceState  = "tracestate"
)

// attr is one string-typed context attribute as read.
type attr struct {
	set bool
	v   string
}

// envelope is a CloudEvent as read from a NATS message, before the
// attribute values are checked.
type envelope struct {
	read bool // a content mode applied: the message was read as an event
	// Context attributes of CloudEvents 1.0.
	specVersion, id, source, typ, dataContentType, dataSchema, subject, time attr
	// ext holds the extensions (string, int32 or bool); badExt names the
	// first, in message order, check rejects (badExtAt is its place).
	ext                 map[string]any
	noValue             map[string]bool // extensions null or reported, for the repeat check
	badExt              string
	badExtAt            int
	data                []byte
	hasData, dataBase64 bool
	// W3C trace context from plain NATS headers (not ce- extensions).
	traceParent, traceState string
	// Parsed by check, reused by toEvent.
	sourceURL, schemaURL *url.URL
	timeVal              time.Time
}

type namedAttr struct {
	name string
	*attr
}

// attrs names the context attributes.
func (env *envelope) attrs() [8]namedAttr {
	return [...]namedAttr{{"specversion", &env.specVersion}, {"id", &env.id}, {"source", &env.source}, {"type", &env.typ},
		{"datacontenttype", &env.dataContentType}, {"dataschema", &env.dataSchema}, {"subject", &env.subject}, {"time", &env.time}}
}

// addExt records an extension read at place at (what orders the message's
// attributes), so that check reports the first bad one in message order.
func (env *envelope) addExt(name string, v any, at int) {
	if env.ext == nil {
		env.ext = map[string]any{}
	}
	env.ext[name] = v
	if s, ok := v.(string); ok && (controlIndex(s) >= 0 || len(s) > MaxAttributeBytes) && (env.badExt == "" || at < env.badExtAt) {
		env.badExt, env.badExtAt = name, at
	}
}

// readEnvelope reads a message in either content mode of the CloudEvents
// NATS binding (1.0.3): a content-type starting "application/cloudevents"
// (case-insensitive) means structured; otherwise every attribute is in a
// ce-<name> header (binary mode; names case-insensitive, values
// percent-encoded). A message with neither is read as structured, as the
// binding's earlier versions and sdk-go's structured writer send it.
// Attributes are read, not checked (check does that), and reading goes on
// after a problem so that id and source are known whenever readable.
func readEnvelope(h nats.Header, body []byte) (*envelope, *DecodeError) {
	env := &envelope{}
	var (
		contentType    string
		hasContentType bool
		ce             []ceHeader
		first          *DecodeError
		// Keys of the headers used, so that when one name is spelled
		// twice the choice does not depend on map order.
		ctKey, tpKey, tsKey string
	)
	pick := func(dst, dstKey *string, k string, vs []string) {
		if len(vs) > 0 && (*dstKey == "" || k < *dstKey) {
			*dst, *dstKey = strings.TrimSpace(vs[0]), k
		}
	}
	for k, vs := range h {
		switch lk := strings.ToLower(k); {
		case strings.HasPrefix(lk, ceHeaderPrefix):
			ce = append(ce, ceHeader{name: lk[len(ceHeaderPrefix):], key: k, values: vs})
		case lk == HeaderContentType:
			if hasContentType || len(vs) != 1 {
				first = eventInvalid(HeaderContentType, ReasonDuplicateAttribute, "the content-type header appears more than once")
			}
			hasContentType = true
			pick(&contentType, &ctKey, k, vs)
		case lk == HeaderTraceParent:
			pick(&env.traceParent, &tpKey, k, vs)
		case lk == HeaderTraceState:
			pick(&env.traceState, &tsKey, k, vs)
		}
	}
	// Header order is a map's; sort (by attribute, then spelling) so the
	// first error is stable and repeated attributes are adjacent.
	slices.SortFunc(ce, func(a, b ceHeader) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.key, b.key))
	})

	structured := !hasContentType && len(ce) == 0
	switch {
	case hasContentType && strings.HasPrefix(mediaTypeOf(contentType), "application/cloudevents"):
		if !sameMediaType(contentType, ContentTypeCloudEventsJSON) {
			return env, eventInvalid(HeaderContentType, ReasonNotCloudEvent,
				"content-type %s is not the CloudEvents JSON format (batch and other formats are not supported)", printable(contentType))
		}
		structured = true
	case structured, slices.ContainsFunc(ce, func(c ceHeader) bool { return c.name == "specversion" }):
	default:
		return env, eventInvalid("specversion", ReasonNotCloudEvent,
			"not a CloudEvent: no content-type %q and no ce-specversion header", ContentTypeCloudEventsJSON)
	}
	env.read = true
	if structured {
		return env, cmp.Or(first, env.readStructured(body))
	}
	return env, cmp.Or(first, env.readBinary(ce, contentType, hasContentType, body))
}

type ceHeader struct {
	name, key string
	values    []string
}

func mediaTypeOf(ct string) string {
	t, _, _ := strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(t))
}

// sameMediaType compares two content types as media types, so that
// "application/json; charset=utf-8" is "application/json".
func sameMediaType(a, b string) bool {
	ta, pa, okA := parseMediaType(a)
	tb, pb, okB := parseMediaType(b)
	return a == b || okA && okB && ta == tb && maps.Equal(pa, pb)
}

// parseMediaType is mime.ParseMediaType without a charset=utf-8 parameter
// (any case): JSON has no other encoding (RFC 8259), so the parameter
// says nothing. Another charset value is kept, lowercased.
func parseMediaType(ct string) (string, map[string]string, bool) {
	t, p, err := mime.ParseMediaType(ct)
	if cs, ok := p["charset"]; ok {
		p["charset"] = strings.ToLower(cs)
		if p["charset"] == "utf-8" {
			delete(p, "charset")
		}
	}
	return t, p, err == nil
}

// validAttrName: CloudEvents attribute names are lowercase ASCII letters
// and digits.
func validAttrName(n string) bool {
	return n != "" && !strings.ContainsFunc(n, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') })
}

// readBinary reads the ce- headers, in readEnvelope's order; the first
// problem is the one reported.
func (env *envelope) readBinary(ce []ceHeader, contentType string, hasContentType bool, body []byte) *DecodeError {
	var first *DecodeError
	note := func(err *DecodeError) { first = cmp.Or(first, err) }
	attrs := env.attrs()
	for i, c := range ce {
		hdr := ceHeaderPrefix + c.name
		if !simpleKey(c.name) {
			hdr = printable(hdr)
		}
		if !validAttrName(c.name) || c.name == "data" {
			note(eventInvalid(hdr, ReasonInvalidAttributeName, "header %s does not name a CloudEvents attribute (lowercase a-z and 0-9)", printable(c.key)))
			continue
		}
		if len(c.values) != 1 || i > 0 && ce[i-1].name == c.name || i+1 < len(ce) && ce[i+1].name == c.name {
			note(eventInvalid(hdr, ReasonDuplicateAttribute, "header %s appears more than once", hdr))
			continue
		}
		v, err := decodeHeaderValue(c.values[0])
		if err != nil {
			note(eventInvalid(hdr, ReasonInvalidValue, "header %s: %v", hdr, err))
			continue
		}
		if k := slices.IndexFunc(attrs[:], func(a namedAttr) bool { return a.name == c.name }); k >= 0 {
			*attrs[k].attr = attr{set: true, v: v}
		} else {
			env.addExt(c.name, v, i)
		}
	}
	if hasContentType {
		if !env.dataContentType.set {
			env.dataContentType = attr{set: true, v: contentType}
		} else if !sameMediaType(contentType, env.dataContentType.v) {
			note(eventInvalid(HeaderContentType, ReasonConflict, "content-type %s contradicts ce-datacontenttype %s",
				printable(contentType), printable(env.dataContentType.v)))
		}
	}
	if len(body) > 0 {
		env.data, env.hasData = body, true
	}
	return first
}

// decodeHeaderValue undoes the binding's header encoding: an optional
// RFC 7230 quoted-string, then one round of percent-decoding; the result
// must be valid UTF-8. Raw UTF-8 (which some writers send unencoded) is
// accepted when it is valid.
func decodeHeaderValue(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		i := 1
		for ; i < len(v) && v[i] != '"'; i++ {
			if v[i] == '\\' && i+1 < len(v) {
				i++
			}
			b.WriteByte(v[i])
		}
		switch {
		case i >= len(v):
			return "", errors.New("unterminated quoted string")
		case i != len(v)-1:
			return "", errors.New("text after a closing quote")
		}
		v = b.String()
	}
	// Path unescaping is percent-decoding alone ('+' stays '+').
	v, err := url.PathUnescape(v)
	if err != nil {
		return "", err
	}
	if !utf8.ValidString(v) {
		return "", errors.New("invalid UTF-8")
	}
	return v, nil
}

// encodeHeaderValue percent-encodes per the binding: space, '"', '%' and
// every byte outside U+0021–U+007E, with upper-case hex digits.
func encodeHeaderValue(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c == '"' || c == '%' || c >= 0x7f {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// check validates the attributes in a fixed order (specversion, id,
// source, type, datacontenttype, dataschema, subject, time, extensions);
// the first failure wins. The type must be one of types.
func (env *envelope) check(types ...string) *DecodeError {
	switch {
	case !env.specVersion.set:
		return eventInvalid("specversion", ReasonMissing, "specversion is missing")
	case env.specVersion.v != SpecVersion:
		return eventInvalid("specversion", ReasonUnsupportedSpecVersion, "specversion %s is not supported (only %q)", printable(env.specVersion.v), SpecVersion)
	}
	attrs := env.attrs()
	for _, a := range attrs[1:4] { // id, source, type
		if err := requiredString(a.name, *a.attr); err != nil {
			return err
		}
	}
	for _, a := range []namedAttr{{"id", &env.id}, {"source", &env.source}, {"type", &env.typ}, {"subject", &env.subject}, {"dataschema", &env.dataSchema}} {
		if len(a.v) > MaxAttributeBytes {
			return eventInvalid(a.name, ReasonTooLarge, "%s is %d bytes, over the %d-byte limit", a.name, len(a.v), MaxAttributeBytes)
		}
	}
	u, err := url.Parse(env.source.v)
	if err != nil || !uriText(env.source.v) {
		return eventInvalid("source", ReasonInvalidValue, "source %s is not a URI-reference", printable(env.source.v))
	}
	env.sourceURL = u
	if !slices.Contains(types, env.typ.v) {
		return eventInvalid("type", ReasonUnexpectedEventType, "type %s is not %s", printable(env.typ.v), strings.Join(types, " or "))
	}
	if a := env.dataContentType; a.set && !sameMediaType(a.v, ContentTypeJSON) {
		return eventInvalid("datacontenttype", ReasonUnsupportedContentType, "datacontenttype %s is not supported (only %s)", printable(a.v), ContentTypeJSON)
	}
	if a := env.dataSchema; a.set {
		u, err := url.Parse(a.v)
		if err != nil || !u.IsAbs() || !uriText(a.v) {
			return eventInvalid("dataschema", ReasonInvalidValue, "dataschema %s is not an absolute URI", printable(a.v))
		}
		env.schemaURL = u
	}
	if a := env.subject; a.set {
		if err := requiredString("subject", a); err != nil {
			return err
		}
	}
	if a := env.time; a.set {
		t, err := time.Parse(time.RFC3339Nano, a.v)
		if err != nil || !rfc3339.MatchString(a.v) {
			return eventInvalid("time", ReasonInvalidValue, "time %s is not an RFC 3339 timestamp", printable(a.v))
		}
		env.timeVal = t
	}
	if name := env.badExt; name != "" {
		s := env.ext[name].(string)
		// A name is not bounded as a value is: it is echoed as printable.
		n := printableName(name)
		if controlIndex(s) >= 0 {
			return eventInvalid(n, ReasonInvalidValue, "extension %s has a control character", n)
		}
		return eventInvalid(n, ReasonTooLarge, "extension %s is %d bytes, over the %d-byte limit", n, len(s), MaxAttributeBytes)
	}
	return nil
}

// uriText reports whether s holds only what RFC 3986 lets a URI (or a
// URI-reference) hold: ASCII letters and digits, "-._~", the delimiters
// ":/?#[]@!$&'()*+,;=", and "%" with two hex digits. url.Parse alone also
// takes spaces, the characters "<>\^{|} and the backquote, and any
// non-ASCII character (an IRI is not a URI): the bidirectional and
// line-separator characters, C1 controls.
func uriText(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._~:/?#[]@!$&'()*+,;=", c) >= 0:
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// rfc3339 is the form of an RFC 3339 date-time (section 5.6) that
// time.Parse reads; time.Parse alone also takes a one-digit hour, a comma
// before the fraction and offsets past 23:59.
var rfc3339 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d)$`)

func requiredString(name string, a attr) *DecodeError {
	switch {
	case !a.set:
		return eventInvalid(name, ReasonMissing, "%s is missing", name)
	case strings.TrimSpace(a.v) == "":
		return eventInvalid(name, ReasonInvalidValue, "%s is empty", name)
	case controlIndex(a.v) >= 0:
		return eventInvalid(name, ReasonInvalidValue, "%s has a control character", name)
	}
	return nil
}

// usable is an id or source value that can name the input (for the
// outcome id): present, not blank, within the limit, without control
// characters; otherwise "".
func usable(a attr) string {
	if a.set && strings.TrimSpace(a.v) != "" && controlIndex(a.v) < 0 && len(a.v) <= MaxAttributeBytes {
		return a.v
	}
	return ""
}

// MaxAttributeBytes bounds every string attribute of an incoming event.
// Outcomes echo the input's id (causationid) and subject: an 800 KB id
// would push every outcome over the server's max payload, and the task
// would end delivery_exhausted instead of with its typed failure.
const MaxAttributeBytes = 1024

// toEvent builds the sdk-go event from what was read (what was readable,
// when check failed). The context is filled directly: sdk-go's setters
// would parse the URIs again and trim the values.
func (env *envelope) toEvent() event.Event {
	ctx := &event.EventContextV1{ID: env.id.v, Type: env.typ.v}
	if env.source.set {
		u := env.sourceURL
		if u == nil {
			u, _ = url.Parse(env.source.v)
		}
		if u != nil {
			ctx.Source = types.URIRef{URL: *u}
		}
	}
	if env.dataContentType.set {
		ctx.DataContentType = &env.dataContentType.v
	}
	if env.subject.set {
		ctx.Subject = &env.subject.v
	}
	if env.schemaURL != nil {
		ctx.DataSchema = &types.URI{URL: *env.schemaURL}
	}
	if !env.timeVal.IsZero() {
		ctx.Time = &types.Timestamp{Time: env.timeVal}
	}
	if len(env.ext) > 0 {
		ctx.Extensions = env.ext
	}
	// data and dataBase64 are set only with hasData.
	return event.Event{Context: ctx, DataEncoded: env.data, DataBase64: env.dataBase64}
}
