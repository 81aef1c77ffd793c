// Package hostile reads the hostile-input corpus, testdata/hostile/events
// (format: testdata/hostile/README.md), for the tests that use it: the
// decoders' own (events) and a real worker's (reliability). Both build
// each entry's NATS message here, so they test the same bytes.
package hostile
