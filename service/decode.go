package service

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// PreviewSource is the CloudEvents source a preview of bare task data is
// named under: such a request has no event id, so its outcome id (and the
// decision id, which is the outcome id) is OutcomeID(PreviewSource,
// sha256 of the task data). A task CloudEvent keeps its own (source, id),
// and so the outcome id the worker would give it.
const PreviewSource = "urn:rolecall:preview"

// TaskRequest is a resolve or explain request as decoded: a task
// CloudEvent in either content mode, or bare task data.
type TaskRequest struct {
	// Incoming is what the worker would have decoded (for bare task data,
	// only Task and Ref are set).
	Incoming events.Incoming
	// Err is the decode failure, a *events.DecodeError (event_invalid or
	// task_invalid), exactly the worker's for the same bytes.
	Err error
	// Event reports whether the request was a CloudEvent.
	Event bool
	// OutcomeID is the id of the outcome (see PreviewSource).
	OutcomeID string
}

// DecodeTaskRequest reads a resolve or explain request. It is a
// CloudEvent when the headers say so (ce-specversion, or a content-type
// of application/cloudevents+json) or when the body is a JSON object with
// a top-level specversion member; otherwise the body is task data. Both
// are decoded by the worker's own decoders, so a request the worker would
// refuse is refused with the same code, reason and subject.
func DecodeTaskRequest(h nats.Header, body []byte, opts events.DecodeOptions) TaskRequest {
	var r TaskRequest
	switch {
	case isEventHeader(h):
		r.Event = true
		r.Incoming, r.Err = events.DecodeTask(h, body, opts)
	case hasSpecVersion(body):
		// A structured event sent without its content-type: the body says
		// what it is. Other headers (a content-type of application/json,
		// say) would contradict it, so only the trace context is kept.
		r.Event = true
		r.Incoming, r.Err = events.DecodeTask(traceHeaders(h), body, opts)
	default:
		r.Incoming.Task, r.Incoming.Ref, r.Err = events.DecodeTaskData(body, opts)
	}
	if r.Incoming.Source != "" && r.Incoming.ID != "" {
		r.OutcomeID = events.OutcomeID(r.Incoming.Source, r.Incoming.ID)
	} else {
		sum := sha256.Sum256(body)
		r.OutcomeID = events.OutcomeID(PreviewSource, hex.EncodeToString(sum[:]))
	}
	return r
}

func isEventHeader(h nats.Header) bool {
	for k, vs := range h {
		switch lk := strings.ToLower(k); {
		case lk == "ce-specversion":
			return true
		case lk == events.HeaderContentType:
			for _, v := range vs {
				if strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "application/cloudevents") {
					return true
				}
			}
		}
	}
	return false
}

func traceHeaders(h nats.Header) nats.Header {
	var out nats.Header
	for k, vs := range h {
		if lk := strings.ToLower(k); lk == events.HeaderTraceParent || lk == events.HeaderTraceState {
			if out == nil {
				out = nats.Header{}
			}
			out[k] = vs
		}
	}
	return out
}

// hasSpecVersion reports whether body is a JSON object with a top-level
// member "specversion". Anything that is not such an object is not a
// structured event, and task decoding reports what is wrong with it.
func hasSpecVersion(body []byte) bool { return hasMember(body, "specversion") }

// hasMember reports whether body is a JSON object with a top-level member
// named one of names (a name is read as JSON: escapes count).
func hasMember(body []byte, names ...string) bool {
	d := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			return false
		}
		if slices.Contains(names, name.String()) {
			return true
		}
		if err := d.SkipValue(); err != nil {
			return false
		}
	}
	return false
}

// RecordedRequest asks explain for a recorded outcome: by its outcome id,
// or by the task event's source and id.
type RecordedRequest struct {
	OutcomeID string `json:"outcome_id"`
	Source    string `json:"source"`
	ID        string `json:"id"`
}

// IsRecordedRequest reports whether an explain request asks for a
// recorded outcome: no CloudEvent (no ce- or cloudevents headers, no
// specversion member), and a JSON object with an outcome_id, source or id
// member, none of which task data has.
func IsRecordedRequest(h nats.Header, body []byte) bool {
	return !isEventHeader(h) && !hasSpecVersion(body) && hasMember(body, "outcome_id", "source", "id")
}

// DecodeRecorded decodes a recorded-outcome request strictly: outcome_id
// alone, or source and id together.
func DecodeRecorded(body []byte) (RecordedRequest, error) {
	var r RecordedRequest
	if err := decodeStrict(body, &r); err != nil {
		return r, err
	}
	switch {
	case r.OutcomeID != "" && (r.Source != "" || r.ID != ""):
		return r, requestInvalid("outcome_id", ReasonConflict, "give outcome_id, or source and id, not both")
	case r.OutcomeID == "" && (r.Source == "" || r.ID == ""):
		member := "source"
		if r.Source != "" {
			member = "id"
		}
		return r, requestInvalid(member, ReasonRequired, "give outcome_id, or source and id")
	case r.OutcomeID != "" && !isOutcomeID(r.OutcomeID):
		// Not quoted: it may be as long as the request, and a key that
		// long does not even fit the look-up's subject.
		return r, requestInvalid("outcome_id", ReasonInvalidName, "outcome_id is not an outcome id (%s and 32 lowercase hex digits)", events.OutcomeIDPrefix)
	}
	return r, nil
}

// isOutcomeID reports whether id has the shape of every outcome id:
// events.OutcomeIDPrefix and 32 lowercase hex digits.
func isOutcomeID(id string) bool {
	hexPart, ok := strings.CutPrefix(id, events.OutcomeIDPrefix)
	if !ok || len(hexPart) != 32 {
		return false
	}
	for _, c := range []byte(hexPart) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// RosterRequest is the roster endpoint's request.
type RosterRequest struct {
	// Pack is the pack whose roster is asked; "" or absent means the
	// instance's default pack.
	Pack string `json:"pack"`
}

// EmptyRequest is the request of validate and config: an empty body, or
// an empty JSON object.
type EmptyRequest struct{}

// DecodeRoster decodes a roster request strictly; an empty body is {}.
func DecodeRoster(body []byte) (RosterRequest, error) {
	var r RosterRequest
	if err := decodeStrict(body, &r); err != nil {
		return r, err
	}
	if r.Pack != "" {
		if err := resolve.ValidateName("pack", r.Pack); err != nil {
			// Its message, not its Error(), which starts with its own code.
			msg, re := err.Error(), (*resolve.ResolutionError)(nil)
			if errors.As(err, &re) {
				msg = re.Message
			}
			return r, requestInvalid("pack", ReasonInvalidName, "%s", msg)
		}
	}
	return r, nil
}

// DecodeEmpty decodes the request of validate or config: empty, or {}.
func DecodeEmpty(body []byte) error {
	return decodeStrict(body, &EmptyRequest{})
}

var strict = json.JoinOptions(json.RejectUnknownMembers(true))

// decodeStrict unmarshals body into v, refusing unknown and duplicate
// members; every error is a request_invalid *Error.
func decodeStrict(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil
	}
	if jsontext.Value(trimmed).Kind() != '{' {
		if err := json.Unmarshal(body, new(jsontext.Value)); err != nil {
			return requestInvalid("", ReasonSyntax, "the request is not JSON: %v", errMessage(err))
		}
		return requestInvalid("", ReasonNotObject, "the request is not a JSON object")
	}
	err := json.Unmarshal(body, v, strict)
	if err == nil {
		return nil
	}
	var se *json.SemanticError
	var sy *jsontext.SyntacticError
	switch {
	case errors.As(err, &sy):
		if errors.Is(sy.Err, jsontext.ErrDuplicateName) {
			m := memberName(sy.JSONPointer)
			return requestInvalid(m, ReasonDuplicateKey, "member %q appears twice", m)
		}
		return requestInvalid("", ReasonSyntax, "the request is not valid JSON at byte %d: %v", sy.ByteOffset, errMessage(sy.Err))
	case errors.As(err, &se):
		m := memberName(se.JSONPointer)
		if errors.Is(se.Err, json.ErrUnknownName) {
			return requestInvalid(m, ReasonUnknownField, "unknown member %q", m)
		}
		return requestInvalid(m, ReasonWrongType, "member %q has the wrong type (%s)", m, kindName(se.JSONKind))
	}
	return requestInvalid("", ReasonSyntax, "the request cannot be decoded: %v", errMessage(err))
}

// memberName is the top-level member a pointer names (requests are flat),
// bounded so that a hostile name is not echoed whole.
func memberName(p jsontext.Pointer) string {
	for tok := range p.Tokens() {
		if len(tok) > 64 {
			tok = tok[:64]
		}
		return strings.ToValidUTF8(tok, "\uFFFD")
	}
	return ""
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "invalid"
}

// errMessage bounds a decoder's message, which may quote the input.
func errMessage(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
