// Package integration holds rolecall's container tests: a real 3-node
// NATS JetStream cluster with replicated (R3) streams, a fleet of worker
// containers, and faults in the middle of the work — a worker killed with
// SIGKILL, the node leading the tasks stream stopped and restarted, the
// outcome stream's leader lost again and again (forced elections, then
// SIGKILL of its node), a worker cut off from the network and
// reconnected, a rolling restart —
// each checked for exactly one schema-valid outcome per task in
// ROLECALL_SPECS. A separate test brings docker-compose.yml up and
// submits a task to it. TestFleetConfigBundles runs worker processes (no
// containers) with --config-from nats against an embedded 3-node cluster
// and follows a config bundle through push, refusal and rollback.
//
// The tests use testcontainers-go with programmatic containers on a
// network.New network, and images built FROM scratch from binaries
// compiled here (package images), so no registry is needed; the reaper is
// disabled because its image cannot be pulled, and every test removes what
// it started. The test process reaches the containers only through ports
// published on 127.0.0.1.
//
// Without a Docker engine the tests skip with a message (see `go test -v
// ./integration`), so `go test ./...` passes anywhere. With
// ROLECALL_REQUIRE_DOCKER=1 (CI sets it) a missing engine fails the run
// instead. -short skips them too unless ROLECALL_REQUIRE_DOCKER=1. Each
// test logs a "figures:" line (tasks, outcomes, duplicates suppressed,
// redeliveries, wall time); ROLECALL_IT_FIGURES=FILE also appends them to
// FILE as Markdown table rows for docs/RELIABILITY.md.
package integration
