package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"github.com/rolecall/rolecall/audit"
	"github.com/rolecall/rolecall/pipeline"
)

// auditFlags turn the drift check (package audit) on or off.
type auditFlags struct {
	Audit bool `name:"audit" help:"Check allocations against decisions (stream ROLECALL_ALLOCATIONS, shared consumer rolecall-audit) and publish drift events; --audit=false turns it off." default:"true" negatable:"" env:"ROLECALL_AUDIT"`
}

// startAudit runs the fleet's drift check beside the worker until ctx
// ends; the returned function stops it and waits. Without the outcome
// store there is nothing to compare against: the check is off, with a
// warning, and the worker runs on.
func (f auditFlags) startAudit(ctx context.Context, js jetstream.JetStream, cfg pipeline.Config, mp metric.MeterProvider, log *slog.Logger) func() {
	if !f.Audit {
		return func() {}
	}
	if !cfg.Idempotent() {
		log.Warn("audit: drift check is off: it finds decisions in the outcome store, which idempotency_horizon 0 turns off")
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Start-up waits for the broker like the worker does, without
		// holding the worker's own start: the streams the check reads
		// and writes are ensured first.
		var a *audit.Auditor
		for warned := false; a == nil; {
			_, err := pipeline.Ensure(ctx, js, cfg)
			if err == nil {
				a, err = audit.New(ctx, js, cfg, audit.Config{}, audit.Options{Logger: log, MeterProvider: mp})
			}
			if err != nil {
				if !warned {
					log.Warn("audit: drift check cannot start yet; retrying", "error", noJetStream(err))
					warned = true
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(2 * time.Second):
				}
			}
		}
		log.Info("audit: drift check on", "stream", audit.DefaultStream, "consumer", audit.DefaultConsumer)
		if err := a.Run(ctx); err != nil {
			log.Error("audit: drift check stopped", "error", err)
		}
	}()
	return func() { cancel(); <-done }
}
