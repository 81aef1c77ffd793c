// Package explain turns one resolver run into the explain document: for
// every field of a decision, its value and source and every candidate in
// precedence order (selected, shadowed, absent or excluded), with a reason
// and the file and line it is written at, through mixins and variants.
//
// The document is what `worker explain --json` prints, what the audit
// view's /api/decisions/{id} returns as its explain chain and what the
// micro service's explain endpoint answers; its JSON shape is public
// (docs/OPERATIONS.md, "The explain document").
//
// Explain is not a second resolver. [Task] runs pipeline.HandleExplained,
// the worker's own Handle with the resolver asked to record its candidates,
// and reads the chains off that run; the outcome data it also returns is
// the data the worker would publish for the task. So the chain cannot
// disagree with the outcome: the selected candidate of each field is the
// outcome's value and source.
//
// A recorded outcome is explained from the task its decision record holds
// ([Lookup], [ParseOutcome], [Stored]): the task is resolved again
// against the configuration given, and the document says whether that
// configuration is the one the decision was made with (then the chain
// explains the recorded decision) or not (then it explains what would be
// decided now, and lists the fields that would change). An outcome whose
// record holds no decision to compare with is a typed error, as replay
// skips it: no record or delivery_exhausted (decision_missing), no task
// or outcome_too_large (task_not_recorded).
//
// What it does not do: explain a task the resolver refuses. A failure
// ends the resolver run before it returns its chains, so the document of a
// failing task carries the failure (code, subject, details) and no fields.
package explain
