// Package replay re-decides recorded outcomes: it reads outcome events
// from the specs stream, decodes the task each decision record holds, and
// resolves it again with pipeline.Handle against a configuration.
//
// Against the configuration a decision was made with (the recorded
// decision.config.digest equals the snapshot's) the new outcome data must
// be byte-equal to the recorded data, except decision.worker_version and
// decision.config.source and revision, which say where the configuration
// came from, not what it is. Anything else is a determinism failure.
// Against another configuration, replay reports a semantic diff per
// decision: which fields would change, from what to what, and where the
// new value is written. It is a CI gate for a config change: `worker
// replay --root NEW` exits 3 when some decision would change.
//
// What replay cannot re-decide it reports as skipped, with the reason: an
// outcome without a decision record, a task that never decoded, a failure
// published without its task (it would have been too large with it),
// delivery_exhausted (no decision was made), and outcome_too_large (whose
// record holds the digest of the extra prompt, not the prompt).
//
// Bundles. With Options.Revisions a decision made from a bundle
// (decision.config.source "nats") is replayed against the bundle revision
// it names, loaded through it (bundle.Store.LoadRevision fits); a decision
// made from files against Options.Snapshot. A decision with nothing to
// replay it against is a config_unavailable error.
package replay
