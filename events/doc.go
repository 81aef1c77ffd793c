// Package events is rolecall's CloudEvents contract on NATS JetStream: the
// task, resolved-spec and failure payloads, their JSON Schemas, decoding
// of incoming task events, encoding of outcome events, subjects, and
// deterministic outcome ids. docs/EVENTS.md is the full contract.
//
// # Decoding
//
// DecodeTask accepts both content modes of the CloudEvents NATS binding:
// structured (content-type application/cloudevents+json, the JSON event
// format in the body) and binary (ce-<attribute> headers, data in the
// body). It reads the message itself rather than through sdk-go's
// binding, because the binding must be followed exactly and sdk-go's
// reader does not: it matches header names case-sensitively, does not
// percent-decode header values, and accepts duplicate JSON members. The
// result is still an sdk-go event.Event; the checks here are stricter than
// its Validate, which the fuzz tests hold them to.
//
// Decoding is strict and typed. Every failure is a *DecodeError with code
// event_invalid (the envelope: not a CloudEvent, a missing or invalid
// attribute, specversion other than 1.0, datacontenttype other than
// application/json, a type other than dev.rolecall.task.assigned.v1) or
// task_invalid (the data: unknown or duplicate member, wrong JSON type,
// invalid UTF-8, an empty or malformed value, data over the size limit),
// with the offending attribute or JSON path as Subject and a stable
// details.reason. The first failure in a fixed order wins. null is
// absent everywhere, and absent stays different from empty: a task's
// "modes": [] decodes to a non-nil empty slice.
//
// # Encoding
//
// Outcomes are always published in structured mode: the body alone is
// the complete event, so it survives anything that keeps bodies but not
// headers (re-publishing, stream exports, `nats stream get`, the audit
// replay), it needs no percent-encoding of attribute values, and it can be
// validated as one JSON document. Headers repeat what NATS and tracing
// need: content-type, Nats-Msg-Id (the outcome id) and the lowercase W3C
// traceparent/tracestate, which are also set as the CloudEvents
// distributed-tracing extension. The body is written with sdk-go's
// event.WriteJson; data is encoded with encoding/json/v2 semantics
// (github.com/go-json-experiment/json), map keys sorted and nil as null.
//
// # Identity
//
// OutcomeID derives an outcome's id from the input's (source, id), so
// every worker and every redelivery of one input publishes under the same
// id, and JetStream's duplicate window keeps exactly one outcome per
// input. OutcomeIDForSequence covers inputs whose source or id cannot be
// read.
//
// The package is pure: no I/O, no clock (callers pass the event time), no
// goroutines and no logging.
package events
