package events

import (
	"bytes"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/resolve"
)

// Incoming is a task event decoded from a JetStream message.
type Incoming struct {
	// Event is the envelope. It holds every attribute that could be read
	// (it is the zero Event only when nothing could); its DataEncoded
	// aliases the message (the body in binary mode, the data member in
	// structured mode).
	Event event.Event
	// ID and Source are the input's id and source, "" when missing or
	// unusable; with both set, OutcomeID(Source, ID) names its outcome.
	ID, Source string
	// Task is valid only when DecodeTask returned no error; on error it
	// still carries TaskID when the data names a valid one.
	Task Task
	// Ref is the parsed role token (nil on error).
	Ref resolve.RoleRef
	// TraceParent and TraceState are the W3C trace context: from the
	// traceparent/tracestate NATS headers if present, else from the
	// CloudEvents distributed-tracing extension. They are passed through
	// unchecked (an invalid traceparent only starts a new trace).
	TraceParent, TraceState string
}

// DecodeTask decodes a dev.rolecall.task.assigned.v1 event in structured
// or binary content mode (the CloudEvents NATS binding) and then its data
// (DecodeTaskData). Every error is a *DecodeError: event_invalid when the
// envelope is not acceptable, task_invalid when the data is not. Even on
// error the returned Incoming carries ID, Source, the trace context and
// Task.TaskID when they could be read, so the failure outcome can name
// the task and keep the trace.
func DecodeTask(header nats.Header, body []byte, opts DecodeOptions) (Incoming, error) {
	if inc, ok := decodeTaskFast(header, body, opts); ok {
		return inc, nil
	}
	return decodeTaskSlow(header, body, opts)
}

// decodeTaskSlow is the original DecodeTask: readEnvelope, check and
// toEvent, then decodeTaskDataSlow. It decides every message the fast
// path declines (each failure, and anything unusual), so error values
// come from one place; the differential tests hold the fast path to it.
func decodeTaskSlow(header nats.Header, body []byte, opts DecodeOptions) (Incoming, error) {
	env, err := readEnvelope(header, body)
	inc := Incoming{}
	if usable(env.id) {
		inc.ID = env.id.v
	}
	if usable(env.source) {
		inc.Source = env.source.v
	}
	inc.TraceParent, inc.TraceState = env.traceParent, env.traceState
	if inc.TraceParent == "" {
		inc.TraceParent, inc.TraceState = env.extString(ExtTraceParent), env.extString(ExtTraceState)
	}
	if err == nil {
		err = env.check(isTaskType, TypeTaskAssigned)
	}
	if env.mode != 0 {
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
	task, ref, derr := decodeTaskDataSlow(env.data, opts)
	inc.Task, inc.Ref = task, ref
	if derr != nil {
		return inc, derr
	}
	return inc, nil
}

func isTaskType(t string) bool { return t == TypeTaskAssigned }

func isOutcomeType(t string) bool { return t == TypeSpecResolved || t == TypeSpecFailed }

// DecodeOutcome decodes an outcome event (resolved or failed) in either
// content mode, for `worker tail`, `submit --wait` and tests. The data is
// copied; decode it with DecodeResolvedData or DecodeFailureData.
func DecodeOutcome(header nats.Header, body []byte) (event.Event, error) {
	env, err := readEnvelope(header, body)
	if err == nil {
		err = env.check(isOutcomeType, TypeSpecResolved+" or "+TypeSpecFailed)
	}
	if err == nil && !env.hasData {
		err = eventInvalid("data", ReasonMissing, "the outcome event has no data")
	}
	if err != nil {
		return event.Event{}, err
	}
	env.data = bytes.Clone(env.data)
	e := env.toEvent()
	// check is stricter than sdk-go's Validate (the fuzz tests hold it to
	// that); Validate stays here, off the task hot path, as a backstop.
	if verr := e.Validate(); verr != nil {
		return event.Event{}, eventInvalid("", ReasonInvalidValue, "not a valid CloudEvent: %v", verr)
	}
	return e, nil
}

// DecodeResolvedData decodes the data of a resolved outcome. Unknown
// members are ignored so that readers keep working across additive
// schema changes.
func DecodeResolvedData(e event.Event) (*ResolvedData, error) {
	if e.Type() != TypeSpecResolved {
		return nil, eventInvalid("type", ReasonUnexpectedEventType, "type %s is not %s", printable(e.Type()), TypeSpecResolved)
	}
	var d ResolvedData
	if err := json.Unmarshal(e.DataEncoded, &d); err != nil {
		return nil, eventInvalid("data", ReasonInvalidValue, "resolved data: %v", err)
	}
	return &d, nil
}

// DecodeFailureData decodes the data of a failed outcome (lenient, like
// DecodeResolvedData).
func DecodeFailureData(e event.Event) (*FailureData, error) {
	if e.Type() != TypeSpecFailed {
		return nil, eventInvalid("type", ReasonUnexpectedEventType, "type %s is not %s", printable(e.Type()), TypeSpecFailed)
	}
	var d FailureData
	if err := json.Unmarshal(e.DataEncoded, &d); err != nil {
		return nil, eventInvalid("data", ReasonInvalidValue, "failure data: %v", err)
	}
	return &d, nil
}
