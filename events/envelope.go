package events

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
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

// Extension attribute names carried by outcome events (CloudEvents
// extension names are lowercase alphanumeric).
const (
	ExtTaskID      = "taskid"
	ExtCausationID = "causationid"
	ExtTraceParent = "traceparent"
	ExtTraceState  = "tracestate"
)

type contentMode uint8

const (
	modeStructured contentMode = iota + 1
	modeBinary
)

// attr is one string-typed context attribute as read.
type attr struct {
	set  bool
	seen bool // the member appeared (even as null), for duplicate detection
	v    string
}

type extAttr struct {
	name  string
	value any // string, int32 or bool
}

// envelope is a CloudEvent as read from a NATS message, before the
// attribute values are checked.
type envelope struct {
	mode contentMode
	// Context attributes of CloudEvents 1.0.
	specVersion, id, source, typ, dataContentType, dataSchema, subject, time attr
	ext                                                                      []extAttr
	data                                                                     []byte
	hasData, dataBase64                                                      bool
	// W3C trace context from plain NATS headers (not ce- extensions).
	traceParent, traceState string
	// Parsed by check, reused by toEvent.
	sourceURL, schemaURL *url.URL
	timeVal              time.Time
}

func (env *envelope) known(name string) *attr {
	switch name {
	case "specversion":
		return &env.specVersion
	case "id":
		return &env.id
	case "source":
		return &env.source
	case "type":
		return &env.typ
	case "datacontenttype":
		return &env.dataContentType
	case "dataschema":
		return &env.dataSchema
	case "subject":
		return &env.subject
	case "time":
		return &env.time
	}
	return nil
}

func (env *envelope) extString(name string) string {
	for _, e := range env.ext {
		if e.name == name {
			s, _ := e.value.(string)
			return s
		}
	}
	return ""
}

// readEnvelope reads a message in either content mode of the CloudEvents
// NATS binding (1.0.3): a content-type starting "application/cloudevents"
// (case-insensitive) means structured; otherwise the message is binary,
// with every attribute in a ce-<name> header (names case-insensitive,
// values percent-encoded). A message with no content-type and no ce-
// header at all is read as structured, as the binding's earlier versions
// (and sdk-go's structured writer) send it.
//
// Attributes are read but not checked (see check); the error is the first
// one met in the message, and reading goes on after a bad value so that id
// and source are known whenever they are readable.
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
	note := func(err *DecodeError) {
		if first == nil {
			first = err
		}
	}
	pick := func(dst, dstKey *string, k string, vs []string) {
		if len(vs) > 0 && (*dstKey == "" || k < *dstKey) {
			*dst, *dstKey = strings.TrimSpace(vs[0]), k
		}
	}
	for k, vs := range h {
		lk := strings.ToLower(k)
		switch {
		case strings.HasPrefix(lk, ceHeaderPrefix):
			ce = append(ce, ceHeader{name: lk[len(ceHeaderPrefix):], key: k, values: vs})
		case lk == HeaderContentType:
			if hasContentType || len(vs) != 1 {
				note(eventInvalid(HeaderContentType, ReasonDuplicateAttribute, "the content-type header appears more than once"))
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
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})

	switch {
	case hasContentType && isCloudEventsMediaType(contentType):
		if !isStructuredJSON(contentType) {
			return env, eventInvalid(HeaderContentType, ReasonNotCloudEvent,
				"content-type %s is not the CloudEvents JSON format (batch and other formats are not supported)", printable(contentType))
		}
		env.mode = modeStructured
	case hasCESpecVersion(ce):
		env.mode = modeBinary
	case !hasContentType && len(ce) == 0:
		env.mode = modeStructured
	default:
		return env, eventInvalid("specversion", ReasonNotCloudEvent,
			"not a CloudEvent: no content-type %q and no ce-specversion header", ContentTypeCloudEventsJSON)
	}
	var err *DecodeError
	if env.mode == modeStructured {
		err = env.readStructured(body)
	} else {
		err = env.readBinary(ce, contentType, hasContentType, body)
	}
	if first != nil {
		return env, first
	}
	return env, err
}

type ceHeader struct {
	name, key string
	values    []string
}

func hasCESpecVersion(ce []ceHeader) bool {
	for _, c := range ce {
		if c.name == "specversion" {
			return true
		}
	}
	return false
}

func mediaTypeOf(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

func isCloudEventsMediaType(ct string) bool {
	return strings.HasPrefix(mediaTypeOf(ct), "application/cloudevents")
}

func isStructuredJSON(ct string) bool {
	if ct == ContentTypeCloudEventsJSON {
		return true
	}
	return mediaTypeOf(ct) == ContentTypeCloudEventsJSON && utf8Params(ct)
}

// isJSONMediaType accepts application/json with at most a charset=utf-8
// parameter: the only data content type a task may have.
func isJSONMediaType(ct string) bool {
	if ct == ContentTypeJSON {
		return true
	}
	return mediaTypeOf(ct) == ContentTypeJSON && utf8Params(ct)
}

func utf8Params(ct string) bool {
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// sameMediaType compares two content types as media types (type and
// parameter names case-insensitive, charset value case-insensitive).
func sameMediaType(a, b string) bool {
	if a == b {
		return true
	}
	ta, pa, errA := mime.ParseMediaType(a)
	tb, pb, errB := mime.ParseMediaType(b)
	if errA != nil || errB != nil || ta != tb || len(pa) != len(pb) {
		return false
	}
	for k, v := range pa {
		w, ok := pb[k]
		if !ok || v != w && !(k == "charset" && strings.EqualFold(v, w)) {
			return false
		}
	}
	return true
}

// validAttrName: CloudEvents attribute names are lowercase ASCII letters
// and digits.
func validAttrName(n string) bool {
	if n == "" {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (env *envelope) readBinary(ce []ceHeader, contentType string, hasContentType bool, body []byte) *DecodeError {
	var first *DecodeError
	note := func(err *DecodeError) {
		if first == nil {
			first = err
		}
	}
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
		if a := env.known(c.name); a != nil {
			*a = attr{set: true, v: v}
		} else {
			env.ext = append(env.ext, extAttr{name: c.name, value: v})
		}
	}
	if hasContentType {
		if env.dataContentType.set && !sameMediaType(contentType, env.dataContentType.v) {
			note(eventInvalid(HeaderContentType, ReasonConflict, "content-type %s contradicts ce-datacontenttype %s",
				printable(contentType), printable(env.dataContentType.v)))
		}
		if !env.dataContentType.set {
			env.dataContentType = attr{set: true, v: contentType}
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
		closed := false
		for i := 1; i < len(v); i++ {
			c := v[i]
			if c == '\\' && i+1 < len(v) {
				i++
				b.WriteByte(v[i])
				continue
			}
			if c == '"' {
				if i != len(v)-1 {
					return "", errors.New("text after a closing quote")
				}
				closed = true
				break
			}
			b.WriteByte(c)
		}
		if !closed {
			return "", errors.New("unterminated quoted string")
		}
		v = b.String()
	}
	if strings.IndexByte(v, '%') < 0 {
		if !utf8.ValidString(v) {
			return "", errors.New("invalid UTF-8")
		}
		return v, nil
	}
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c != '%' {
			out = append(out, c)
			continue
		}
		if i+2 >= len(v) {
			return "", errors.New("truncated percent-encoding")
		}
		hi, ok1 := unhex(v[i+1])
		lo, ok2 := unhex(v[i+2])
		if !ok1 || !ok2 {
			return "", errors.New("invalid percent-encoding")
		}
		out = append(out, hi<<4|lo)
		i += 2
	}
	if !utf8.Valid(out) {
		return "", errors.New("percent-decoded value is not valid UTF-8")
	}
	return string(out), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// encodeHeaderValue percent-encodes per the binding: space, '"', '%' and
// every byte outside U+0021–U+007E, with upper-case hex digits.
func encodeHeaderValue(v string) string {
	n := 0
	for i := 0; i < len(v); i++ {
		if needsPercent(v[i]) {
			n++
		}
	}
	if n == 0 {
		return v
	}
	const hexDigits = "0123456789ABCDEF"
	b := make([]byte, 0, len(v)+2*n)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if needsPercent(c) {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func needsPercent(c byte) bool { return c <= ' ' || c == '"' || c == '%' || c >= 0x7f }

// readStructured reads the JSON event format. Grammar errors make the
// body not_json (event_invalid); the data member's own content (duplicate
// names, invalid UTF-8) is left to the task decoder so it is reported as
// task_invalid with a path.
func (env *envelope) readStructured(body []byte) *DecodeError {
	// A new decoder every time: a reused one (jsontext.Decoder.Reset,
	// go-json-experiment/json v1.27.2) can drop a member name from the
	// JSON pointer of a later syntax error, so the message of a not_json
	// failure depended on what the decoder had read before. The task hot
	// path no longer comes here (decode_fast.go).
	dec := jsontext.NewDecoder(bytes.NewReader(body), envelopeOptions)

	tok, err := dec.ReadToken()
	if err != nil {
		return notJSON(err)
	}
	if tok.Kind() != '{' {
		return eventInvalid("", ReasonNotJSON, "structured event body is not a JSON object")
	}
	var (
		first                *DecodeError
		seenData, seenBase64 bool
		seenExt              []string
	)
	note := func(err *DecodeError) {
		if first == nil {
			first = err
		}
	}
	for dec.PeekKind() == '"' {
		rawName, err := dec.ReadValue()
		if err != nil {
			return notJSON(err)
		}
		name, err := jsonString(rawName)
		if err != nil {
			name = strings.ToValidUTF8(string(rawName), "\uFFFD")
		}
		val, err := dec.ReadValue()
		if err != nil {
			var sy *jsontext.SyntacticError
			if name == "data" && errors.As(err, &sy) && isDepthError(sy) {
				return deepDataError(body)
			}
			return notJSON(err)
		}
		end := int(dec.InputOffset())
		raw := body[end-len(val) : end]

		a := env.known(name)
		switch {
		case a != nil && a.seen, name == "data" && seenData, name == "data_base64" && seenBase64,
			a == nil && slices.Contains(seenExt, name):
			note(eventInvalid(printableName(name), ReasonDuplicateAttribute, "member %s appears more than once", printable(name)))
			continue
		}
		switch {
		case name == "data" || name == "data_base64":
			both := seenData || seenBase64
			if name == "data" {
				seenData = true
			} else {
				seenBase64 = true
			}
			if both {
				note(eventInvalid(name, ReasonDuplicateAttribute, "both data and data_base64 are present"))
				continue
			}
			if name == "data" {
				env.data, env.hasData = raw, true
				continue
			}
			s, err := jsonString(raw)
			if err != nil {
				note(eventInvalid("data_base64", stringReason(err), "data_base64 %v", err))
				continue
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				note(eventInvalid("data_base64", ReasonInvalidValue, "data_base64 is not valid base64"))
				continue
			}
			env.data, env.hasData, env.dataBase64 = b, true, true
		case !validAttrName(name):
			note(eventInvalid(printableName(name), ReasonInvalidAttributeName, "member %s is not a CloudEvents attribute name (lowercase a-z and 0-9)", printable(name)))
		case a != nil:
			a.seen = true
			if val.Kind() == 'n' {
				continue // null: absent
			}
			s, err := jsonString(raw)
			if err != nil {
				note(eventInvalid(name, stringReason(err), "%s %v", name, err))
				continue
			}
			a.set, a.v = true, s
		default:
			seenExt = append(seenExt, name)
			v, err := extensionValue(raw)
			if err != nil {
				note(eventInvalid(name, stringReason(err), "extension %s %v", name, err))
				continue
			}
			if v != nil {
				env.ext = append(env.ext, extAttr{name: name, value: v})
			}
		}
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return notJSON(err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return eventInvalid("", ReasonNotJSON, "structured event body has data after the JSON object")
	}
	return first
}

// The envelope reader tolerates duplicate names and invalid UTF-8 so that
// those, inside data, reach the task decoder (task_invalid with a path);
// at the envelope level readStructured finds them itself.
var envelopeOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// deepDataError reports data nested beyond the decoder's limit as
// task_invalid. The lenient envelope reader does not track member names,
// so the body is read again strictly to locate the first error by path.
func deepDataError(body []byte) *DecodeError {
	_, err := jsontext.NewDecoder(bytes.NewReader(body)).ReadValue()
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) {
		if rest, ok := strings.CutPrefix(string(sy.JSONPointer), "/data"); ok && (rest == "" || rest[0] == '/') {
			return syntaxError(pointerPath(jsontext.Pointer(rest)), sy)
		}
	}
	return taskInvalid("", ReasonTooDeep, "task data is nested too deeply")
}

func printableName(n string) string {
	if simpleKey(n) {
		return n
	}
	return printable(n)
}

func notJSON(err error) *DecodeError {
	if err == nil || err == io.EOF {
		return eventInvalid("", ReasonNotJSON, "structured event body is not a JSON object")
	}
	return eventInvalid("", ReasonNotJSON, "structured event body is not valid JSON: %v", err)
}

var (
	errNotString = errors.New("must be a JSON string")
	errBadUTF8   = errors.New("is not valid UTF-8")
)

// jsonString unquotes a JSON string value, rejecting other kinds and
// invalid UTF-8 (the decoder let it through so data could be judged apart).
func jsonString(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", errNotString
	}
	if inner := raw[1 : len(raw)-1]; bytes.IndexByte(inner, '\\') < 0 {
		if !utf8.Valid(inner) {
			return "", errBadUTF8
		}
		return string(inner), nil
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return "", errBadUTF8
	}
	return string(b), nil
}

func stringReason(err error) string {
	if err == errBadUTF8 {
		return ReasonInvalidValue
	}
	return ReasonWrongType
}

// extensionValue maps a JSON extension value to the CloudEvents type
// system: string, boolean or Integer (32-bit); null is absent (nil).
func extensionValue(raw []byte) (any, error) {
	switch raw[0] {
	case 'n':
		return nil, nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case '"':
		return jsonString(raw)
	case '{', '[':
		return nil, errors.New("must be a string, a boolean or an integer")
	}
	n, err := strconv.ParseInt(string(raw), 10, 32)
	if err != nil {
		return nil, errors.New("must be a string, a boolean or a 32-bit integer")
	}
	return int32(n), nil
}

// check validates the attributes in a fixed order (specversion, id,
// source, type, datacontenttype, dataschema, subject, time, extensions);
// the first failure wins. typeOK decides which event types are accepted.
func (env *envelope) check(typeOK func(string) bool, wantType string) *DecodeError {
	switch {
	case !env.specVersion.set:
		return eventInvalid("specversion", ReasonMissing, "specversion is missing")
	case env.specVersion.v != SpecVersion:
		return eventInvalid("specversion", ReasonUnsupportedSpecVersion, "specversion %s is not supported (only %q)", printable(env.specVersion.v), SpecVersion)
	}
	for _, a := range []struct {
		name string
		attr attr
	}{{"id", env.id}, {"source", env.source}, {"type", env.typ}} {
		if err := requiredString(a.name, a.attr); err != nil {
			return err
		}
	}
	for _, a := range []struct {
		name string
		attr attr
	}{{"id", env.id}, {"source", env.source}, {"type", env.typ}, {"subject", env.subject}, {"dataschema", env.dataSchema}} {
		if len(a.attr.v) > MaxAttributeBytes {
			return eventInvalid(a.name, ReasonTooLarge, "%s is %d bytes, over the %d-byte limit", a.name, len(a.attr.v), MaxAttributeBytes)
		}
	}
	u, err := url.Parse(env.source.v)
	if err != nil {
		return eventInvalid("source", ReasonInvalidValue, "source %s is not a URI-reference", printable(env.source.v))
	}
	env.sourceURL = u
	if !typeOK(env.typ.v) {
		return eventInvalid("type", ReasonUnexpectedEventType, "type %s is not %s", printable(env.typ.v), wantType)
	}
	if a := env.dataContentType; a.set && !isJSONMediaType(a.v) {
		return eventInvalid("datacontenttype", ReasonUnsupportedContentType, "datacontenttype %s is not supported (only %s)", printable(a.v), ContentTypeJSON)
	}
	if a := env.dataSchema; a.set {
		u, err := url.Parse(a.v)
		if err != nil || !u.IsAbs() {
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
		if err != nil {
			return eventInvalid("time", ReasonInvalidValue, "time %s is not an RFC 3339 timestamp", printable(a.v))
		}
		env.timeVal = t
	}
	for _, e := range env.ext {
		if s, ok := e.value.(string); ok && controlIndex(s) >= 0 {
			return eventInvalid(e.name, ReasonInvalidValue, "extension %s has a control character", e.name)
		}
		if s, ok := e.value.(string); ok && len(s) > MaxAttributeBytes {
			return eventInvalid(e.name, ReasonTooLarge, "extension %s is %d bytes, over the %d-byte limit", e.name, len(s), MaxAttributeBytes)
		}
	}
	return nil
}

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

// usable reports whether an id or source value can name the input (for
// the outcome id): present, non-empty, without control characters.
func usable(a attr) bool {
	return a.set && strings.TrimSpace(a.v) != "" && controlIndex(a.v) < 0 && len(a.v) <= MaxAttributeBytes
}

// MaxAttributeBytes bounds every string attribute of an incoming event.
// Outcomes echo the input's id (causationid) and subject; without a bound
// an 800 KB id would make every outcome exceed the server's max payload,
// and the task would be retried until delivery_exhausted instead of
// getting its typed failure.
const MaxAttributeBytes = 1024

// toEvent builds the sdk-go event from what was read: complete when
// check passed, otherwise holding whatever attributes were readable. The
// context is filled directly rather than through sdk-go's setters, which
// would parse the URIs a second time and trim the values.
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
	if a := env.dataContentType; a.set {
		ctx.DataContentType = &a.v
	}
	if a := env.subject; a.set {
		ctx.Subject = &a.v
	}
	if env.schemaURL != nil {
		ctx.DataSchema = &types.URI{URL: *env.schemaURL}
	}
	if !env.timeVal.IsZero() {
		ctx.Time = &types.Timestamp{Time: env.timeVal}
	}
	if len(env.ext) > 0 {
		ctx.Extensions = make(map[string]any, len(env.ext))
		for _, x := range env.ext {
			ctx.Extensions[x.name] = x.value
		}
	}
	e := event.Event{Context: ctx}
	if env.hasData {
		e.DataEncoded = env.data
		e.DataBase64 = env.dataBase64
	}
	return e
}
