// Package bigroot writes a large, valid config root for scale benchmarks
// (discover's reload benchmarks and the pipeline's latency benchmark). The
// root is generated where it is used and never committed: at full size it
// holds about 12,500 files.
package bigroot
