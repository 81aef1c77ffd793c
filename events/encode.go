package events

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
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
	return orDefault(prefix, DefaultPrefix) + ".tasks." + name
}

// ResolvedSubject is <prefix>.specs.resolved.<role token with ':' → '_'>,
// e.g. rolecall.specs.resolved.external_foo for "external:foo". The token
// must be a valid role token (resolve.ParseRoleToken), which keeps the
// subject free of '.', '*', '>' and spaces.
func ResolvedSubject(prefix, roleToken string) string {
	return orDefault(prefix, DefaultPrefix) + ".specs.resolved." + strings.ReplaceAll(roleToken, ":", "_")
}

// FailedSubject is <prefix>.specs.failed.<code>.
func FailedSubject(prefix string, code resolve.Code) string {
	return orDefault(prefix, DefaultPrefix) + ".specs.failed." + string(code)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ValidateSource checks that s can be an event source as written: a
// non-empty URI-reference without control characters that sdk-go's
// URI-reference type reproduces verbatim ("rolecall", "urn:rolecall:fleet-a",
// "https://example.com/fleet" are; "my fleet" is not, it would be
// re-encoded as "my%20fleet"). Check a configured fleet source with it
// at start: an outcome that cannot be encoded cannot be published.
func ValidateSource(s string) error {
	if s == "" || controlIndex(s) >= 0 {
		return fmt.Errorf("events: source %s must be non-empty and free of control characters", printable(s))
	}
	e := event.New()
	e.SetSource(s)
	if len(e.FieldErrors) > 0 || e.Source() != s {
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
	// Time is the event time; the zero time omits the attribute. The
	// caller supplies it so that encoding stays clock-free.
	Time time.Time
	// DataSchemaBase prefixes the schema file name in dataschema; ""
	// means DefaultDataSchemaBase.
	DataSchemaBase string
	// Fixed, when not nil, keeps the encoding of a resolved outcome's
	// fixed fields (see FixedFields) for the next outcome of the same plan.
	Fixed *FixedFields
}

// FixedFields holds the encoded form of the resolved fields that are the
// same in every result of one resolve.Plan: all but the task id, the
// prompt body, the prompt overlays, the system message and the inputs
// digest (Plan.Resolve changes only the prompt's last block). The first
// AppendResolved given it fills it; later ones copy its bytes instead of
// encoding those fields again. The caller guarantees that every outcome
// encoded with one FixedFields comes from one plan. Its zero value is
// ready to use; it serves one goroutine at a time.
type FixedFields struct {
	// parts[0] is from ,"identity": through the prompt_disposition
	// value (fixedHead); parts[1] from ,"grant_role_emissions": through
	// the diagnostics (fixedMid).
	parts  [2][]byte
	filled bool
}

// validatedSources caches ValidateSource for the few sources a process
// uses (its fleet name), keeping sdk-go's URI parsing off the hot path.
var (
	validatedSources sync.Map
	validatedCount   atomic.Int32
)

func validateSourceCached(s string) error {
	if _, ok := validatedSources.Load(s); ok {
		return nil
	}
	if err := ValidateSource(s); err != nil {
		return err
	}
	if validatedCount.Add(1) <= 64 {
		validatedSources.Store(s, struct{}{})
	}
	return nil
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
	return AppendResolved(nil, prefix, meta, data)
}

// AppendResolved is EncodeResolved with the body appended to dst[:0]: it
// reuses dst's array when that is large enough, so a publisher can pool
// body buffers (the worker returns one when its PubAck has come). A nil
// dst allocates the body, as EncodeResolved does.
func AppendResolved(dst []byte, prefix string, meta OutcomeMeta, data *ResolvedData) (string, nats.Header, []byte, error) {
	return appendResolved(dst, prefix, meta, data, fastBody)
}

// bodyEncoder chooses how encodeOutcome writes the body.
type bodyEncoder uint8

const (
	// fastBody: the hand-written encoder, the reflection one for what it
	// defers.
	fastBody bodyEncoder = iota
	// reflectBody: the reflection encoder only (the tests' reference).
	reflectBody
	// fastBodyOnly: the hand-written encoder only; errFastDeferred where
	// it defers (tests check when it does).
	fastBodyOnly
)

// appendResolved is AppendResolved with a choice of body encoder.
func appendResolved(dst []byte, prefix string, meta OutcomeMeta, data *ResolvedData, enc bodyEncoder) (string, nats.Header, []byte, error) {
	if data == nil {
		return "", nil, nil, errors.New("events: EncodeResolved: nil data")
	}
	// The checks of resolve.ParseRoleToken on the token kind:name, without
	// building the token unless it is reported.
	name, external := data.Identity.Name, data.Identity.Kind == resolve.IdentityExternal
	rest := name
	if !external {
		rest = strings.TrimPrefix(name, resolve.ExternalPrefix)
	}
	if err := resolve.ValidateName("role", rest); err != nil {
		token := name
		if external {
			token = resolve.ExternalPrefix + name
		}
		return "", nil, nil, fmt.Errorf("events: EncodeResolved: identity %q is not a role token: %w", token, err)
	}
	if meta.TaskID == "" {
		meta.TaskID = data.TaskID
	}
	h, body, err := encodeOutcome(dst, TypeSpecResolved, SchemaResolved, meta, data, enc)
	if err != nil {
		return "", nil, nil, err
	}
	var subject string
	if external {
		// A valid name has no ':' to replace: ResolvedSubject in one step.
		subject = orDefault(prefix, DefaultPrefix) + ".specs.resolved.external_" + name
	} else {
		subject = ResolvedSubject(prefix, name)
	}
	return subject, h, body, nil
}

// EncodeFailed encodes a failure outcome like EncodeResolved. A nil
// Details is encoded as {} and an empty Stage as Code.Stage(); data is
// not modified.
func EncodeFailed(prefix string, meta OutcomeMeta, data *FailureData) (string, nats.Header, []byte, error) {
	return AppendFailed(nil, prefix, meta, data)
}

// AppendFailed is EncodeFailed with the body appended to dst[:0], like
// AppendResolved.
func AppendFailed(dst []byte, prefix string, meta OutcomeMeta, data *FailureData) (string, nats.Header, []byte, error) {
	return appendFailed(dst, prefix, meta, data, fastBody)
}

func appendFailed(dst []byte, prefix string, meta OutcomeMeta, data *FailureData, enc bodyEncoder) (string, nats.Header, []byte, error) {
	if data == nil {
		return "", nil, nil, errors.New("events: EncodeFailed: nil data")
	}
	if !validCode(data.Code) {
		return "", nil, nil, fmt.Errorf("events: EncodeFailed: code %q is not a code token", data.Code)
	}
	if meta.TaskID == "" && data.TaskID != nil {
		meta.TaskID = *data.TaskID
	}
	h, body, err := encodeOutcome(dst, TypeSpecFailed, SchemaFailed, meta, data, enc)
	if err != nil {
		return "", nil, nil, err
	}
	return FailedSubject(prefix, data.Code), h, body, nil
}

// noDetails stands in for nil Details; it is only ever read.
var noDetails = map[string]any{}

// normalizedFailure is d as a failure outcome carries it: nil Details as
// {}, an empty Stage as Code.Stage(). The hand-written encoder applies
// the same rules as it writes, without the copy.
func normalizedFailure(d *FailureData) *FailureData {
	c := *d
	if c.Details == nil {
		c.Details = noDetails
	}
	if c.Stage == "" {
		c.Stage = c.Code.Stage()
	}
	return &c
}

// validCode keeps a code usable as one subject token.
func validCode(c resolve.Code) bool {
	if c == "" {
		return false
	}
	for i := 0; i < len(c); i++ {
		if ch := c[i]; !(ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '_') {
			return false
		}
	}
	return true
}

func encodeOutcome(dst []byte, typ, schema string, meta OutcomeMeta, data any, enc bodyEncoder) (nats.Header, []byte, error) {
	if meta.ID == "" || controlIndex(meta.ID) >= 0 {
		return nil, nil, errors.New("events: outcome id is required (without control characters)")
	}
	source := orDefault(meta.Source, DefaultSource)
	if err := validateSourceCached(source); err != nil {
		return nil, nil, err
	}
	ev := outEvent{
		id: meta.ID, source: source, typ: typ, subject: meta.TaskID,
		dataSchema: orDefault(meta.DataSchemaBase, DefaultDataSchemaBase), schemaFile: schema, time: meta.Time,
		causationID: meta.CausationID, taskID: meta.TaskID,
		traceParent: meta.TraceParent, traceState: meta.TraceState,
		fixed: meta.Fixed,
	}
	if meta.TraceParent == "" {
		ev.traceState = ""
	}
	var body []byte
	ok := false
	if enc != reflectBody {
		b := dst
		if n := outcomeSizeHint(&ev, data); cap(b) < n {
			b = make([]byte, 0, n)
		}
		if body, ok = ev.appendFast(b, data); !ok && enc == fastBodyOnly {
			return nil, nil, errFastDeferred
		}
	}
	if !ok {
		// Whatever the hand-written encoder gives up on, the reflection
		// encoder decides, errors included.
		switch d := data.(type) {
		case *FailureData:
			data = normalizedFailure(d)
		case *ResolvedData:
			data = d.Complete()
		}
		var err error
		if body, err = ev.appendTo(dst, data); err != nil {
			return nil, nil, err
		}
	}
	return outcomeHeader(meta), body, nil
}

// outcomeHeader builds the headers with one array behind all values
// (each a full slice of its own element, so appending to one copies).
func outcomeHeader(meta OutcomeMeta) nats.Header {
	vals := make([]string, 4)
	h := make(nats.Header, 4)
	vals[0], vals[1] = ContentTypeCloudEventsJSON, meta.ID
	h[HeaderContentType] = vals[0:1:1]
	h[HeaderMsgID] = vals[1:2:2]
	if meta.TraceParent != "" {
		vals[2] = meta.TraceParent
		h[HeaderTraceParent] = vals[2:3:3]
		if meta.TraceState != "" {
			vals[3] = meta.TraceState
			h[HeaderTraceState] = vals[3:4:4]
		}
	}
	return h
}

// setTraceHeaders writes the lowercase W3C names directly: nats.Header is
// case-sensitive and its Set does not canonicalize, but a propagator's
// carrier might.
func setTraceHeaders(h nats.Header, traceParent, traceState string) {
	if traceParent == "" {
		return
	}
	h[HeaderTraceParent] = []string{traceParent}
	if traceState != "" {
		h[HeaderTraceState] = []string{traceState}
	}
}

// EncodeTask builds a task event (for `worker submit` and tests) with
// datacontenttype application/json. data must be syntactically valid JSON
// but is otherwise not checked, so tests can send invalid tasks. In
// structured mode the body is the JSON event format; in binary mode every
// attribute is a percent-encoded ce- header and the body is data. The trace
// context, when given, is set both as headers and as the extension.
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
		set := func(name, v string) { h[ceHeaderPrefix+name] = []string{encodeHeaderValue(v)} }
		set("specversion", SpecVersion)
		set("id", id)
		set("source", source)
		set("type", TypeTaskAssigned)
		set("datacontenttype", ContentTypeJSON)
		if traceParent != "" {
			set(ExtTraceParent, traceParent)
			if traceState != "" {
				set(ExtTraceState, traceState)
			}
		}
		return h, bytes.Clone(data), nil
	}
	ev := outEvent{id: id, source: source, typ: TypeTaskAssigned, traceParent: traceParent, traceState: traceState}
	if traceParent == "" {
		ev.traceState = ""
	}
	body, err := ev.write(jsontext.Value(data))
	if err != nil {
		return nil, nil, err
	}
	h[HeaderContentType] = []string{ContentTypeCloudEventsJSON}
	return h, body, nil
}

// MarshalData encodes outcome data exactly as outcomes carry it (sorted
// keys, nil as null); extra options such as indentation may be added.
func MarshalData(v any, opts ...json.Options) ([]byte, error) {
	return json.Marshal(v, append([]json.Options{dataOptions}, opts...)...)
}
