// Package pipeline is the worker: it turns each task message of the tasks
// stream into exactly one outcome event on the specs stream.
//
// One goroutine owns each delivery from fetch to settle, in one pass:
// decode (events.DecodeTask) → look up the outcome id in the idempotency
// store (KV ROLECALL_OUTCOMES, when the horizon is on) → Handle → encode
// → publish with Nats-Msg-Id = outcome id → record → ack. The task is
// acked once its outcome is stored (or already was: a duplicate), and
// nak'ed with backoff after a transient broker fault that outlasted the
// delivery's retry budget or a panic, so a later delivery or the
// dead-letter path answers it; it is never termed. The delivery's deferred
// calls are its one release (keep-alive, telemetry) however it ends.
//
// Handle is pure: discover.Snapshot.Inputs → resolve.Resolve →
// materialize.SystemMessage against an in-memory snapshot, plus the
// decision record. `worker resolve`, explain and the micro service call
// the same function, so they answer as the worker does.
//
// Around the delivery, each in its own file: Ensure creates the streams
// and the durable consumer (config.go, ensure.go); retry bounds and
// repeats broker requests (retry.go); keepAlives sends InProgress for held
// tasks (keepalive.go); the dead-letter handler answers tasks that reached
// max_deliver with delivery_exhausted (deadletter.go); Outcomes reads the
// idempotency store by outcome id or by (source, id) (outcomes.go); the
// observer wraps a delivery in spans and metrics without being woven into
// it (observe.go).
//
// docs/EVENTS.md is the contract of the events and streams;
// docs/OPERATIONS.md describes running it.
package pipeline
