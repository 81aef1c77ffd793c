package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
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
// spec is read-only, as Handle's outcomes are: it shares memory with the
// worker's configuration snapshot (ResolvedAgentSpec.Clone gives a copy
// to modify).
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
	js  jetstream.JetStream
	cfg Config
	src SnapshotSource
	opt Options
	log *slog.Logger
	// tracing is false with the no-op tracer provider: the worker then
	// starts no spans at all (a no-op span still costs a context and the
	// options), and the incoming context alone reaches the outcome.
	tracing bool
	tracer  trace.Tracer
	alive   *keepAlives

	mu    sync.Mutex
	ready bool
}

// New builds a worker; nothing touches the server until Run. The worker
// writes over an outcome's body as soon as it is published (PublishOptions),
// so publish callbacks configured on js (jetstream.WithPublishAsyncAckHandler,
// WithPublishAsyncErrHandler) must not read or keep the message.
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
	_, noop := opt.TracerProvider.(tracenoop.TracerProvider)
	return &Worker{
		js: js, cfg: cfg, src: src, opt: opt, log: opt.Logger,
		tracer: opt.TracerProvider.Tracer(telemetry.ScopeName), tracing: !noop,
		alive: newKeepAlives(cfg.AckWait),
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
// finishes and acknowledges the tasks it holds, and returns nil. A cluster
// still electing its JetStream leaders is waited for (EnsureRetry), not a
// reason to fail; cancellation during that wait returns nil.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := EnsureRetry(ctx, w.js, w.cfg, w.log)
	if err != nil {
		if ctx.Err() != nil {
			w.log.Info("stopped before JetStream became available")
			return nil
		}
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
		// Every task the worker holds is kept alive until it is acked or
		// nak'ed: the keep-alive set is the in-flight count.
		held, err := w.opt.Instruments.ObserveInflight(func() int64 { return int64(w.alive.count()) })
		if err != nil {
			return fmt.Errorf("in-flight gauge: %w", err)
		}
		defer func() { _ = held.Unregister() }()
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
		dlErr = w.consume(ctx, dl, 1, 2, func(m jetstream.Msg) { w.deadLetter(work, m) })
	}()
	w.setReady(true)
	err = w.consumeTasks(ctx, work, cons)
	w.setReady(false)
	wg.Wait()
	return errors.Join(err, dlErr)
}

// consume feeds messages to handle with bounded concurrency until ctx is
// done; then it drains the iterator's buffer and waits for the handlers.
// The dead-letter path uses it: its handler publishes synchronously, which
// is right for a stream that sees a message a day.
func (w *Worker) consume(ctx context.Context, c jetstream.Consumer, n, batch int, handle func(jetstream.Msg)) error {
	iter, err := w.messages(c, batch)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	stop := context.AfterFunc(ctx, iter.iter.Drain)
	defer stop()
	p := pool.New().WithMaxGoroutines(n)
	for {
		msg, err := iter.next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			break
		}
		if err != nil {
			continue
		}
		p.Go(func() { handle(msg) })
	}
	p.Wait()
	return nil
}

// A pull iterator is driven by two timers of its own, and the worker's
// waits in Next must leave both able to act.
//
//   - nats.go v1.55 re-checks whether to ask the server for more only when
//     Next runs; it skips that check while its previous pull request is
//     still being sent, and if every requested message arrives inside that
//     window no request is outstanding. Returning from Next soon after the
//     last message (minNextWait) makes the check happen again. Measured:
//     without it, one `worker bench` run in ten stalled.
//   - A request that is lost — sent while the consumer has no leader, or
//     refused with a status the client does not count as an answer —
//     leaves the iterator believing a request is outstanding. Only the
//     missing-heartbeat timer recovers from that, and it lives inside one
//     Next call: it fires after 2 × pullHeartbeat of silence. So while idle
//     the wait grows to maxNextWait, longer than that. Waiting at most
//     50 ms forever, as the worker once did, kept the timer from ever
//     firing, and a stream-leader restart in the container tests left
//     every worker idle with thousands of tasks pending.
//
// A waiting request makes the server send a heartbeat every
// pullHeartbeat, so an idle worker costs the broker two small messages a
// second per iterator.
const (
	minNextWait   = 50 * time.Millisecond
	maxNextWait   = 2 * time.Second
	pullHeartbeat = 500 * time.Millisecond
)

// puller wraps a pull iterator with the waiting policy above.
type puller struct {
	iter   jetstream.MessagesContext
	log    *slog.Logger
	wait   time.Duration
	silent bool // a missing heartbeat was reported and no message came since
}

// PullOptions are the options a worker's pull iterator is made with: a
// batch of batch messages and the heartbeat. The bench's bare loop uses
// them too, so both loops pay for the same consumption (the heartbeat arms
// a timer in every Next call).
func PullOptions(batch int) []jetstream.PullMessagesOpt {
	return []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(batch), jetstream.PullHeartbeat(pullHeartbeat)}
}

func (w *Worker) messages(c jetstream.Consumer, batch int) (*puller, error) {
	iter, err := c.Messages(PullOptions(batch)...)
	if err != nil {
		return nil, err
	}
	return &puller{iter: iter, log: w.log, wait: minNextWait}, nil
}

// next returns the iterator's next message; nil error means a message.
// Timeouts are the regular wake-ups; heartbeat and reconnect errors are
// reported and survived (the iterator pulls again on the next call).
func (p *puller) next() (jetstream.Msg, error) {
	msg, err := p.iter.Next(jetstream.NextMaxWait(p.wait))
	switch {
	case err == nil:
		p.wait, p.silent = minNextWait, false
	case errors.Is(err, nats.ErrTimeout):
		p.wait = min(2*p.wait, maxNextWait)
	case errors.Is(err, jetstream.ErrMsgIteratorClosed):
	case errors.Is(err, jetstream.ErrNoHeartbeat):
		// Once per silence: while the broker is unreachable this repeats
		// every two heartbeats.
		if !p.silent {
			p.log.Warn("no heartbeat from the consumer; asking for messages again", "error", err)
		}
		p.silent = true
	default:
		p.log.Warn("fetch", "error", err)
	}
	return msg, err
}

// consumeTasks is the task loop. Concurrency goroutines take messages from
// one pull iterator and run each through decode → resolve → encode, then
// publish the outcome asynchronously and hand the PubAck future to one
// completion goroutine, which waits for the futures in order and acks
// each task when — and only when — its outcome is stored. Publishing does
// not hold a processing goroutine for a broker round trip, so a few
// goroutines keep the CPU busy while up to MaxInFlight tasks overlap
// their round trips.
func (w *Worker) consumeTasks(ctx, work context.Context, c jetstream.Consumer) error {
	iter, err := w.messages(c, w.cfg.FetchBatch)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	stop := context.AfterFunc(ctx, iter.iter.Drain)
	defer stop()

	// A slot is taken before a message is handed on and given back when
	// its task is finished (release), so the worker never holds more than
	// MaxInFlight tasks beyond the iterator's buffer; when it is full the
	// iterator stops asking the server for more.
	slots := make(chan struct{}, w.cfg.MaxInFlight)
	msgs := make(chan jetstream.Msg) // the iterator's buffer is the queue
	pending := make(chan *delivery, w.cfg.MaxInFlight)
	var procs sync.WaitGroup
	for range w.cfg.Concurrency {
		procs.Add(1)
		go func() {
			defer procs.Done()
			// The goroutine's prompts are pieces of shared blocks, and
			// its outcomes are written into one buffer (see process).
			var arena resolve.TextArena
			var plans Plans
			var body []byte
			for m := range msgs {
				if d := w.process(work, m, slots, &arena, &plans, &body); d != nil {
					pending <- d
				}
			}
		}()
	}
	// The allocator may be slow (it talks to a provider); it runs beside
	// the completion goroutine, never inside it.
	allocs := pool.New().WithMaxGoroutines(w.cfg.Concurrency)
	completed := make(chan struct{})
	go func() {
		defer close(completed)
		tick := time.NewTicker(w.ackCheck())
		defer tick.Stop()
		for d := range pending {
			w.await(d, tick, allocs)
		}
	}()
	stopAlive := make(chan struct{})
	aliveDone := make(chan struct{})
	go func() {
		defer close(aliveDone)
		w.alive.run(stopAlive)
	}()
	defer func() {
		close(stopAlive)
		<-aliveDone
	}()

	for {
		msg, err := iter.next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			break
		}
		if err != nil {
			continue
		}
		slots <- struct{}{}
		msgs <- msg
	}
	close(msgs)
	procs.Wait()
	close(pending)
	<-completed
	allocs.Wait()
	return nil
}

// delivery is one task the worker holds: made while the task is
// processed, and handed to the completion goroutine once its outcome is
// published and not yet stored.
type delivery struct {
	ctx  context.Context // carries the process span
	span trace.Span      // rolecall.process
	// attrs are the process span's attributes, set in one call when it
	// ends (nil when the span is not recording).
	attrs    []attribute.KeyValue
	pub      trace.Span // rolecall.publish
	pubStart time.Time
	msg      jetstream.Msg
	future   jetstream.PubAckFuture
	out      Outcome
	taskID   string
	slots    chan struct{}
	// obs observes Handle's stages; held here so that observing
	// allocates nothing of its own.
	obs stageObserver
}

// process turns one task message into a published outcome whose PubAck is
// still to come (the returned delivery), or finishes the task itself: a nak
// when a transient fault prevents publishing (nil is returned then).
func (w *Worker) process(ctx context.Context, msg jetstream.Msg, slots chan struct{}, arena *resolve.TextArena, plans *Plans, body *[]byte) (d *delivery) {
	start := time.Now()
	var inc events.Incoming
	w.alive.hold(msg, start)
	span := trace.SpanFromContext(ctx)
	// The delivery is made first: the outcome is filled in place and the
	// process span's attributes gathered in it, whether or not it is
	// handed on (d stays nil until then, which the deferred release reads);
	// its ctx and span follow the locals once the process span starts.
	dl := &delivery{ctx: ctx, span: span, msg: msg, slots: slots}
	// Everything below ends here unless a delivery carries it on to the
	// completion goroutine.
	defer func() {
		if r := recover(); r != nil {
			// A panic anywhere in a stage is a bug, but it must not crash the
			// worker or lose the task: nak it so another attempt (or the
			// dead-letter path) produces the outcome.
			w.log.ErrorContext(ctx, "panic while processing task", "task_id", inc.Task.TaskID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			span.SetStatus(codes.Error, "panic")
			w.nak(ctx, msg, inc.Task.TaskID, deliveryCount(msg))
			d = nil
		}
		if d == nil {
			w.release(dl)
		}
	}()

	header := msg.Headers()
	decodeStart := time.Now()
	inc, decodeErr := events.DecodeTask(header, msg.Data(), events.DecodeOptions{MaxDataBytes: w.cfg.MaxDataBytes})
	decodeEnd := time.Now()
	// The parent context is known only after decoding (it may be in the
	// event's extension), so the process span and its decode child are
	// started afterwards with the times they really began.
	ceParent, ceState := extensionContext(&inc.Event)
	parent := telemetry.ExtractTask(ctx, w.opt.Propagator, header, ceParent, ceState)
	ctx = parent
	recording := false
	if w.tracing {
		ctx, span = w.tracer.Start(parent, telemetry.SpanProcess, consumerKind, trace.WithTimestamp(start))
		recording = span.IsRecording()
		_, dspan := w.tracer.Start(ctx, telemetry.SpanDecode, trace.WithTimestamp(decodeStart))
		w.stageEnd(ctx, dspan, resolve.StageDecode, decodeEnd.Sub(decodeStart), decodeErr, trace.WithTimestamp(decodeEnd))
	} else {
		// span stays the context's span, which End and SetStatus ignore.
		w.stageEnd(ctx, nil, resolve.StageDecode, decodeEnd.Sub(decodeStart), decodeErr)
	}
	dl.ctx, dl.span = ctx, span
	if recording {
		// The process span's attributes are gathered here and in finish
		// and set in one call when it ends (release): each SetAttributes
		// grows the span's own slice, and a second call doubled it.
		dl.attrs = taskAttrs(make([]attribute.KeyValue, 0, maxProcAttrs), msg.Subject(), &inc)
	}

	out := &dl.out
	if decodeErr != nil {
		out.Failure = FailureFrom(&inc.Task.TaskID, resolve.StageDecode, decodeErr)
	} else {
		snap := w.src.Snapshot()
		dl.obs = stageObserver{w: w, ctx: ctx}
		*out = HandleIn(arena, plans, snap, inc.Task, inc.Ref, &dl.obs)
		if r := out.Resolved; r != nil && r.PromptTail != "" && w.showsOutcomes() {
			// An allocator or a hook gets the whole prompt; the encoder
			// alone needs no composed copy.
			out.Resolved = r.Complete()
		}
		if recording {
			dl.attrs = append(dl.attrs, attribute.String(telemetry.AttrSnapshotDigest, snap.Digest))
		}
	}
	if recording {
		if out.Role != "" {
			dl.attrs = append(dl.attrs, attribute.String(telemetry.AttrRole, out.Role))
		}
		if out.Pack != "" {
			dl.attrs = append(dl.attrs, attribute.String(telemetry.AttrPack, out.Pack))
		}
	}

	var id string
	if inc.Source != "" && inc.ID != "" {
		id = events.OutcomeID(inc.Source, inc.ID)
	} else {
		// Only an event without source or id needs the stream sequence:
		// the reply subject is parsed just then.
		var seq uint64
		if md, _ := msg.Metadata(); md != nil {
			seq = md.Sequence.Stream
		}
		id = events.OutcomeIDForSequence(w.cfg.TasksStream, seq)
	}
	dl.taskID = inc.Task.TaskID
	var transient error
	if h := w.opt.Hooks.BeforePublish; h != nil {
		transient = h(ctx, out)
	}
	if transient == nil {
		var m *nats.Msg
		// The encoded fixed fields of the plan the outcome was finished
		// from, unless a hook may have changed the outcome.
		var fixed *events.FixedFields
		if out.Resolved != nil && w.opt.Hooks.BeforePublish == nil {
			fixed = plans.fixed()
		}
		m, dl.pub, dl.pubStart, transient = w.encode(ctx, id, inc, out, fixed, *body)
		if transient == nil && out.Resolved != nil && tooLarge(w.js.Conn(), m) {
			// A resolved spec too large for the server would be refused on
			// every delivery; it is a typed failure, not a transient fault.
			size := len(m.Data)
			out.Failure = &events.FailureData{
				TaskID: nonEmpty(&inc.Task.TaskID), Stage: resolve.StageMaterialize, Code: resolve.CodeMaterializeFailed,
				Details: map[string]any{"reason": "outcome_too_large", "bytes": size, "max_payload": w.js.Conn().MaxPayload()},
				Message: fmt.Sprintf("the resolved outcome is %d bytes, over the server's max payload of %d", size, w.js.Conn().MaxPayload()),
			}
			out.Resolved = nil
			if dl.pub != nil {
				dl.pub.End()
			}
			m, dl.pub, dl.pubStart, transient = w.encode(ctx, id, inc, out, nil, m.Data)
		}
		// An encode error has ended the publish stage already.
		if transient == nil {
			dl.future, transient = w.js.PublishMsgAsync(m, publishOpts...)
			// The client has copied the message into its write buffer and,
			// with publishOpts, never reads it again: the goroutine's next
			// outcome is written over this one while it is still in the
			// CPU's cache. A body reused only after its PubAck, as before
			// (a pool of them), meant the bodies of every task in flight
			// (up to MaxInFlight, 256 by default) took turns, and each
			// outcome was written into memory long out of the cache
			// (docs/DECISIONS.md). A rare huge body is not kept.
			if cap(m.Data) <= maxKeptBody {
				*body = m.Data[:0]
			}
			if transient != nil {
				transient = fmt.Errorf("publish outcome: %w", transient)
				w.stageDone(ctx, dl.pub, "publish", dl.pubStart, transient)
			}
		}
	}
	if transient != nil {
		w.retry(dl, transient)
		return nil
	}
	return dl
}

// showsOutcomes reports whether anything besides the encoder reads an
// outcome: the allocator or a hook.
func (w *Worker) showsOutcomes() bool {
	h := &w.opt.Hooks
	return w.opt.Allocator != nil || h.BeforePublish != nil || h.AfterPublish != nil || h.BeforeAck != nil
}

// await waits for one delivery's PubAck and finishes the task. A PubAck
// that does not come within ack_wait is a transient fault: the task is
// nak'ed, and should the outcome have been stored after all, the
// redelivery's is dropped as its duplicate.
func (w *Worker) await(d *delivery, tick *time.Ticker, allocs *pool.Pool) {
	// The deadline counts from the publish, so that after a lost
	// connection the queued futures time out together, not one after the
	// other. It is checked on the completion goroutine's ticks (within
	// ackCheck of it) rather than with a timer reset per task.
	deadline := d.pubStart.Add(w.cfg.AckWait)
	var ack *jetstream.PubAck
	var err error
wait:
	for {
		select {
		case ack = <-d.future.Ok():
			break wait
		case err = <-d.future.Err():
			err = fmt.Errorf("publish outcome: %w", err)
			break wait
		case now := <-tick.C:
			if now.Before(deadline) {
				continue
			}
			err = fmt.Errorf("publish outcome: no PubAck within %s", w.cfg.AckWait)
			break wait
		}
	}
	w.stageDone(d.ctx, d.pub, "publish", d.pubStart, err)
	if err != nil {
		w.retry(d, err)
		return
	}
	w.finish(d, ack, allocs)
}

// finish runs after the outcome is stored: hooks, ack, telemetry, and the
// allocator for a resolved outcome.
func (w *Worker) finish(d *delivery, ack *jetstream.PubAck, allocs *pool.Pool) {
	ctx, span, out := d.ctx, d.span, &d.out
	released := false
	defer func() {
		if r := recover(); r != nil {
			w.log.ErrorContext(ctx, "panic while finishing task", "task_id", d.taskID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			span.SetStatus(codes.Error, "panic")
			w.nak(ctx, d.msg, d.taskID, deliveryCount(d.msg))
		}
		if !released {
			w.release(d)
		}
	}()
	if h := w.opt.Hooks.AfterPublish; h != nil {
		h(out, ack)
	}
	if h := w.opt.Hooks.BeforeAck; h != nil && !h(out) {
		return
	}
	if err := d.msg.Ack(); err != nil {
		// The outcome is published; a lost ack only means a redelivery,
		// whose outcome JetStream drops as a duplicate.
		w.log.WarnContext(ctx, "ack failed", "task_id", d.taskID, "error", err)
	}
	outcome, code := telemetry.OutcomeResolved, ""
	var last attribute.KeyValue // the error code or the inputs digest
	if out.Failure != nil {
		outcome, code = telemetry.OutcomeFailed, string(out.Failure.Code)
		span.SetStatus(codes.Error, code)
		last = attribute.String(telemetry.AttrErrorCode, code)
		w.log.InfoContext(ctx, "task failed", "task_id", d.taskID, "code", code, "stage", out.Failure.Stage)
	} else {
		last = attribute.String(telemetry.AttrInputsDigest, out.Resolved.InputsDigest)
		// Checked first: building the arguments allocates even when the
		// level is off (two allocations on every resolved task).
		if w.log.Enabled(ctx, slog.LevelDebug) {
			w.log.DebugContext(ctx, "task resolved", "task_id", d.taskID, "model", out.Resolved.Model)
		}
	}
	if d.attrs != nil {
		d.attrs = append(d.attrs, last, attribute.String(telemetry.AttrOutcome, outcome))
	}
	if in := w.opt.Instruments; in != nil {
		in.TaskDone(ctx, outcome, code)
	}
	if out.Resolved != nil && w.opt.Allocator != nil {
		// The task is done (acked, counted); the span still covers the
		// allocation, so it ends with it.
		// The delivery is the allocation's alone from here.
		released = true
		allocs.Go(func() {
			defer w.release(d)
			if err := w.opt.Allocator.Allocate(ctx, out.Resolved); err != nil {
				w.log.ErrorContext(ctx, "allocator failed after resolution was published", "task_id", d.taskID, "error", err)
			}
		})
	}
}

// retry ends a delivery that met a transient fault: no outcome yet, nak
// with backoff.
func (w *Worker) retry(d *delivery, err error) {
	span, ctx := d.span, d.ctx
	span.RecordError(err)
	span.SetStatus(codes.Error, "transient: "+err.Error())
	if d.attrs != nil {
		d.attrs = append(d.attrs, attribute.String(telemetry.AttrOutcome, telemetry.OutcomeRetry))
	}
	n := deliveryCount(d.msg)
	w.log.WarnContext(ctx, "transient fault; task will be redelivered", "task_id", d.taskID, "delivery", n, "error", err)
	w.nak(ctx, d.msg, d.taskID, n)
	if in := w.opt.Instruments; in != nil {
		in.TaskDone(ctx, telemetry.OutcomeRetry, "")
	}
	if d.future != nil {
		// process has handed the delivery over, so its deferred release
		// will not run: this is the end of the task.
		w.release(d)
	}
}

// release ends what every delivery holds: its process span (setting the
// attributes gathered for it), its keep-alive (and so its place in the
// in-flight count) and its slot.
func (w *Worker) release(d *delivery) {
	w.alive.drop(d.msg)
	if len(d.attrs) > 0 {
		d.span.SetAttributes(d.attrs...)
	}
	d.span.End()
	<-d.slots
}

// encode builds the outcome message and starts its publish span; the
// caller publishes and ends the span (stageDone "publish") on the PubAck.
// An error means nothing is to be published; the span is then already
// ended when it is nil. fixed, when not nil, caches the encoding of the
// fields of the plan the outcome was finished from (events.FixedFields).
// The body is appended to dst[:0], in its array when it is large enough.
func (w *Worker) encode(ctx context.Context, id string, inc events.Incoming, out *Outcome, fixed *events.FixedFields, dst []byte) (*nats.Msg, trace.Span, time.Time, error) {
	var span trace.Span
	if w.tracing {
		ctx, span = w.tracer.Start(ctx, telemetry.SpanPublish, producerKind)
	}
	start := time.Now()

	meta := events.OutcomeMeta{
		ID: id, Source: w.cfg.FleetSource, TaskID: inc.Task.TaskID, CausationID: inc.ID,
		Time: w.opt.Now(), DataSchemaBase: w.cfg.DataSchemaBase, Fixed: fixed,
	}
	meta.TraceParent, meta.TraceState = w.traceContext(ctx)
	var (
		subject string
		h       nats.Header
		body    []byte
		err     error
	)
	if out.Resolved != nil {
		subject, h, body, err = events.AppendResolved(dst, w.cfg.Prefix, meta, out.Resolved)
		if err != nil {
			// Unencodable resolved data is a bug; report it as a typed
			// materialize failure rather than retrying forever.
			out.Failure = FailureFrom(&inc.Task.TaskID, resolve.StageMaterialize, err)
			out.Failure.Code = resolve.CodeMaterializeFailed
			out.Resolved = nil
		}
	}
	if out.Failure != nil {
		subject, h, body, err = events.AppendFailed(dst, w.cfg.Prefix, meta, out.Failure)
		if err != nil {
			err = fmt.Errorf("encode failure outcome: %w", err)
			w.stageDone(ctx, span, "publish", start, err)
			return nil, nil, start, err
		}
	}
	if span != nil && span.IsRecording() {
		typ := events.TypeSpecFailed
		if out.Resolved != nil {
			typ = events.TypeSpecResolved
		}
		span.SetAttributes(telemetry.MessagingSystemNATS, attribute.String(telemetry.AttrMessagingDestination, subject),
			attribute.String(telemetry.AttrEventID, id), attribute.String(telemetry.AttrEventType, typ))
	}
	// The encoder sets Nats-Msg-Id = id, which JetStream deduplicates on.
	return &nats.Msg{Subject: subject, Header: h, Data: body}, span, start, nil
}

// PublishOptions are the options the worker publishes outcomes with: no
// resend by the client when no stream answers (the client's default is two,
// a quarter of a second apart). The task is nak'ed instead and its
// redelivery publishes the outcome anew, so the client never reads an
// outcome's body after PublishMsgAsync has returned, and the worker writes
// its next outcome over it at once. The bench's bare loop publishes with
// them too.
func PublishOptions() []jetstream.PublishOpt { return slices.Clone(publishOpts) }

var publishOpts = []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)}

// Span kinds as start options made once: building one per span allocates.
var (
	consumerKind = trace.WithSpanKind(trace.SpanKindConsumer)
	producerKind = trace.WithSpanKind(trace.SpanKindProducer)
)

// maxKeptBody keeps a rare huge outcome from pinning its buffer: each
// processing goroutine writes its outcomes (several kilobytes, the prompt
// appears twice) into one buffer of its own, as allocating one per task
// showed as about a tenth of the worker's CPU in `worker bench`.
const maxKeptBody = 256 << 10

// traceContext is the W3C context the outcome carries: the publish span's
// (its parent's when tracing is off, as the no-op tracer passes that on).
func (w *Worker) traceContext(ctx context.Context) (traceparent, tracestate string) {
	return telemetry.InjectValues(ctx, w.opt.Propagator)
}

// publish encodes the outcome and waits for its PubAck (the dead-letter
// path, where a message a day does not need the task loop's pipelining).
func (w *Worker) publish(ctx context.Context, id string, inc events.Incoming, out *Outcome) (*jetstream.PubAck, error) {
	m, span, start, err := w.encode(ctx, id, inc, out, nil, nil)
	if err != nil {
		return nil, err
	}
	if span != nil {
		ctx = trace.ContextWithSpan(ctx, span)
	}
	ack, err := w.js.PublishMsg(ctx, m)
	if err != nil {
		err = fmt.Errorf("publish outcome: %w", err)
	}
	w.stageDone(ctx, span, "publish", start, err)
	if err != nil {
		return nil, err
	}
	return ack, nil
}

// deliveryCount is msg's delivery number from its reply subject (1 when
// it cannot be read). Only naks and their logs need it, so it is parsed
// then and not for every task.
func deliveryCount(msg jetstream.Msg) uint64 {
	if md, _ := msg.Metadata(); md != nil {
		return md.NumDelivered
	}
	return 1
}

// nak asks for a redelivery after the backoff for delivery number n.
func (w *Worker) nak(ctx context.Context, msg jetstream.Msg, taskID string, n uint64) {
	if err := msg.NakWithDelay(w.cfg.backoff(int(n))); err != nil {
		w.log.WarnContext(ctx, "nak failed; the task will be redelivered after ack_wait", "task_id", taskID, "error", err)
	}
}

// ackCheck is how often the completion goroutine looks at the PubAck
// deadline of the task it waits for: a tenth of ack_wait, at most a
// second.
func (w *Worker) ackCheck() time.Duration {
	return max(min(w.cfg.AckWait/10, time.Second), time.Millisecond)
}

// stageObserver is a task's Observer of Handle: a span (when tracing) and
// a duration for each stage.
type stageObserver struct {
	w     *Worker
	ctx   context.Context
	start time.Time
	span  trace.Span
}

func (o *stageObserver) StageStart(stage resolve.Stage) {
	o.start, o.span = time.Now(), nil
	if o.w.tracing {
		_, o.span = o.w.tracer.Start(o.ctx, spanName(stage))
	}
}

func (o *stageObserver) StageEnd(stage resolve.Stage, err error) {
	o.w.stageDone(o.ctx, o.span, stage, o.start, err)
}

// stageDone ends a stage that began at start. Stage times come from the
// monotonic clock, not Options.Now, which only stamps outcomes.
func (w *Worker) stageDone(ctx context.Context, span trace.Span, stage resolve.Stage, start time.Time, err error) {
	w.stageEnd(ctx, span, stage, time.Since(start), err)
}

// stageEnd ends a stage span (with its failure code, if any) and records
// the stage's duration d.
// A nil span (tracing off) records only the duration.
func (w *Worker) stageEnd(ctx context.Context, span trace.Span, stage resolve.Stage, d time.Duration, err error, end ...trace.SpanEndOption) {
	if span != nil {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
			if c := errorCode(err); c != "" {
				span.SetAttributes(attribute.String(telemetry.AttrErrorCode, string(c)))
			}
		}
		span.End(end...)
	}
	if in := w.opt.Instruments; in != nil {
		in.StageDone(ctx, string(stage), d)
	}
}

// maxProcAttrs is the most attributes the process span gets: taskAttrs'
// five, the snapshot digest, role, pack, the inputs digest or error code,
// and the outcome (a retry after finish began adds one more at most).
const maxProcAttrs = 11

// taskAttrs are the process span's attributes known when it starts. A value
// the message did not carry is left out rather than recorded as "".
func taskAttrs(a []attribute.KeyValue, subject string, inc *events.Incoming) []attribute.KeyValue {
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
func extensionContext(ev *event.Event) (traceparent, tracestate string) {
	// The v1 context's own map is read in place: Event.Extensions copies it.
	var ext map[string]any
	if c, ok := ev.Context.(*event.EventContextV1); ok {
		ext = c.Extensions
	} else {
		ext = ev.Extensions()
	}
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
		ceParent, ceState := extensionContext(&inc.Event)
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

// tooLarge reports whether m cannot be published on nc at all. Header
// bytes are estimated generously; the server enforces the exact limit.
func tooLarge(nc *nats.Conn, m *nats.Msg) bool {
	if nc == nil {
		return false
	}
	size := len(m.Data) + len(m.Subject)
	for k, vs := range m.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	return int64(size)+64 > nc.MaxPayload()
}
