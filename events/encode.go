package events

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/resolve"
)

// Defaults for the configurable parts of subjects and attributes.
const (
	// DefaultPrefix is the subject prefix: <prefix>.tasks.>, <prefix>.specs.>.
	DefaultPrefix = "rolecall"
	// DefaultSource is the outcome source (the fleet's name).
	DefaultSource = "rolecall"
	// DefaultDataSchemaBase is where the schema files are published; an
	// outcome's dataschema is this base + the schema file name.
	DefaultDataSchemaBase = "https://rolecall.dev/schema/"
)

// Schema file names (see Schema).
const (
	SchemaTask     = "task.v1.json"
	SchemaResolved = "resolved.v1.json"
	SchemaFailed   = "failed.v1.json"
)

// TasksSubject is the subject a task is published on: <prefix>.tasks.<name>.
// Workers consume <prefix>.tasks.> and ignore the rest of the subject.
func TasksSubject(prefix, name string) string {
	return cmp.Or(prefix, DefaultPrefix) + ".tasks." + name
}

// ResolvedSubject is <prefix>.specs.resolved.<role token with ':' → '_'>,
// e.g. rolecall.specs.resolved.external_foo for "external:foo". The token
// must be a valid role token (resolve.ParseRoleToken), which keeps the
// subject free of '.', '*', '>' and spaces.
func ResolvedSubject(prefix, roleToken string) string {
	return cmp.Or(prefix, DefaultPrefix) + ".specs.resolved." + strings.ReplaceAll(roleToken, ":", "_")
}

// FailedSubject is <prefix>.specs.failed.<code>.
func FailedSubject(prefix string, code resolve.Code) string {
	return cmp.Or(prefix, DefaultPrefix) + ".specs.failed." + string(code)
}

// ValidateSource checks that s can be an event source as written: a
// URI-reference of RFC 3986 characters that sdk-go reproduces
// verbatim ("urn:rolecall:fleet-a" is; "my fleet" would become
// "my%20fleet"). Check a fleet source with it at start: an outcome that
// cannot be encoded cannot be published.
func ValidateSource(s string) error {
	if s == "" || controlIndex(s) >= 0 {
		return fmt.Errorf("events: source %s must be non-empty and free of control characters", printable(s))
	}
	// What sdk-go's Event.SetSource parses, and its Source gives back.
	// Only RFC 3986 characters, as the decoder wants (uriText): an opaque
	// "urn:my fleet" round-trips, but no task could name it.
	if u := types.ParseURIRef(s); u == nil || u.String() != s || !uriText(s) {
		return fmt.Errorf("events: source %s is not a URI-reference in canonical form", printable(s))
	}
	return nil
}

// OutcomeMeta is what an outcome event says about itself besides its data.
type OutcomeMeta struct {
	// ID is the outcome id (OutcomeID / OutcomeIDForSequence); required.
	ID string
	// Source names the fleet, not the instance, so a redelivery handled
	// by another worker is the same event; "" means DefaultSource.
	Source string
	// TaskID becomes the CloudEvents subject and the taskid extension;
	// "" (unknown) omits both. EncodeResolved falls back to the data's
	// task_id.
	TaskID string
	// CausationID is the input event's id (causationid); "" omits it.
	CausationID string
	// TraceParent/TraceState are set as the distributed-tracing extension
	// and as the lowercase traceparent/tracestate headers.
	TraceParent, TraceState string
	// Time is the event time (the zero time omits it), given so that
	// encoding stays clock-free.
	Time time.Time
	// DataSchemaBase prefixes the schema file name in dataschema; ""
	// means DefaultDataSchemaBase.
	DataSchemaBase string
	// WorkerVersion is recorded in the data's decision record, whose id
	// the encoder sets to ID: the record then always names its outcome.
	WorkerVersion string
}

// dataOptions encode outcome data: map keys sorted (stable bytes for
// equal values), and nil slices and maps as null, so absent and empty
// stay apart exactly as in the Go values.
var dataOptions = json.JoinOptions(
	json.Deterministic(true),
	json.FormatNilSliceAsNull(true),
	json.FormatNilMapAsNull(true),
)

// EncodeResolved encodes a resolved outcome: the NATS subject, headers and
// body of a structured-mode CloudEvent (body application/cloudevents+json,
// data application/json). Headers carry content-type, Nats-Msg-Id =
// meta.ID and traceparent/tracestate when set.
func EncodeResolved(prefix string, meta OutcomeMeta, data *ResolvedData) (string, nats.Header, []byte, error) {
	if data == nil {
		return "", nil, nil, errors.New("events: EncodeResolved: nil data")
	}
	token := data.Identity.Name
	if data.Identity.Kind == resolve.IdentityExternal {
		token = resolve.ExternalPrefix + token
	}
	if _, err := resolve.ParseRoleToken(token); err != nil {
		return "", nil, nil, fmt.Errorf("events: EncodeResolved: identity %q is not a role token: %w", token, err)
	}
	meta.TaskID = cmp.Or(meta.TaskID, data.TaskID)
	if data.Decision != nil {
		d := *data
		d.Decision = stamp(data.Decision, meta)
		data = &d
	}
	return encodeOutcome(ResolvedSubject(prefix, token), TypeSpecResolved, SchemaResolved, meta, data)
}

// EncodeFailed encodes a failure outcome like EncodeResolved. A nil
// Details is encoded as {} and an empty Stage as Code.Stage(); data is
// not modified.
func EncodeFailed(prefix string, meta OutcomeMeta, data *FailureData) (string, nats.Header, []byte, error) {
	if data == nil {
		return "", nil, nil, errors.New("events: EncodeFailed: nil data")
	}
	if !validCode(data.Code) {
		return "", nil, nil, fmt.Errorf("events: EncodeFailed: code %q is not a code token", data.Code)
	}
	if meta.TaskID == "" && data.TaskID != nil {
		meta.TaskID = *data.TaskID
	}
	d := *data
	if d.Details == nil {
		d.Details = map[string]any{}
	}
	d.Stage = cmp.Or(d.Stage, d.Code.Stage())
	if d.Decision != nil {
		d.Decision = stamp(d.Decision, meta)
	}
	return encodeOutcome(FailedSubject(prefix, data.Code), TypeSpecFailed, SchemaFailed, meta, &d)
}

// stamp is a copy of dec naming the outcome meta describes.
func stamp(dec *Decision, meta OutcomeMeta) *Decision {
	c := *dec
	c.ID, c.WorkerVersion = meta.ID, cmp.Or(meta.WorkerVersion, DefaultWorkerVersion)
	if c.Inputs == nil {
		c.Inputs = []DecisionInput{}
	}
	if c.Task == nil {
		c.Task = jsontext.Value("null")
	}
	return &c
}

// DefaultWorkerVersion is recorded when an encoder is given no version.
const DefaultWorkerVersion = "0.0.0-dev"

// validCode keeps a code usable as one subject token.
func validCode(c resolve.Code) bool {
	return c != "" && !strings.ContainsFunc(string(c), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') })
}

func encodeOutcome(subject, typ, schema string, meta OutcomeMeta, data any) (string, nats.Header, []byte, error) {
	if meta.ID == "" || controlIndex(meta.ID) >= 0 {
		return "", nil, nil, errors.New("events: outcome id is required (without control characters)")
	}
	source := cmp.Or(meta.Source, DefaultSource)
	if err := ValidateSource(source); err != nil {
		return "", nil, nil, err
	}
	ev := jsonEvent{
		eventAttrs: eventAttrs{SpecVersion: SpecVersion, ID: meta.ID, Source: source, Type: typ, Subject: meta.TaskID,
			DataContentType: ContentTypeJSON, DataSchema: cmp.Or(meta.DataSchemaBase, DefaultDataSchemaBase) + schema},
		Data:      data,
		eventExts: eventExts{CausationID: meta.CausationID, TaskID: meta.TaskID},
	}
	if !meta.Time.IsZero() {
		ev.Time = meta.Time.UTC().Format(time.RFC3339Nano)
	}
	h := nats.Header{HeaderContentType: {ContentTypeCloudEventsJSON}, HeaderMsgID: {meta.ID}}
	if meta.TraceParent != "" {
		ev.TraceParent, ev.TraceState = meta.TraceParent, meta.TraceState
		setTraceHeaders(h, meta.TraceParent, meta.TraceState)
	}
	body, err := json.Marshal(&ev, dataOptions)
	if err != nil {
		return "", nil, nil, fmt.Errorf("events: encode %s event: %w", typ, err)
	}
	return subject, h, body, nil
}

// setTraceHeaders writes the lowercase W3C names directly, as a
// propagator's carrier might canonicalize them.
func setTraceHeaders(h nats.Header, traceParent, traceState string) {
	if traceParent == "" {
		return
	}
	h[HeaderTraceParent] = []string{traceParent}
	if traceState != "" {
		h[HeaderTraceState] = []string{traceState}
	}
}

// EncodeTask builds a task event (for `worker submit` and tests) in
// either content mode, with datacontenttype application/json and the
// trace context, when given, as headers and as the extension. data must
// be valid JSON but is otherwise not checked, so tests can send invalid
// tasks.
func EncodeTask(source, id string, data []byte, traceParent, traceState string, binary bool) (nats.Header, []byte, error) {
	if id == "" || controlIndex(id) >= 0 || strings.TrimSpace(id) != id {
		// sdk-go trims the id it is given; refuse rather than change it.
		return nil, nil, errors.New("events: EncodeTask: id must be non-empty, without control characters or surrounding spaces")
	}
	if err := ValidateSource(source); err != nil {
		return nil, nil, err
	}
	if !jsontext.Value(data).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) {
		return nil, nil, errors.New("events: EncodeTask: data is not valid JSON")
	}
	h := nats.Header{}
	setTraceHeaders(h, traceParent, traceState)
	if binary {
		for _, a := range [][2]string{{"specversion", SpecVersion}, {"id", id}, {"source", source}, {"type", TypeTaskAssigned},
			{"datacontenttype", ContentTypeJSON}, {ExtTraceParent, traceParent}, {ExtTraceState, traceState}} {
			if a[1] != "" && (a[0] != ExtTraceState || traceParent != "") {
				h[ceHeaderPrefix+a[0]] = []string{encodeHeaderValue(a[1])}
			}
		}
		return h, bytes.Clone(data), nil
	}
	// The data goes in as given, between the members marshaled before and
	// after it: the library's encoder would reformat it and replace
	// invalid UTF-8.
	attrs := eventAttrs{SpecVersion: SpecVersion, ID: id, Source: source, Type: TypeTaskAssigned, DataContentType: ContentTypeJSON}
	exts := eventExts{TraceParent: traceParent}
	if traceParent != "" {
		exts.TraceState = traceState
	}
	head, err1 := json.Marshal(&attrs)
	tail, err2 := json.Marshal(&exts)
	if err := errors.Join(err1, err2); err != nil {
		return nil, nil, fmt.Errorf("events: EncodeTask: %w", err)
	}
	body := append(append(head[:len(head)-1], `,"data":`...), data...)
	if len(tail) > len("{}") {
		body = append(body, ',')
	}
	body = append(body, tail[1:]...)
	h[HeaderContentType] = []string{ContentTypeCloudEventsJSON}
	return h, body, nil
}

// MarshalData encodes outcome data exactly as outcomes carry it (sorted
// keys, nil as null); extra options such as indentation may be added.
func MarshalData(v any, opts ...json.Options) ([]byte, error) {
	return json.Marshal(v, append([]json.Options{dataOptions}, opts...)...)
}

// OutcomeIDPrefix starts every outcome id.
const OutcomeIDPrefix = "rc-"

// OutcomeID is the id of every outcome of the input event (source, id):
//
//	"rc-" + hex(sha256(source + "\x00" + id))[:32]
//
// It depends on nothing but the input's CloudEvents identity, so every
// worker and every redelivery computes the same id. It is also the
// outcome's Nats-Msg-Id: whichever outcome of one input is published
// first stands and JetStream drops the others inside the duplicate window.
// CloudEvents attribute values cannot hold NUL, so the separator is
// unambiguous. Both arguments must be non-empty; use OutcomeIDForSequence
// for an input without a usable source or id.
func OutcomeID(inputSource, inputID string) string {
	return hashID(inputSource + "\x00" + inputID)
}

// OutcomeIDForSequence is the outcome id of an input whose source or id
// cannot be read, derived from its place in the tasks stream:
//
//	"rc-" + hex(sha256("\x00seq\x00" + stream + "\x00" + decimal(seq)))[:32]
//
// The leading NUL keeps it apart from every OutcomeID (a source is never
// empty and never holds NUL). The stream sequence of a message does not
// change across redeliveries, so this id is as stable as OutcomeID.
func OutcomeIDForSequence(stream string, seq uint64) string {
	return hashID("\x00seq\x00" + stream + "\x00" + strconv.FormatUint(seq, 10))
}

func hashID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return OutcomeIDPrefix + hex.EncodeToString(sum[:16])
}
