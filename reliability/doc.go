// Package reliability holds no code: it is the suite that proves rolecall's
// delivery, hostile-input and security claims on one machine with real
// processes (docs/RELIABILITY.md describes each scenario and its figures).
//
// TestMain builds the real worker binary and a nats-server binary (a tool
// dependency in go.mod) once; every test then starts its own processes on
// 127.0.0.1, each with its own store directory, and kills them with
// SIGKILL where a scenario calls for it. Nothing here is mocked: the
// worker under test is the binary users run, talking to the server users
// run, through the public subjects.
//
// The suite runs in `go test ./...`. The two 5,000-task kill tests skip
// under -short; their in-process counterparts in pipeline (a worker that
// stops acknowledging, two workers sharing a consumer) stay.
package reliability
