// Package events is rolecall's CloudEvents contract on NATS JetStream
// (docs/EVENTS.md): the task, resolved-spec and failure payloads, their
// JSON Schemas, subjects, deterministic outcome ids, decoding of task
// events and encoding of outcome events, with
// github.com/go-json-experiment/json.
//
// DecodeTask reads both content modes of the CloudEvents NATS binding
// into an sdk-go event.Event (a structured body through an envelope
// struct, unnamed members kept as extensions; ce- headers case-insensitive
// and percent-decoded, which sdk-go's reader does not do), then the task
// data into the task struct, unknown members rejected. Every failure is a
// *DecodeError — event_invalid for the envelope, task_invalid for the data
// — with the attribute or JSON path as Subject and a stable
// details.reason; the first failure in the message wins. null is absent,
// and absent stays different from empty.
//
// Outcomes are published in structured mode, so the body alone is the
// event (it survives re-publishing, exports and replay), in sdk-go's
// member order; data has sorted map keys and nil lists and maps as null.
// OutcomeID derives the outcome id from the input's (source, id), so every
// redelivery publishes under the same id and JetStream's duplicate window
// keeps one outcome per input.
//
// The package is pure: no I/O, clock, goroutines or logging.
package events
