// Package outcometest stores outcome events in a specs stream for tests of
// the readers of the audit stream (explain, the audit view): outcomes
// decided by pipeline.Handle, carrying a decision record (events.Decision)
// as a decision-recording worker writes it, and recorded in the outcome
// store under their id, as the worker records them; and a worker to run
// in such tests (RunWorker).
package outcometest
