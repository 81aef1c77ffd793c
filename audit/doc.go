// Package audit checks that allocators use what was decided. An allocator
// that starts an agent for a resolved spec publishes
// dev.rolecall.agentspec.allocated.v1 on <prefix>.allocations.<role> with
// {decision_id, provider, model, effort}. One durable consumer,
// rolecall-audit, shared by the fleet, reads the ROLECALL_ALLOCATIONS
// stream, looks each allocation's decision up in the outcome store, and
// publishes at most one dev.rolecall.agentspec.drift.v1 per allocation on
// <prefix>.specs.drift.<first differing field> (model, then effort) naming
// every differing field, or code drift_unknown_decision on
// <prefix>.specs.drift.unknown_decision when no decision has that id
// (after Config.UnknownAfter deliveries, as the outcome's record may lag
// its event by a moment). An
// allocation that matches publishes nothing. A null allocated value is not
// compared.
//
// The drift event's id derives from the allocation event's (source, id)
// and is its Nats-Msg-Id, so a redelivered allocation adds nothing; the
// allocation is acked only after the drift event's PubAck. The metric
// rolecall.drift{field} counts each differing field once ("unknown_decision"
// for an unknown decision).
//
// The decision is found through the outcome store (the idempotency KV
// bucket), so drift needs it on (idempotency_horizon > 0) and finds
// decisions only as old as the horizon.
package audit
