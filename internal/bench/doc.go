// Package bench measures rolecall's worker against a bare JetStream loop
// of the same shape on the same broker: `worker bench`.
//
// A run preloads task events of a realistic mix (a casts task with two
// Modes and every override, an overlay task, a replacement task, a task
// that fails resolution) into a tasks stream, or publishes them at an
// offered rate, and then consumes them with one loop until every outcome
// is in the specs stream. The loops:
//
//   - pipeline: pipeline.New + Run as `worker run` wires it, over a
//     discover.Source of the config root it generates, with
//     the idempotency store on at the default horizon, metrics on, tracing
//     off (or on with a discarding exporter);
//   - pipeline-store-off: the same with the idempotency store off;
//   - bare: the worker's shape with none of its work — one pull iterator
//     (pipeline.PullOptions), a pool of Concurrency goroutines each owning
//     one delivery, a minimal decode (id, source, task id, role), the
//     pipeline's outcome bytes for the task's kind published with their
//     message id (pipeline.PublishOptions), the PubAck waited for, the
//     task acked.
//
// Without Options.Baseline only the pipeline runs. With it every repeat
// runs the three loops, in an order rotated from one repeat to the next,
// and the report gives each repeat's throughput ratio of the pipeline over
// the bare loop, with the store off and on: the second is what the
// idempotency store costs. All loops use the same server, stream and
// consumer settings (pipeline.Ensure), task bytes and outcome sizes, each
// run on fresh streams, deleted after it.
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
//   - optionally a CPU profile of each measured run (Options.CPUProfile)
//     and every task's enqueue time and latency (Options.Latencies).
//
// Every run checks that each task got exactly one outcome, on the subject
// its kind must produce; anything else is ErrIncomplete.
//
// BenchmarkStages (go test -bench Stages -benchmem) is the other half: one
// task's decode, handle and encode on the same workload, outside the
// broker.
package bench
