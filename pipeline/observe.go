package pipeline

import (
	"context"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
	"github.com/rolecall/rolecall/telemetry"
)

// observer is the runner's telemetry: spans, metrics and the per-task log
// lines. The runner calls it at the edges of a delivery and of its stages;
// it decides nothing.
type observer struct {
	w *Worker
	// tracing is false with the no-op tracer provider: then no span is
	// started at all (a no-op span still costs a context and options), and
	// the incoming context alone reaches the outcome.
	tracing bool
	tracer  trace.Tracer
	in      *telemetry.Instruments
	log     *slog.Logger
}

func newObserver(w *Worker) observer {
	_, noop := w.opt.TracerProvider.(tracenoop.TracerProvider)
	return observer{
		w: w, tracing: !noop, tracer: w.opt.TracerProvider.Tracer(telemetry.ScopeName),
		in: w.opt.Instruments, log: w.log,
	}
}

// gauges registers the consumer backlog and in-flight gauges; the
// returned function unregisters them.
func (o observer) gauges(cons jetstream.Consumer) (func(), error) {
	if o.in == nil {
		return func() {}, nil
	}
	pending, err := o.in.ObservePending(func(ctx context.Context) (int64, bool) {
		// A scrape must answer while the broker does not: without a
		// deadline the request waited for the connection's timeout, and
		// while disconnected it would only wait for the deadline.
		if nc := o.w.js.Conn(); nc != nil && !nc.IsConnected() {
			return 0, false
		}
		ctx, cancel := context.WithTimeout(ctx, gaugeTimeout)
		defer cancel()
		info, err := cons.Info(ctx)
		if err != nil {
			return 0, false
		}
		return int64(info.NumPending), true
	})
	if err != nil {
		return nil, err
	}
	// Every task the worker holds is kept alive until it is settled: the
	// keep-alive set is the in-flight count.
	held, err := o.in.ObserveInflight(func() int64 { return int64(o.w.alive.count()) })
	if err != nil {
		_ = pending.Unregister()
		return nil, err
	}
	return func() {
		_ = pending.Unregister()
		_ = held.Unregister()
	}, nil
}

// gaugeTimeout bounds the broker request behind the backlog gauge, so a
// scrape of /metrics answers within a second whatever the broker's state
// (the gauge is then marked stale for that scrape).
const gaugeTimeout = 500 * time.Millisecond

// Span kinds as start options made once: building one per span allocates.
var (
	consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)
	producerKind = trace.WithSpanKind(trace.SpanKindProducer)
)

// begin starts the process span of d, decoded already: its parent context
// may be in the event's tracing extension. The process and decode spans
// get the times those really began.
func (o observer) begin(ctx context.Context, d *delivery) context.Context {
	ceParent, ceState := extensionContext(&d.inc.Event)
	ctx = telemetry.ExtractTask(ctx, o.w.opt.Propagator, d.msg.Headers(), ceParent, ceState)
	var dspan trace.Span
	if o.tracing {
		ctx, _ = o.tracer.Start(ctx, telemetry.SpanProcess, consumerKind, trace.WithTimestamp(d.start))
		_, dspan = o.tracer.Start(ctx, telemetry.SpanDecode, trace.WithTimestamp(d.start))
	}
	o.stageEnd(ctx, dspan, resolve.StageDecode, d.decodeEnd.Sub(d.start), d.decodeErr, trace.WithTimestamp(d.decodeEnd))
	return ctx
}

// end closes the delivery: the process span's attributes and status, the
// tasks counter, and the log line of a failure.
func (o observer) end(ctx context.Context, d *delivery) {
	code := string(d.code)
	if o.in != nil && d.ended != endAbandoned {
		o.in.TaskDone(ctx, d.ended, code)
	}
	if d.ended == endFailed {
		o.log.InfoContext(ctx, "task failed", append(d.logAttrs(), "code", code, "stage", string(d.out.Failure.Stage))...)
	} else if d.ended == endResolved && o.log.Enabled(ctx, slog.LevelDebug) {
		o.log.DebugContext(ctx, "task resolved", append(d.logAttrs(), "model", d.out.Resolved.Model)...)
	}
	span := trace.SpanFromContext(ctx)
	if !o.tracing || !span.IsRecording() {
		return
	}
	attrs := append(o.server(), telemetry.MessagingSystemNATS,
		attribute.String(telemetry.AttrMessagingDestination, d.msg.Subject()),
		attribute.String(telemetry.AttrMessagingOperationType, telemetry.OperationProcess),
		attribute.String(telemetry.AttrMessagingOperationName, telemetry.OperationProcess),
		attribute.String(telemetry.AttrMessagingConsumerGroup, o.w.cfg.Consumer),
		attribute.String(telemetry.AttrOutcome, d.ended),
	)
	add := func(k, v string) {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	add(telemetry.AttrEventID, d.inc.ID)
	add(telemetry.AttrMessagingMessageID, d.inc.ID)
	add(telemetry.AttrEventSource, d.inc.Source)
	add(telemetry.AttrEventType, d.inc.Event.Type())
	add(telemetry.AttrTaskID, d.inc.Task.TaskID)
	add(telemetry.AttrSnapshotDigest, d.out.SnapshotDigest)
	add(telemetry.AttrRole, d.out.Role)
	add(telemetry.AttrPack, d.out.Pack)
	switch d.ended {
	case endFailed:
		add(telemetry.AttrErrorCode, code)
		add(telemetry.AttrErrorType, code)
		span.SetStatus(codes.Error, code)
	case endResolved:
		add(telemetry.AttrInputsDigest, d.out.Resolved.InputsDigest)
	case endRetry:
		add(telemetry.AttrErrorType, errorTypeTransient)
		if d.err != nil {
			span.RecordError(d.err)
			span.SetStatus(codes.Error, "transient: "+d.err.Error())
		}
	}
	span.SetAttributes(attrs...)
	span.End()
}

// stages is the Observer of Handle for a delivery.
func (o observer) stages(ctx context.Context) Observer { return &stageObserver{o: o, ctx: ctx} }

// publish runs fn, which encodes and stores d's outcome, inside the
// publish span: the outcome carries that span's context. Its attributes
// are set when fn is done, from what fn published.
func (o observer) publish(ctx context.Context, d *delivery, fn func(context.Context) error) error {
	var span trace.Span
	if o.tracing {
		ctx, span = o.tracer.Start(ctx, telemetry.SpanPublish, producerKind)
	}
	start := time.Now()
	err := fn(ctx)
	if span != nil && span.IsRecording() {
		typ := events.TypeSpecFailed
		if d.out.Resolved != nil {
			typ = events.TypeSpecResolved
		}
		span.SetAttributes(append(o.server(), telemetry.MessagingSystemNATS,
			attribute.String(telemetry.AttrMessagingDestination, d.subject),
			attribute.String(telemetry.AttrMessagingOperationType, telemetry.OperationSend),
			attribute.String(telemetry.AttrMessagingOperationName, telemetry.OperationPublish),
			attribute.String(telemetry.AttrMessagingMessageID, d.id),
			attribute.String(telemetry.AttrEventID, d.id), attribute.String(telemetry.AttrEventType, typ),
			attribute.String(telemetry.AttrEventSource, orDefault(o.w.cfg.FleetSource, events.DefaultSource)))...)
		if err != nil {
			span.SetAttributes(attribute.String(telemetry.AttrErrorType, errorTypeTransient))
		}
	}
	o.stageEnd(ctx, span, telemetry.StagePublish, time.Since(start), err)
	return err
}

// errorTypeTransient is error.type for a delivery that met a transient
// broker fault (a typed failure's error.type is its code).
const errorTypeTransient = "transient"

// server is server.address and server.port of the broker the worker's
// connection is on now.
func (o observer) server() []attribute.KeyValue {
	nc := o.w.js.Conn()
	if nc == nil {
		return nil
	}
	u, err := url.Parse(nc.ConnectedUrl())
	if err != nil || u.Hostname() == "" {
		return nil
	}
	a := []attribute.KeyValue{attribute.String(telemetry.AttrServerAddress, u.Hostname())}
	if p, err := strconv.Atoi(u.Port()); err == nil {
		a = append(a, attribute.Int(telemetry.AttrServerPort, p))
	}
	return a
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// traceContext is the W3C context an outcome carries: the publish span's
// (its parent's when tracing is off, as the no-op tracer passes that on).
func (o observer) traceContext(ctx context.Context) (traceparent, tracestate string) {
	return telemetry.InjectValues(ctx, o.w.opt.Propagator)
}

// stageEnd ends a stage span (nil when not tracing), with its failure code
// if any, and records the stage's duration. The code is the one the
// outcome gets for err in that stage; a publish error is a transient
// fault, which has none.
func (o observer) stageEnd(ctx context.Context, span trace.Span, stage resolve.Stage, d time.Duration, err error, end ...trace.SpanEndOption) {
	if span != nil {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			if stage != telemetry.StagePublish {
				span.SetAttributes(attribute.String(telemetry.AttrErrorCode, string(FailureFrom(nil, stage, err).Code)))
			}
		}
		span.End(end...)
	}
	if o.in != nil {
		o.in.StageDone(ctx, string(stage), d)
	}
}

// stageObserver times Handle's stages, each in a span of its own when
// tracing.
type stageObserver struct {
	o     observer
	ctx   context.Context
	start time.Time
	span  trace.Span
}

func (s *stageObserver) StageStart(stage resolve.Stage) {
	s.start, s.span = time.Now(), nil
	if s.o.tracing {
		_, s.span = s.o.tracer.Start(s.ctx, spanName(stage))
	}
}

func (s *stageObserver) StageEnd(stage resolve.Stage, err error) {
	s.o.stageEnd(s.ctx, s.span, stage, time.Since(s.start), err)
}

func spanName(s resolve.Stage) string {
	switch s {
	case resolve.StageDecode:
		return telemetry.SpanDecode
	case resolve.StageDiscover:
		return telemetry.SpanDiscover
	case resolve.StageResolve:
		return telemetry.SpanResolve
	case resolve.StageMaterialize:
		return telemetry.SpanMaterialize
	default:
		return "rolecall." + string(s)
	}
}

// extensionContext reads the CloudEvents distributed-tracing extension:
// the parent context when the traceparent header is absent or invalid.
func extensionContext(ev *event.Event) (traceparent, tracestate string) {
	// The v1 context's own map is read in place: Event.Extensions copies it.
	var ext map[string]any
	switch c := ev.Context.(type) {
	case *event.EventContextV1:
		ext = c.Extensions
	case nil:
		return "", ""
	default:
		ext = ev.Extensions()
	}
	traceparent, _ = ext[events.ExtTraceParent].(string)
	tracestate, _ = ext[events.ExtTraceState].(string)
	return traceparent, tracestate
}
