// Package natstest starts real, embedded nats-server instances with
// JetStream for tests: one per test, each with its own store directory.
package natstest
