// Package service is rolecall's NATS micro service: the request-reply
// surface a planner asks before it assigns, and an operator asks which
// configuration a fleet serves.
//
// Every `worker run` registers one instance of the service "rolecall"
// (queue group "rolecall") with five endpoints under <prefix>.svc
// (rolecall.svc by default):
//
//   - resolve: task data or a task CloudEvent → the outcome data the worker
//     would publish for it, byte for byte; nothing is published.
//   - explain: the same request → the explain document of that run; or
//     {"outcome_id"} / {"source", "id"} → a recorded outcome explained
//     against the configuration served.
//   - roster: {"pack": NAME} → the pack's roster with descriptions, tiers
//     and skills.
//   - validate: {} → the problems of the configuration this instance serves.
//   - config: {} → the configuration this instance serves (source, digest,
//     revision).
//
// A typed failure is answered with the micro error headers
// (Nats-Service-Error-Code 400; 500 for an internal fault; 503 while no
// configuration serves yet, or when explain cannot reach the outcome
// store) and Nats-Service-Error set to the rolecall code; the body is the
// failure JSON. docs/SERVICE.md is the reference.
//
// What it promises: resolve and explain run the worker's own
// pipeline.Handle (HandleExplained) and events encoder, so a preview
// cannot disagree with the outcome the worker publishes for the same
// task and configuration. Requests are decoded strictly: an unknown
// member is refused, as in task data.
//
// How it runs: the service has its own NATS connection, so a flood of
// requests never queues behind the worker's tasks on one socket, and a
// bounded pool of goroutines does the work. The micro package calls an
// endpoint's handler on that endpoint's subscription, one request at a
// time, and reads whether the reply was an error as soon as the handler
// returns; so each handler hands its request to the pool and waits for
// the pool to have answered it. The pool bounds the CPU the service can
// take from the task consumer; each endpoint still answers one request
// at a time, and a backlog waits in its subscription's bounded buffer.
//
// The micro package fixes an instance's metadata when it registers. When
// the configuration served changes, the service registers a new instance
// with the new config_revision and then stops the old one, so the
// metadata is never stale; the new instance's statistics start at zero.
package service
