// Package schematest checks JSON data against rolecall's embedded event
// schemas (events.Schema), for tests: the worker's decoder is stricter
// than the task schema and never consults it, so the validator stays out
// of the binary.
package schematest
