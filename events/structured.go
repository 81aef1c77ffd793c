package events

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// wireEvent is a structured event (the JSON event format) as read: the
// attributes CloudEvents names, data and data_base64, the trace context
// extensions nearly every task carries, and every other member (an
// extension) embedded as it came. Values are decoded where they are
// checked, so that the problem reported is the first in the message.
type wireEvent struct {
	SpecVersion     member         `json:"specversion"`
	ID              member         `json:"id"`
	Source          member         `json:"source"`
	Type            member         `json:"type"`
	DataContentType member         `json:"datacontenttype"`
	DataSchema      member         `json:"dataschema"`
	Subject         member         `json:"subject"`
	Time            member         `json:"time"`
	Data            member         `json:"data"`
	DataBase64      member         `json:"data_base64"`
	TraceParent     member         `json:"traceparent"`
	TraceState      member         `json:"tracestate"`
	Extensions      jsontext.Value `json:",embed"`
}

// member is one member of a structured event as read: how often it
// appeared, where (its place among the members) and its first value's
// bounds in the body.
type member struct {
	n          int
	at, again  int // the places of the first and the second appearance
	start, end int
}

func (m *member) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	// The object's names and values so far, this member's name the last.
	_, read := dec.StackIndex(dec.StackDepth())
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	switch m.n++; m.n {
	case 1:
		m.at, m.end = int(read/2), int(dec.InputOffset())
		m.start = m.end - len(v)
	case 2:
		m.again = int(read / 2)
	}
	return nil
}

// envelopeOptions let duplicate names and invalid UTF-8 through: inside
// data the task decoder reports them (task_invalid with a path), outside
// it readStructured does.
var envelopeOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// readStructured reads the JSON event format: a body that is not one JSON
// object is not_json, else the first problem among the members is
// reported. Either way the members read are kept, so that a failure can
// still name the input and its task.
func (env *envelope) readStructured(body []byte) *DecodeError {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		// Unmarshal would take null as an empty object; the first token
		// says what the body is instead.
		_, err := jsontext.NewDecoder(bytes.NewReader(body), envelopeOptions).ReadToken()
		return notJSON(err)
	}
	var w wireEvent
	err := json.Unmarshal(body, &w, envelopeOptions)
	first := env.fromWire(body, &w)
	if err != nil {
		return structuredError(body, err)
	}
	return first
}

// problems keeps the first problem in message order: the one at the
// lowest place, on a tie the one noted first.
type problems struct {
	first *DecodeError
	at    int
}

func (p *problems) note(at int, err *DecodeError) {
	if err != nil && (p.first == nil || at < p.at) {
		p.first, p.at = err, at
	}
}

// fromWire reads the members' values into env and returns the first
// problem among them.
func (env *envelope) fromWire(body []byte, w *wireEvent) *DecodeError {
	var p problems
	raw := func(m *member) []byte { return body[m.start:m.end] }
	// The context attributes in env.attrs' order, then the other members
	// with fields of their own.
	members := [...]*member{&w.SpecVersion, &w.ID, &w.Source, &w.Type, &w.DataContentType, &w.DataSchema, &w.Subject, &w.Time,
		&w.Data, &w.DataBase64, &w.TraceParent, &w.TraceState}
	names := [len(members)]string{8: "data", "data_base64", ExtTraceParent, ExtTraceState}
	for i, a := range env.attrs() {
		names[i] = a.name
		if m := members[i]; m.n > 0 && body[m.start] != 'n' { // null is absent
			s, err := jsonString(raw(m))
			if err != nil {
				p.note(m.at, eventInvalid(a.name, stringReason(err), "%s %v", a.name, err))
				continue
			}
			*a.attr = attr{set: true, v: s}
		}
	}
	for i, m := range members {
		if m.n > 1 {
			p.note(m.again, duplicateMember(names[i]))
		}
	}

	d, b := &w.Data, &w.DataBase64
	if d.n > 0 && b.n > 0 {
		// The later of the two is reported, and not read.
		name, at := "data", d.at
		if d.at < b.at {
			name, at = "data_base64", b.at
		}
		p.note(at, eventInvalid(name, ReasonDuplicateAttribute, "both data and data_base64 are present"))
	}
	switch {
	case d.n > 0 && (b.n == 0 || d.at < b.at):
		env.data, env.hasData = raw(d), true
	case b.n > 0:
		s, err := jsonString(raw(b))
		if err != nil {
			p.note(b.at, eventInvalid("data_base64", stringReason(err), "data_base64 %v", err))
			break
		}
		data, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			p.note(b.at, eventInvalid("data_base64", ReasonInvalidValue, "data_base64 is not valid base64"))
			break
		}
		env.data, env.hasData, env.dataBase64 = data, true, true
	}

	for i := len(members) - 2; i < len(members); i++ {
		if m := members[i]; m.n > 0 {
			env.extension(&p, names[i], raw(m), m.at)
		}
	}
	if len(w.Extensions) > 0 {
		x := &extensionWalk{env: env}
		for _, m := range members {
			if m.n > 0 {
				x.taken = append(x.taken, m.at)
			}
		}
		slices.Sort(x.taken)
		if env.ext == nil {
			// Room for as many extensions as 10-byte members would make.
			env.ext = make(map[string]any, len(w.Extensions)/10)
		}
		// An error is the member a syntax error in the body cut short.
		_ = json.Unmarshal(w.Extensions, x, envelopeOptions)
		p.note(x.p.at, x.p.first)
	}
	return p.first
}

// extension checks one extension attribute: a valid name, not repeated,
// a value of the CloudEvents type system (see extensionValue).
func (env *envelope) extension(p *problems, name string, value []byte, at int) {
	if !validAttrName(name) {
		p.note(at, eventInvalid(printableName(name), ReasonInvalidAttributeName,
			"member %s is not a CloudEvents attribute name (lowercase a-z and 0-9)", printable(name)))
		return
	}
	if _, seen := env.ext[name]; seen || env.noValue[name] {
		p.note(at, duplicateMember(name))
		return
	}
	switch v, err := extensionValue(value); {
	case err != nil:
		n := printableName(name)
		p.note(at, eventInvalid(n, stringReason(err), "extension %s %v", n, err))
		fallthrough
	case v == nil:
		if env.noValue == nil {
			env.noValue = map[string]bool{}
		}
		env.noValue[name] = true
	default:
		env.addExt(name, v, at)
	}
}

// extensionWalk, unmarshaled from the embedded extensions, checks each in
// message order; each holds the next place no named member took (taken,
// sorted). Later appearances of a named member are not kept, so past its
// second one (a problem noted first, which wins ties) the places come out
// too low, but never below it.
type extensionWalk struct {
	env   *envelope
	p     problems
	taken []int
	place int
}

func (x *extensionWalk) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() == '"' {
		rawName, err := dec.ReadValue()
		if err != nil {
			return err
		}
		// A name that is not valid UTF-8 is shown as sent, quoted.
		name, err := jsonString(rawName)
		if err != nil {
			name = strings.ToValidUTF8(string(rawName), "\uFFFD")
		}
		value, err := dec.ReadValue()
		if err != nil {
			return err
		}
		for len(x.taken) > 0 && x.taken[0] == x.place {
			x.taken, x.place = x.taken[1:], x.place+1
		}
		x.env.extension(&x.p, name, value, x.place)
		x.place++
	}
	_, err := dec.ReadToken()
	return err
}

func duplicateMember(name string) *DecodeError {
	return eventInvalid(printableName(name), ReasonDuplicateAttribute, "member %s appears more than once", printable(name))
}

// structuredError reports a body the decoder rejected: data nested too
// deeply is task_invalid, anything else not_json.
func structuredError(body []byte, err error) *DecodeError {
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) {
		if isDepthError(sy) && underMember(sy.JSONPointer, "data") {
			return deepDataError(body)
		}
		if strings.Contains(sy.Err.Error(), "after top-level value") {
			return eventInvalid("", ReasonNotJSON, "structured event body has data after the JSON object")
		}
	}
	return notJSON(err)
}

// underMember reports whether p points at or into the named top-level
// member.
func underMember(p jsontext.Pointer, name string) bool {
	rest, ok := strings.CutPrefix(string(p), "/"+name)
	return ok && (rest == "" || rest[0] == '/')
}

// deepDataError reports data nested beyond the decoder's limit as
// task_invalid. The lenient envelope reader does not track member names,
// so the body is read again strictly to locate the first error by path.
func deepDataError(body []byte) *DecodeError {
	_, err := jsontext.NewDecoder(bytes.NewReader(body)).ReadValue()
	var sy *jsontext.SyntacticError
	if errors.As(err, &sy) && underMember(sy.JSONPointer, "data") {
		return syntaxError(pointerPath(sy.JSONPointer[len("/data"):]), sy)
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
	// Without the decoder's package name: the message is the outcome's.
	return eventInvalid("", ReasonNotJSON, "structured event body is not valid JSON: %s", strings.TrimPrefix(err.Error(), "jsontext: "))
}

var errNotString, errBadUTF8 = errors.New("must be a JSON string"), errors.New("is not valid UTF-8")

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

// jsonEvent is an event in the JSON event format as rolecall writes it:
// the members in the order sdk-go's event.WriteJson writes them
// (specversion, id, source, type, subject, datacontenttype, dataschema,
// time, data, then the extensions sorted by name), so that the body is
// sdk-go's for the same event.
type jsonEvent struct {
	eventAttrs
	Data any `json:"data"`
	eventExts
}

type eventAttrs struct {
	SpecVersion     string `json:"specversion"`
	ID              string `json:"id"`
	Source          string `json:"source"`
	Type            string `json:"type"`
	Subject         string `json:"subject,omitempty"`
	DataContentType string `json:"datacontenttype"`
	DataSchema      string `json:"dataschema,omitempty"`
	Time            string `json:"time,omitempty"`
}

type eventExts struct {
	CausationID string `json:"causationid,omitempty"`
	TaskID      string `json:"taskid,omitempty"`
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}
