package main

import (
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/service"
)

// serviceFlags switch and size the micro service of worker run.
type serviceFlags struct {
	Service            bool `help:"Register the rolecall micro service (rolecall.svc.resolve, roster, explain, validate, config) on a connection of its own; --service=false leaves it out, and the worker then needs none of its permissions." default:"true" negatable:"" env:"ROLECALL_SERVICE"`
	ServiceConcurrency int  `name:"service-concurrency" help:"Service requests worked on at once, across all endpoints (default half the CPUs, at least 1): the CPU a flood of requests can take from the tasks." env:"ROLECALL_SERVICE_CONCURRENCY"`
}

// startService registers the micro service on its own connection, so
// that requests never queue behind the worker's tasks on one socket. The
// returned function stops it (answering what it has received) and closes
// the connection.
func (c *runCmd) startService(nf natsFlags, instance string, src service.SnapshotSource, cfg pipeline.Config, log *slog.Logger) (func(), error) {
	// explain looks recorded outcomes up through the service's own
	// connection too.
	closed := make(chan struct{})
	nc, js, err := nf.connectJS("rolecall-service "+instance, log, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		return nil, err
	}
	svc, err := service.Start(nc, src, service.Options{
		Pipeline: cfg, Version: readBuildInfo().Version, Instance: instance,
		Concurrency: c.ServiceConcurrency, JetStream: js, Logger: log,
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	log.Info("micro service registered", "name", service.Name, "id", svc.ID(),
		"endpoints", service.Subject(cfg.Prefix, "*"), "queue_group", service.QueueGroup)
	return func() {
		if err := svc.Stop(); err != nil {
			log.Warn("micro service stop", "error", err)
		}
		// micro drains its subscriptions in the background: closing the
		// connection now would drop the requests already received.
		// Draining it waits for their replies, then closes it.
		if err := nc.Drain(); err != nil {
			nc.Close()
		}
		<-closed
	}, nil
}
