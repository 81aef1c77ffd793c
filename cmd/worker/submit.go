package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/telemetry"
)

type submitCmd struct {
	natsFlags
	Wait    bool          `help:"Wait for the task's outcome event and print it (exit 1 if it is a failure)."`
	Timeout time.Duration `help:"How long --wait waits." default:"30s"`
	Binary  bool          `help:"Send in binary content mode (ce-* headers) instead of structured."`
	Source  string        `help:"CloudEvents source of the task event." default:"rolecall-cli"`
	ID      string        `help:"CloudEvents id (default: random). Submitting the same source+id twice is one task."`
	Subject string        `help:"Subject to publish on (default <prefix>.tasks.<role>)."`
	Task    string        `arg:"" help:"Task JSON file (or - for stdin)."`
}

func (c *submitCmd) Run(ctx context.Context, g *globals) error {
	data, _, err := readInput(c.Task, g.stdin)
	if err != nil {
		return usageErr("%v", err)
	}
	log, err := newLogger(g)
	if err != nil {
		return err
	}
	id := c.ID
	if id == "" {
		var b [12]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	subject := c.Subject
	if subject == "" {
		subject = c.prefix() + ".tasks." + subjectToken(data)
	}

	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "rolecall-submit", ServiceVersion: version})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()
	otel.SetErrorHandler(telemetry.ErrorHandler(log))
	// The producer span is the send: it ends at the PubAck (the deferred End
	// only covers early returns), so --wait does not stretch it. Its context
	// is the task's traceparent, which makes it the parent of the worker's
	// rolecall.process. With tracing off it is a no-op and the task carries
	// no trace context.
	ctx, span := tel.Tracer().Start(ctx, "rolecall.submit",
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(telemetry.MessagingSystemNATS,
			attribute.String(telemetry.AttrMessagingDestination, subject),
			attribute.String(telemetry.AttrEventID, id),
			attribute.String(telemetry.AttrEventType, events.TypeTaskAssigned)))
	defer span.End()
	carrier := nats.Header{}
	tp, ts := telemetry.Inject(ctx, tel.Propagator, carrier)

	header, body, err := events.EncodeTask(c.Source, id, data, tp, ts, c.Binary)
	if err != nil {
		return usageErr("encode task event: %v", err)
	}
	for k, v := range carrier {
		header[k] = v
	}

	nc, err := c.connect("rolecall-submit", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	var outcomes chan *nats.Msg
	want := events.OutcomeID(c.Source, id)
	if c.Wait {
		// Subscribe before publishing so the outcome cannot be missed; the
		// outcome id is derived from (source, id), so it is known already.
		outcomes = make(chan *nats.Msg, 16)
		sub, err := nc.ChanSubscribe(c.prefix()+".specs.>", outcomes)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := nc.Flush(); err != nil {
			return err
		}
	}
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: header, Data: body}, jetstream.WithMsgID(c.Source+"/"+id))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "publish task")
		return fmt.Errorf("publish task: %w", err)
	}
	span.End()
	log.Debug("task published", "stream", ack.Stream, "seq", ack.Sequence, "duplicate", ack.Duplicate)
	if !c.Wait {
		fmt.Fprintf(g.stdout, "published %s/%s to %s (stream %s, seq %d)\n", c.Source, id, subject, ack.Stream, ack.Sequence)
		return nil
	}
	timeout := time.After(c.Timeout)
	for {
		select {
		case m := <-outcomes:
			if m.Header.Get(nats.MsgIdHdr) != want {
				continue
			}
			ev, err := events.DecodeOutcome(m.Header, m.Data)
			if err != nil {
				return fmt.Errorf("decode outcome: %w", err)
			}
			if err := printJSON(g.stdout, ev); err != nil {
				return err
			}
			if ev.Type() == events.TypeSpecFailed {
				return errTypedFailure
			}
			return nil
		case <-timeout:
			return fmt.Errorf("no outcome for %s/%s within %s (is a worker running?)", c.Source, id, c.Timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// subjectToken picks a readable subject token from the task's role; any
// token is valid (workers consume <prefix>.tasks.>).
func subjectToken(data []byte) string {
	task, _, err := events.DecodeTaskData(data, events.DecodeOptions{})
	if err != nil || task.Role == "" {
		return "unsorted"
	}
	return strings.ReplaceAll(task.Role, ":", "_")
}

type tailCmd struct {
	natsFlags
	Subject   string `help:"Filter subject (default <prefix>.specs.>)."`
	FromStart bool   `help:"Replay the whole outcome stream first."`
	Stream    string `help:"Outcome stream name." default:"ROLECALL_SPECS"`
	Count     int    `help:"Exit after N events (0 = run until interrupted)."`
}

func (c *tailCmd) Run(ctx context.Context, g *globals) error {
	log, err := newLogger(g)
	if err != nil {
		return err
	}
	nc, err := c.connect("rolecall-tail", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	filter := c.Subject
	if filter == "" {
		filter = c.prefix() + ".specs.>"
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy}
	if c.FromStart {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	cons, err := js.OrderedConsumer(ctx, c.Stream, cfg)
	if err != nil {
		return fmt.Errorf("tail %s: %w", c.Stream, err)
	}
	iter, err := cons.Messages()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	for n := 0; c.Count == 0 || n < c.Count; n++ {
		m, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		ev, err := events.DecodeOutcome(m.Headers(), m.Data())
		if err != nil {
			log.Warn("undecodable message in outcome stream", "subject", m.Subject(), "error", err)
			continue
		}
		b, err := ev.MarshalJSON()
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "%s\n", b)
	}
	return nil
}
