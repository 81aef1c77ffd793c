package events

import (
	"bytes"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/resolve"
)

// Incoming is a task event decoded from a JetStream message.
type Incoming struct {
	// Event is the envelope: every attribute that could be read (the zero
	// Event when the message is no event). Its DataEncoded aliases the
	// message (the body, or the data member of a structured one).
	Event event.Event
	// ID and Source are the input's id and source, "" when missing or
	// unusable; with both set, OutcomeID(Source, ID) names its outcome.
	ID, Source string
	// Task is valid only when DecodeTask returned no error; on error it
	// still carries TaskID when the data names a valid one.
	Task Task
	// Ref is the parsed role token (nil on error).
	Ref resolve.RoleRef
	// TraceParent and TraceState are the W3C trace context, from the
	// traceparent/tracestate headers if present, else from the
	// distributed-tracing extension; unchecked (an invalid traceparent
	// only starts a new trace).
	TraceParent, TraceState string
}

// DecodeTask decodes a dev.rolecall.task.assigned.v1 event in either
// content mode of the CloudEvents NATS binding, then its data
// (DecodeTaskData). Every error is a *DecodeError: event_invalid for the
// envelope, task_invalid for the data. Even then the Incoming carries ID,
// Source, the trace context and Task.TaskID when they could be read, so
// the failure outcome can name the task and keep the trace.
func DecodeTask(header nats.Header, body []byte, opts DecodeOptions) (Incoming, error) {
	env, err := readEnvelope(header, body)
	inc := Incoming{ID: usable(env.id), Source: usable(env.source), TraceParent: env.traceParent, TraceState: env.traceState}
	if inc.TraceParent == "" {
		inc.TraceParent, _ = env.ext[ExtTraceParent].(string)
		inc.TraceState, _ = env.ext[ExtTraceState].(string)
	}
	if err == nil {
		err = env.check(TypeTaskAssigned)
	}
	if env.read {
		inc.Event = env.toEvent()
	}
	if err == nil && !env.hasData {
		err = taskInvalid("", ReasonMissing, "the event has no data")
	}
	if err != nil {
		if env.hasData && len(env.data) <= opts.maxData() {
			inc.Task.TaskID = peekTaskID(env.data)
		}
		return inc, err
	}
	var derr error
	inc.Task, inc.Ref, derr = DecodeTaskData(env.data, opts)
	return inc, derr
}

// DecodeOutcome decodes an outcome event (resolved or failed) in either
// content mode, for `worker tail`, `submit --wait` and tests. Decode its
// data with DecodeResolvedData or DecodeFailureData.
func DecodeOutcome(header nats.Header, body []byte) (event.Event, error) {
	return DecodeEvent(header, body, TypeSpecResolved, TypeSpecFailed)
}

// DecodeEvent decodes an event of one of types, with data, in either
// content mode, checking its envelope as a task's is checked. The data is
// copied; it is not decoded.
func DecodeEvent(header nats.Header, body []byte, types ...string) (event.Event, error) {
	env, err := readEnvelope(header, body)
	if err == nil {
		err = env.check(types...)
	}
	switch {
	case err != nil:
	case !env.hasData:
		err = eventInvalid("data", ReasonMissing, "the event has no data")
	case !jsontext.Value(env.data).IsValid():
		// Every event read here carries JSON data (check requires
		// application/json); binary mode would let anything through.
		err = eventInvalid("data", ReasonInvalidValue, "data is not valid JSON")
	}
	if err != nil {
		return event.Event{}, err
	}
	env.data = bytes.Clone(env.data)
	e := env.toEvent()
	// A backstop, off the task path: check is stricter than Validate.
	if verr := e.Validate(); verr != nil {
		return event.Event{}, eventInvalid("", ReasonInvalidValue, "not a valid CloudEvent: %v", verr)
	}
	return e, nil
}

// DecodeResolvedData decodes the data of a resolved outcome. Unknown
// members are ignored so that readers keep working across additive
// schema changes.
func DecodeResolvedData(e event.Event) (*ResolvedData, error) {
	return outcomeData[ResolvedData](e, TypeSpecResolved, "resolved")
}

// DecodeFailureData decodes the data of a failed outcome (lenient, like
// DecodeResolvedData).
func DecodeFailureData(e event.Event) (*FailureData, error) {
	return outcomeData[FailureData](e, TypeSpecFailed, "failure")
}

func outcomeData[D any](e event.Event, typ, what string) (*D, error) {
	if e.Type() != typ {
		return nil, eventInvalid("type", ReasonUnexpectedEventType, "type %s is not %s", printable(e.Type()), typ)
	}
	var d D
	if err := json.Unmarshal(e.DataEncoded, &d); err != nil {
		return nil, eventInvalid("data", ReasonInvalidValue, "%s data: %v", what, err)
	}
	return &d, nil
}
