package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sourcegraph/conc/pool"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/telemetry"
)

// SnapshotSource yields the current configuration snapshot
// (*discover.Source implements it).
type SnapshotSource interface {
	Snapshot() *discover.Snapshot
}

// Allocator is the provider hook: it is called only after a resolved
// outcome was published and the task acknowledged, never for a failure or
// a duplicate. It gets the published data, to keep.
type Allocator interface {
	Allocate(ctx context.Context, spec *events.ResolvedData) error
}

// Step names a point of a delivery after which a test may abandon it.
type Step string

// The steps of a delivery, in order.
const (
	// StepLookup: the idempotency store was asked and had no record.
	StepLookup Step = "lookup"
	// StepPublish: the outcome is stored in the specs stream.
	StepPublish Step = "publish"
	// StepRecord: the outcome is recorded in the idempotency store (with
	// the store off, this follows StepPublish at once); the ack is next.
	StepRecord Step = "record"
)

// Hooks inject faults in tests; nil hooks do nothing.
type Hooks struct {
	// BeforePublish runs before each attempt to publish a task's outcome
	// (not the dead-letter path's), with the task's delivery number; an
	// error is a transient fault (retried in place, then nak'ed).
	BeforePublish func(ctx context.Context, o *Outcome, delivery uint64) error
	// AfterPublish sees every PubAck (Duplicate is true when JetStream
	// dropped the outcome as an earlier delivery's).
	AfterPublish func(o *Outcome, ack *jetstream.PubAck)
	// Abandon returning true after a step drops the delivery without ack
	// or nak, as a worker that crashed there would.
	Abandon func(after Step, o *Outcome) bool
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
	// Version is the worker's version, recorded in every decision
	// ("0.0.0-dev" when empty).
	Version string
}

// Worker consumes task events and publishes exactly one outcome per task
// event.
type Worker struct {
	js    jetstream.JetStream
	cfg   Config
	src   SnapshotSource
	opt   Options
	log   *slog.Logger
	obs   observer
	alive *keepAlives
	// outcomes is the idempotency store (nil when it is off).
	outcomes jetstream.KeyValue
	// stopping is closed when Run's context ends: in-flight deliveries
	// still finish, but stop retrying a broker fault.
	stopping chan struct{}

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
	w := &Worker{js: js, cfg: cfg, src: src, opt: opt, log: opt.Logger, alive: newKeepAlives(cfg.AckWait), stopping: make(chan struct{})}
	w.obs = newObserver(w)
	return w, nil
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
// finishes and settles the deliveries it holds, and returns nil. A cluster
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
	if w.cfg.Idempotent() {
		if w.outcomes, err = w.js.KeyValue(ctx, w.cfg.OutcomesBucket); err != nil {
			return fmt.Errorf("idempotency store: %w", err)
		}
	}
	dl, err := w.js.Consumer(ctx, w.cfg.DeadLetter, w.cfg.Consumer+"-deadletter")
	if err != nil {
		return fmt.Errorf("dead-letter consumer: %w", err)
	}
	unregister, err := w.obs.gauges(cons)
	if err != nil {
		return err
	}
	defer unregister()

	// In-flight work survives cancellation of ctx: drain means finishing
	// what was fetched, not abandoning it. Nor does it inherit a span ctx
	// may carry: a task's trace comes from the task alone.
	work := trace.ContextWithSpanContext(context.WithoutCancel(ctx), trace.SpanContext{})
	stopOnce := context.AfterFunc(ctx, func() { close(w.stopping) })
	defer stopOnce()
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

	var wg sync.WaitGroup
	var dlErr error
	wg.Go(func() {
		// The dead-letter stream sees a message a day: one at a time.
		dlErr = w.consume(ctx, dl, 1, 2, func(m jetstream.Msg) { w.deadLetter(work, m) })
	})
	w.setReady(true)
	err = w.consume(ctx, cons, w.cfg.Concurrency, w.cfg.FetchBatch, func(m jetstream.Msg) { w.run(work, m) })
	w.setReady(false)
	wg.Wait()
	return errors.Join(err, dlErr)
}

// consume hands each message to run in a goroutine of its own, at most n
// at once, until ctx is done; then it drains the iterator's buffer and
// waits for every delivery to be settled. A full pool stops the loop, and
// so the iterator stops asking the server for more.
//
// Draining waits for the server to confirm that nothing more is on its
// way (nats.go flushes, for up to 10 s). With the connection down nothing
// more can arrive, and what the iterator holds could not be acknowledged
// before the server is back: the iterator is stopped instead, and the
// server redelivers what it held.
func (w *Worker) consume(ctx context.Context, c jetstream.Consumer, n, batch int, run func(jetstream.Msg)) error {
	iter, err := c.Messages(PullOptions(batch)...)
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	stop := context.AfterFunc(ctx, func() {
		if w.js.Conn().IsConnected() {
			iter.Drain()
		} else {
			iter.Stop()
		}
	})
	defer stop()
	p := &puller{iter: iter, log: w.log, wait: minNextWait}
	deliveries := pool.New().WithMaxGoroutines(n)
	for {
		msg, err := p.next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			break
		}
		if err != nil {
			continue
		}
		// Kept alive from here: the pool may make it wait for a runner.
		w.alive.hold(msg, time.Now())
		deliveries.Go(func() { run(msg) })
	}
	deliveries.Wait()
	return nil
}

// A pull iterator is driven by two timers of its own, and the worker's
// waits in Next must leave both able to act.
//
//   - nats.go v1.55 re-checks whether to ask the server for more only when
//     Next runs; it skips that check while its previous pull request is
//     still being sent, and if every requested message arrives inside that
//     window no request is outstanding. Returning from Next soon after the
//     last message (minNextWait) makes the check happen again.
//   - A request that is lost — sent while the consumer has no leader, or
//     refused with a status the client does not count as an answer —
//     leaves the iterator believing a request is outstanding. Only the
//     missing-heartbeat timer recovers from that, and it lives inside one
//     Next call: it fires after 2 × pullHeartbeat of silence. So while idle
//     the wait grows to maxNextWait, longer than that.
//
// A waiting request makes the server send a heartbeat every
// pullHeartbeat, so an idle worker costs the broker two small messages a
// second per iterator.
const (
	minNextWait   = 50 * time.Millisecond
	maxNextWait   = 2 * time.Second
	pullHeartbeat = 500 * time.Millisecond
)

// PullOptions are the options a worker's pull iterator is made with: a
// batch of batch messages and the heartbeat. The bench's bare loop uses
// them too, so both loops pay for the same consumption.
func PullOptions(batch int) []jetstream.PullMessagesOpt {
	return []jetstream.PullMessagesOpt{jetstream.PullMaxMessages(batch), jetstream.PullHeartbeat(pullHeartbeat)}
}

// puller wraps a pull iterator with the waiting policy above.
type puller struct {
	iter   jetstream.MessagesContext
	log    *slog.Logger
	wait   time.Duration
	silent bool // a missing heartbeat was reported and no message came since
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
