package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sourcegraph/conc/pool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
	"github.com/rolecall/rolecall/telemetry"
)

// SnapshotSource yields the current configuration snapshot
// (*discover.Source implements it).
type SnapshotSource interface {
	Snapshot() *discover.Snapshot
}

// Allocator is the provider hook: it is called only after a resolved
// outcome was published and the task acknowledged, never for a failure.
type Allocator interface {
	Allocate(ctx context.Context, spec *events.ResolvedData) error
}

// Hooks inject faults in tests; nil hooks do nothing.
type Hooks struct {
	// BeforePublish may fail to simulate a transient fault (the task is
	// nak'ed with backoff and no outcome is published).
	BeforePublish func(ctx context.Context, o *Outcome) error
	// AfterPublish sees every PubAck (Duplicate is true when JetStream
	// dropped the outcome as a redelivery's second answer).
	AfterPublish func(o *Outcome, ack *jetstream.PubAck)
	// BeforeAck returning false drops the task without ack or nak, as a
	// crashed worker would.
	BeforeAck func(o *Outcome) bool
}

// Options are the runner's collaborators.
type Options struct {
	Logger         *slog.Logger
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	Instruments    *telemetry.Instruments
	Allocator      Allocator
	Hooks          Hooks
	// Now is the clock for outcome times (default time.Now).
	Now func() time.Time
}

// Worker consumes task events and publishes exactly one outcome per task.
type Worker struct {
	js     jetstream.JetStream
	cfg    Config
	src    SnapshotSource
	opt    Options
	log    *slog.Logger
	tracer trace.Tracer

	mu    sync.Mutex
	ready bool
}

// New builds a worker; nothing touches the server until Run.
func New(js jetstream.JetStream, src SnapshotSource, cfg Config, opt Options) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := events.ValidateSource(cfg.FleetSource); err != nil {
		return nil, fmt.Errorf("%w: fleet source: %v", ErrConfig, err)
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.TracerProvider == nil {
		opt.TracerProvider = tracenoop.NewTracerProvider()
	}
	if opt.Propagator == nil {
		opt.Propagator = propagation.TraceContext{}
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Worker{
		js: js, cfg: cfg, src: src, opt: opt, log: opt.Logger,
		tracer: opt.TracerProvider.Tracer(telemetry.ScopeName),
	}, nil
}

// Config returns the effective configuration (defaults applied).
func (w *Worker) Config() Config { return w.cfg }

// Ready reports whether the consumer is bound and consuming.
func (w *Worker) Ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready
}

func (w *Worker) setReady(v bool) {
	w.mu.Lock()
	w.ready = v
	w.mu.Unlock()
}

// Run consumes until ctx is cancelled, then drains: it stops fetching,
// finishes and acknowledges the tasks it holds, and returns nil.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := Ensure(ctx, w.js, w.cfg)
	if err != nil {
		return err
	}
	dl, err := w.js.Consumer(ctx, w.cfg.DeadLetter, w.cfg.Consumer+"-deadletter")
	if err != nil {
		return fmt.Errorf("dead-letter consumer: %w", err)
	}
	if w.opt.Instruments != nil {
		reg, err := w.opt.Instruments.ObservePending(func(ctx context.Context) (int64, bool) {
			info, err := cons.Info(ctx)
			if err != nil {
				return 0, false
			}
			return int64(info.NumPending), true
		})
		if err != nil {
			return fmt.Errorf("consumer lag gauge: %w", err)
		}
		defer func() { _ = reg.Unregister() }()
	}

	// In-flight work survives cancellation of ctx: drain means finishing
	// what was fetched, not abandoning it. Nor does it inherit a span ctx
	// may carry: a task's trace comes from the task alone, so a traceless
	// task starts a trace of its own instead of joining the caller's.
	work := trace.ContextWithSpanContext(context.WithoutCancel(ctx), trace.SpanContext{})
	var wg sync.WaitGroup
	var dlErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		dlErr = w.consume(ctx, dl, 1, func(m jetstream.Msg) { w.deadLetter(work, m) })
	}()
	w.setReady(true)
	err = w.consume(ctx, cons, w.cfg.Concurrency, func(m jetstream.Msg) { w.process(work, m) })
	w.setReady(false)
	wg.Wait()
	return errors.Join(err, dlErr)
}

// consume feeds messages to handle with bounded concurrency until ctx is
// done; then it drains the iterator's buffer and waits for the handlers.
func (w *Worker) consume(ctx context.Context, c jetstream.Consumer, n int, handle func(jetstream.Msg)) error {
	iter, err := c.Messages(jetstream.PullMaxMessages(2 * n))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	stop := context.AfterFunc(ctx, iter.Drain)
	defer stop()
	p := pool.New().WithMaxGoroutines(n)
	for {
		msg, err := iter.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			break
		}
		if err != nil {
			// Heartbeat and reconnect errors are reported and survived:
			// the iterator keeps pulling after the connection is back.
			w.log.Warn("fetch", "error", err)
			continue
		}
		p.Go(func() { handle(msg) })
	}
	p.Wait()
	return nil
}

// process turns one task message into exactly one published outcome, or a
// nak when a transient fault prevents that.
func (w *Worker) process(ctx context.Context, msg jetstream.Msg) {
	start := time.Now()
	md, _ := msg.Metadata()
	var delivered uint64 = 1
	var seq uint64
	if md != nil {
		delivered, seq = md.NumDelivered, md.Sequence.Stream
	}
	var inc events.Incoming
	defer func() {
		if r := recover(); r != nil {
			// A panic anywhere in a stage is a bug, but it must not crash the
			// worker or lose the task: nak it so another attempt (or the
			// dead-letter path) produces the outcome.
			w.log.ErrorContext(ctx, "panic while processing task", "task_id", inc.Task.TaskID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			trace.SpanFromContext(ctx).SetStatus(codes.Error, "panic")
			w.nak(ctx, msg, delivered, inc.Task.TaskID)
		}
	}()
	if in := w.opt.Instruments; in != nil {
		in.Inflight.Add(ctx, 1)
		defer in.Inflight.Add(ctx, -1)
	}
	keepAlive := w.keepAlive(msg)
	defer keepAlive.Stop()

	header := msg.Headers()
	decodeStart := time.Now()
	inc, decodeErr := events.DecodeTask(header, msg.Data(), events.DecodeOptions{MaxDataBytes: w.cfg.MaxDataBytes})
	decodeEnd := time.Now()
	// The parent context is known only after decoding (it may be in the
	// event's extension), so the process span and its decode child are
	// started afterwards with the times they really began.
	ceParent, ceState := extensionContext(inc.Event.Extensions())
	parent := telemetry.ExtractTask(ctx, w.opt.Propagator, header, ceParent, ceState)
	ctx, span := w.tracer.Start(parent, telemetry.SpanProcess, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithTimestamp(start), trace.WithAttributes(taskAttrs(msg.Subject(), &inc)...))
	defer span.End()

	var transient error
	_, dspan := w.tracer.Start(ctx, telemetry.SpanDecode, trace.WithTimestamp(decodeStart))
	w.stageEnd(ctx, dspan, resolve.StageDecode, decodeEnd.Sub(decodeStart), decodeErr, trace.WithTimestamp(decodeEnd))

	var out Outcome
	if decodeErr != nil {
		out.Failure = FailureFrom(&inc.Task.TaskID, resolve.StageDecode, decodeErr)
	} else {
		snap := w.src.Snapshot()
		out = Handle(snap, inc.Task, inc.Ref, w.observer(ctx))
		span.SetAttributes(attribute.String(telemetry.AttrSnapshotDigest, snap.Digest))
	}
	if out.Role != "" {
		span.SetAttributes(attribute.String(telemetry.AttrRole, out.Role))
	}
	if out.Pack != "" {
		span.SetAttributes(attribute.String(telemetry.AttrPack, out.Pack))
	}

	id := events.OutcomeIDForSequence(w.cfg.TasksStream, seq)
	if inc.Source != "" && inc.ID != "" {
		id = events.OutcomeID(inc.Source, inc.ID)
	}
	if h := w.opt.Hooks.BeforePublish; h != nil {
		transient = h(ctx, &out)
	}
	if transient == nil {
		var ack *jetstream.PubAck
		ack, transient = w.publish(ctx, id, inc, &out)
		if h := w.opt.Hooks.AfterPublish; h != nil && ack != nil {
			h(&out, ack)
		}
	}
	if transient != nil {
		span.RecordError(transient)
		span.SetStatus(codes.Error, "transient: "+transient.Error())
		span.SetAttributes(attribute.String(telemetry.AttrOutcome, telemetry.OutcomeRetry))
		w.log.WarnContext(ctx, "transient fault; task will be redelivered", "task_id", inc.Task.TaskID, "delivery", delivered, "error", transient)
		w.nak(ctx, msg, delivered, inc.Task.TaskID)
		if in := w.opt.Instruments; in != nil {
			in.TaskDone(ctx, telemetry.OutcomeRetry, "")
		}
		return
	}
	if h := w.opt.Hooks.BeforeAck; h != nil && !h(&out) {
		return
	}
	if err := msg.Ack(); err != nil {
		// The outcome is published; a lost ack only means a redelivery,
		// whose outcome JetStream drops as a duplicate.
		w.log.WarnContext(ctx, "ack failed", "task_id", inc.Task.TaskID, "error", err)
	}
	outcome, code := telemetry.OutcomeResolved, ""
	if out.Failure != nil {
		outcome, code = telemetry.OutcomeFailed, string(out.Failure.Code)
		span.SetStatus(codes.Error, code)
		span.SetAttributes(attribute.String(telemetry.AttrErrorCode, code))
		w.log.InfoContext(ctx, "task failed", "task_id", inc.Task.TaskID, "code", code, "stage", out.Failure.Stage)
	} else {
		span.SetAttributes(attribute.String(telemetry.AttrInputsDigest, out.Resolved.InputsDigest))
		w.log.DebugContext(ctx, "task resolved", "task_id", inc.Task.TaskID, "model", out.Resolved.Model)
	}
	span.SetAttributes(attribute.String(telemetry.AttrOutcome, outcome))
	if in := w.opt.Instruments; in != nil {
		in.TaskDone(ctx, outcome, code)
	}
	if out.Resolved != nil && w.opt.Allocator != nil {
		if err := w.opt.Allocator.Allocate(ctx, out.Resolved); err != nil {
			w.log.ErrorContext(ctx, "allocator failed after resolution was published", "task_id", inc.Task.TaskID, "error", err)
		}
	}
}

// publish encodes the outcome and waits for its PubAck.
func (w *Worker) publish(ctx context.Context, id string, inc events.Incoming, out *Outcome) (*jetstream.PubAck, error) {
	ctx, span := w.tracer.Start(ctx, telemetry.SpanPublish, trace.WithSpanKind(trace.SpanKindProducer))
	start := time.Now()
	var err error
	defer func() { w.stageDone(ctx, span, "publish", start, err) }()

	meta := events.OutcomeMeta{
		ID: id, Source: w.cfg.FleetSource, TaskID: inc.Task.TaskID, CausationID: inc.ID,
		Time: w.opt.Now(), DataSchemaBase: w.cfg.DataSchemaBase,
	}
	hdr := nats.Header{}
	meta.TraceParent, meta.TraceState = telemetry.Inject(ctx, w.opt.Propagator, hdr)
	var (
		subject string
		h       nats.Header
		body    []byte
	)
	if out.Resolved != nil {
		subject, h, body, err = events.EncodeResolved(w.cfg.Prefix, meta, out.Resolved)
		if err != nil {
			// Unencodable resolved data is a bug; report it as a typed
			// materialize failure rather than retrying forever.
			out.Failure = FailureFrom(&inc.Task.TaskID, resolve.StageMaterialize, err)
			out.Failure.Code = resolve.CodeMaterializeFailed
			out.Resolved = nil
		}
	}
	if out.Failure != nil {
		subject, h, body, err = events.EncodeFailed(w.cfg.Prefix, meta, out.Failure)
		if err != nil {
			return nil, fmt.Errorf("encode failure outcome: %w", err)
		}
	}
	if span.IsRecording() {
		typ := events.TypeSpecFailed
		if out.Resolved != nil {
			typ = events.TypeSpecResolved
		}
		span.SetAttributes(telemetry.MessagingSystemNATS, attribute.String(telemetry.AttrMessagingDestination, subject),
			attribute.String(telemetry.AttrEventID, id), attribute.String(telemetry.AttrEventType, typ))
	}
	ack, err := w.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: h, Data: body}, jetstream.WithMsgID(id))
	if err != nil {
		return nil, fmt.Errorf("publish outcome: %w", err)
	}
	return ack, nil
}

func (w *Worker) nak(ctx context.Context, msg jetstream.Msg, delivered uint64, taskID string) {
	if err := msg.NakWithDelay(w.cfg.backoff(int(delivered))); err != nil {
		w.log.WarnContext(ctx, "nak failed; the task will be redelivered after ack_wait", "task_id", taskID, "error", err)
	}
}

// keepAlive tells the server the task is still being worked on while a
// stage runs long, so it is not redelivered to another worker meanwhile.
func (w *Worker) keepAlive(msg jetstream.Msg) *time.Timer {
	every := w.cfg.AckWait / 2
	var t *time.Timer
	t = time.AfterFunc(every, func() {
		if msg.InProgress() == nil {
			t.Reset(every)
		}
	})
	return t
}

// observer records a span and a duration for each Handle stage.
func (w *Worker) observer(ctx context.Context) StageFunc {
	return func(stage resolve.Stage) func(error) {
		start := time.Now()
		_, span := w.tracer.Start(ctx, spanName(stage))
		return func(err error) { w.stageDone(ctx, span, stage, start, err) }
	}
}

// stageDone ends a stage that began at start. Stage times come from the
// monotonic clock, not Options.Now, which only stamps outcomes.
func (w *Worker) stageDone(ctx context.Context, span trace.Span, stage resolve.Stage, start time.Time, err error) {
	w.stageEnd(ctx, span, stage, time.Since(start), err)
}

// stageEnd ends a stage span (with its failure code, if any) and records
// the stage's duration d.
func (w *Worker) stageEnd(ctx context.Context, span trace.Span, stage resolve.Stage, d time.Duration, err error, end ...trace.SpanEndOption) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		if c := errorCode(err); c != "" {
			span.SetAttributes(attribute.String(telemetry.AttrErrorCode, string(c)))
		}
	}
	span.End(end...)
	if in := w.opt.Instruments; in != nil {
		in.StageDone(ctx, string(stage), d)
	}
}

// taskAttrs are the process span's attributes known when it starts. A value
// the message did not carry is left out rather than recorded as "".
func taskAttrs(subject string, inc *events.Incoming) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 5)
	a = append(a, telemetry.MessagingSystemNATS, attribute.String(telemetry.AttrMessagingDestination, subject))
	for _, kv := range [...]struct{ k, v string }{
		{telemetry.AttrEventID, inc.ID},
		{telemetry.AttrEventType, inc.Event.Type()},
		{telemetry.AttrTaskID, inc.Task.TaskID},
	} {
		if kv.v != "" {
			a = append(a, attribute.String(kv.k, kv.v))
		}
	}
	return a
}

// extensionContext reads the CloudEvents distributed-tracing extension.
// It is the parent context when the traceparent header is absent or
// invalid; Incoming.TraceParent cannot serve, as it holds the header
// whenever there is one, valid or not.
func extensionContext(ext map[string]any) (traceparent, tracestate string) {
	traceparent, _ = ext[events.ExtTraceParent].(string)
	tracestate, _ = ext[events.ExtTraceState].(string)
	return traceparent, tracestate
}

func errorCode(err error) resolve.Code {
	f := FailureFrom(nil, resolve.StageResolve, err)
	return f.Code
}

// deadLetter handles one max-deliveries advisory: it fetches the task by
// stream sequence and publishes delivery_exhausted with the outcome id the
// task would have had, so any earlier outcome stands and this one is
// dropped as a duplicate.
func (w *Worker) deadLetter(ctx context.Context, m jetstream.Msg) {
	adv, err := decodeMaxDeliveriesAdvisory(m.Data())
	if err != nil {
		// Not an advisory we understand: nothing to publish for it.
		w.log.ErrorContext(ctx, "unreadable dead-letter advisory; terminating it", "error", err)
		_ = m.Term()
		return
	}
	var inc events.Incoming
	var raw *jetstream.RawStreamMsg
	stream, err := w.js.Stream(ctx, w.cfg.TasksStream)
	if err == nil {
		raw, err = stream.GetMsg(ctx, adv.StreamSeq)
	}
	fetched := err == nil
	if fetched {
		inc, _ = events.DecodeTask(raw.Header, raw.Data, events.DecodeOptions{MaxDataBytes: w.cfg.MaxDataBytes})
		// The outcome joins the task's trace, beside its failed deliveries.
		ceParent, ceState := extensionContext(inc.Event.Extensions())
		ctx = telemetry.ExtractTask(ctx, w.opt.Propagator, raw.Header, ceParent, ceState)
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		w.log.WarnContext(ctx, "dead-letter fetch failed; retrying", "stream_seq", adv.StreamSeq, "error", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	id := events.OutcomeIDForSequence(w.cfg.TasksStream, adv.StreamSeq)
	if inc.Source != "" && inc.ID != "" {
		id = events.OutcomeID(inc.Source, inc.ID)
	}
	msg := fmt.Sprintf("task reached max_deliver (%d deliveries) without an outcome", adv.Deliveries)
	if !fetched {
		msg += "; the task message is no longer in the stream"
	}
	out := Outcome{Failure: &events.FailureData{
		TaskID:  nonEmpty(&inc.Task.TaskID),
		Stage:   resolve.StageDeliver,
		Code:    resolve.CodeDeliveryExhausted,
		Details: map[string]any{"stream": w.cfg.TasksStream, "stream_seq": adv.StreamSeq, "deliveries": adv.Deliveries},
		Message: msg,
	}}
	if _, err := w.publish(ctx, id, inc, &out); err != nil {
		w.log.WarnContext(ctx, "dead-letter publish failed; retrying", "task_id", inc.Task.TaskID, "stream_seq", adv.StreamSeq, "error", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	if err := m.Ack(); err != nil {
		w.log.WarnContext(ctx, "dead-letter ack failed", "task_id", inc.Task.TaskID, "error", err)
	}
	if in := w.opt.Instruments; in != nil {
		in.TaskDone(ctx, telemetry.OutcomeFailed, string(resolve.CodeDeliveryExhausted))
	}
	w.log.WarnContext(ctx, "delivery exhausted", "task_id", inc.Task.TaskID, "stream_seq", adv.StreamSeq)
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
