// Package bench measures rolecall's worker pipeline against a bare
// JetStream loop on the same broker: `worker bench`.
//
// A run preloads task events of a realistic mix (a casts task with two
// Modes and every override, an overlay task, a replacement task, a task
// that fails resolution) into a tasks stream, or publishes them at an
// offered rate, and then consumes them with one of two loops until every
// outcome is in the loop's specs stream:
//
//   - the pipeline: pipeline.New + Run with a discover.Source over a
//     config root (generated, or the caller's), the real events encoding,
//     metrics on, tracing off (or on with a discarding exporter);
//   - the baseline: the same loop shape with none of rolecall's work — a
//     minimal encoding/json decode of the task, then the prepared outcome
//     bytes of the task's kind, published with a message id, the task
//     acked on the PubAck.
//
// Both loops use the same server, the same stream and consumer settings
// (pipeline.Ensure creates both), the same task bytes and outcome sizes,
// and separate streams, which are deleted after each run.
//
// What is measured, and from where:
//
//   - throughput: outcomes per second between the first and the last
//     outcome's stream timestamp;
//   - latency: enqueue to outcome, the outcome's stream timestamp minus its
//     task's stream timestamp, both set by the server (so a remote server
//     gives the same numbers, without clock skew); preloaded runs measure
//     queueing, runs at an offered rate measure service time;
//   - CPU seconds per 1,000 tasks (getrusage, the whole process: with the
//     embedded server that includes the broker), heap allocations per task
//     (runtime/metrics, the whole process too), GC cycles and the runtime's
//     estimate of their CPU per task, peak resident memory of the run
//     (VmHWM, reset before each run);
//   - the collector's settings the process ran with (GOGC, GOMEMLIMIT):
//     at an offered load the latency tail follows the collector's cycles;
//   - optionally a CPU profile of each measured run (Options.CPUProfile)
//     and every task's enqueue time and latency (Options.Latencies), to
//     line the tail up with GODEBUG=gctrace=1's cycles.
//
// Every run checks that each task got exactly one outcome, on the subject
// its kind must produce; anything else is ErrIncomplete.
package bench
