package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

type submitCmd struct {
	natsFlags
	Wait        bool          `help:"Wait for each task's outcome event and print them in the order of the tasks (exit 1 if any is a failure)."`
	Timeout     time.Duration `help:"How long --wait waits for all the outcomes." default:"30s"`
	Binary      bool          `help:"Send in binary content mode (ce-* headers) instead of structured."`
	Source      string        `help:"CloudEvents source of the task events." default:"rolecall-cli"`
	ID          string        `help:"CloudEvents id (default: random; only with one task). Submitting the same source+id twice is one task."`
	Subject     string        `help:"Subject to publish on (default <prefix>.tasks.<role>)."`
	TraceParent string        `name:"traceparent" help:"W3C traceparent the tasks continue (00-<trace id>-<span id>-<flags>), e.g. the planner's span." env:"TRACEPARENT" placeholder:"TRACEPARENT"`
	TraceState  string        `name:"tracestate" help:"W3C tracestate that goes with --traceparent." env:"TRACESTATE"`
	Tasks       []string      `arg:"" optional:"" help:"Task JSON files, one task each; - (or none) reads stdin: one task or several, one JSON object after another (NDJSON)."`
}

// maxSubmitInput bounds what submit reads from stdin (the worker's limit
// on one task is far lower; this only keeps a stray pipe from filling
// memory).
const maxSubmitInput = 64 << 20

// submission is one task to publish and what became of it.
type submission struct {
	from string // file name, or stdin:<n>
	data []byte
	id   string
}

func (c *submitCmd) Run(ctx context.Context, g *globals) error {
	tasks, err := c.read(g.stdin)
	if err != nil {
		return err
	}
	if c.Wait && c.Timeout <= 0 {
		return usageErr("--timeout %s: --wait needs a positive timeout", c.Timeout)
	}
	if c.ID != "" && len(tasks) > 1 {
		return usageErr("--id names one event, but there are %d tasks; leave it out to give each a random id", len(tasks))
	}
	parent := ctx
	if c.TraceParent != "" {
		carrier := nats.Header{telemetry.HeaderTraceParent: {c.TraceParent}}
		if c.TraceState != "" {
			carrier[telemetry.HeaderTraceState] = []string{c.TraceState}
		}
		parent = telemetry.NewPropagator().Extract(ctx, telemetry.HeaderCarrier(carrier))
		if !trace.SpanContextFromContext(parent).IsValid() {
			return usageErr("--traceparent %q is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)", c.TraceParent)
		}
	} else if c.TraceState != "" {
		return usageErr("--tracestate needs --traceparent")
	}
	log, err := newLogger(g)
	if err != nil {
		return err
	}
	for i := range tasks {
		tasks[i].id = c.ID
		if tasks[i].id == "" {
			var b [12]byte
			_, _ = rand.Read(b[:])
			tasks[i].id = hex.EncodeToString(b[:])
		}
		// Every task is checked before the first is published: a bad one
		// must not leave those before it sent, which a second run would
		// send again under new ids.
		if _, _, err := events.EncodeTask(c.Source, tasks[i].id, tasks[i].data, "", "", c.Binary); err != nil {
			return usageErr("%s: encode task event: %v", tasks[i].from, err)
		}
		if subject := c.subject(tasks[i].data); !server.IsValidLiteralSubject(subject) || strings.ContainsAny(subject, " \t\r\n") {
			return usageErr("%s: subject %q is not a literal NATS subject (check --subject and --prefix)", tasks[i].from, subject)
		}
	}

	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "rolecall-submit", ServiceVersion: version})
	if err != nil {
		return err // Setup's errors start with "telemetry:" already
	}
	defer func() { _ = shutdownWithin(5*time.Second, tel.Shutdown) }()
	otel.SetErrorHandler(telemetry.ErrorHandler(log))

	// A reconnect may have hidden an outcome from --wait's subscription:
	// each one makes it look in the outcome store again.
	reconnected := make(chan struct{}, 1)
	nc, js, err := c.connectJS("rolecall-submit", log, nats.ReconnectHandler(func(nc *nats.Conn) {
		log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted())
		select {
		case reconnected <- struct{}{}:
		default:
		}
	}))
	if err != nil {
		return err
	}
	defer nc.Close()

	var waiter *outcomeWaiter
	if c.Wait {
		// Subscribe before publishing so no outcome can be missed; each
		// outcome id is derived from (source, id), so it is known already.
		// The client drops nothing however busy the fleet (no pending
		// limits).
		waiter = &outcomeWaiter{want: make(map[string]bool, len(tasks)), ch: make(chan *nats.Msg, len(tasks)), reconnected: reconnected}
		for _, t := range tasks {
			waiter.want[events.OutcomeID(c.Source, t.id)] = true
		}
		sub, err := nc.Subscribe(c.prefix()+".specs.>", waiter.pass)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			return err
		}
		if err := nc.Flush(); err != nil {
			return err
		}
		// A fleet without the outcome store (or with other names for it)
		// is only listened to.
		waiter.store, _ = pipeline.OpenOutcomes(ctx, js, pipeline.DefaultConfig())
	}
	for i := range tasks {
		ack, subject, err := c.publish(parent, tel, js, &tasks[i])
		if err != nil {
			return err
		}
		log.Debug("task published", "from", tasks[i].from, "stream", ack.Stream, "seq", ack.Sequence, "duplicate", ack.Duplicate)
		if !c.Wait {
			fmt.Fprintf(g.stdout, "published %s/%s to %s (stream %s, seq %d)\n", c.Source, tasks[i].id, subject, ack.Stream, ack.Sequence)
		}
	}
	if !c.Wait {
		return nil
	}
	return c.wait(ctx, g, tasks, waiter)
}

// outcomeWaiter passes on the first copy of each outcome submit --wait
// wants, whether it arrives on the subscription or is found in the
// outcome store, so its channel (one slot per task) never fills.
type outcomeWaiter struct {
	mu    sync.Mutex
	want  map[string]bool // outcome ids not passed on yet
	ch    chan *nats.Msg
	store *pipeline.Outcomes // nil: nothing to look in
	// reconnected is signalled after each reconnect (nil: never).
	reconnected <-chan struct{}
}

func (w *outcomeWaiter) pass(m *nats.Msg) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if id := m.Header.Get(nats.MsgIdHdr); w.want[id] {
		delete(w.want, id)
		w.ch <- m
	}
}

// lookUp passes on the outcomes the store already holds for the ids still
// wanted: an event submitted before gets no second outcome (the fleet
// acks the re-send as a duplicate), and an outcome published while the
// connection was reconnecting never reaches the subscription. It is
// called once the tasks are published and after each reconnect: one
// look-up per missing task each time.
func (w *outcomeWaiter) lookUp(ctx context.Context) {
	if w.store == nil {
		return
	}
	w.mu.Lock()
	ids := slices.Collect(maps.Keys(w.want))
	w.mu.Unlock()
	for _, id := range ids {
		if m, err := w.store.ByID(ctx, id); err == nil {
			w.pass(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
		}
	}
}

// read collects the tasks: each file is one task (read whole, so its
// bytes go out as they are); stdin is a stream of JSON values, one task
// each.
func (c *submitCmd) read(stdin io.Reader) ([]submission, error) {
	args := c.Tasks
	if len(args) == 0 {
		args = []string{"-"}
	}
	var out []submission
	readStdin := false
	for _, a := range args {
		if a != "-" {
			b, err := os.ReadFile(a)
			if err != nil {
				return nil, usageErr("%v", err)
			}
			out = append(out, submission{from: a, data: b})
			continue
		}
		if readStdin {
			return nil, usageErr("- (stdin) is given twice")
		}
		readStdin = true
		dec := jsontext.NewDecoder(io.LimitReader(stdin, maxSubmitInput))
		for n := 1; ; n++ {
			v, err := dec.ReadValue()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, usageErr("stdin: task %d: %v", n, err)
			}
			out = append(out, submission{from: fmt.Sprintf("stdin:%d", n), data: bytes.Clone(v)})
		}
	}
	if len(out) == 0 {
		return nil, usageErr("no task: stdin was empty")
	}
	return out, nil
}

// subject is where a task is published: --subject, else
// <prefix>.tasks.<role>.
func (c *submitCmd) subject(task []byte) string {
	if c.Subject != "" {
		return c.Subject
	}
	return c.prefix() + ".tasks." + subjectToken(task)
}

// publish sends one task inside its own producer span, a child of parent
// (--traceparent) when given. The span is the send: it ends at the
// PubAck, so --wait does not stretch it; with tracing off it is a no-op
// and the task carries parent's context, or none.
func (c *submitCmd) publish(parent context.Context, tel *telemetry.Telemetry, js jetstream.JetStream, t *submission) (*jetstream.PubAck, string, error) {
	subject := c.subject(t.data)
	ctx, span := tel.Tracer().Start(parent, "rolecall.submit",
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(telemetry.MessagingSystemNATS,
			attribute.String(telemetry.AttrMessagingDestination, subject),
			attribute.String(telemetry.AttrEventID, t.id),
			attribute.String(telemetry.AttrEventType, events.TypeTaskAssigned)))
	defer span.End()
	carrier := nats.Header{}
	tp, ts := telemetry.Inject(ctx, tel.Propagator, carrier)
	header, body, err := events.EncodeTask(c.Source, t.id, t.data, tp, ts, c.Binary)
	if err != nil {
		return nil, "", usageErr("%s: encode task event: %v", t.from, err)
	}
	maps.Copy(header, carrier)
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: header, Data: body}, jetstream.WithMsgID(c.Source+"/"+t.id))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "publish task")
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			return nil, "", fmt.Errorf("%s: publish task: %w (no stream takes %s: a worker creates the tasks stream when it starts; is one running with this subject prefix?)", t.from, err, subject)
		}
		return nil, "", fmt.Errorf("%s: publish task: %w", t.from, err)
	}
	return ack, subject, nil
}

// wait prints each task's outcome event in the order of the tasks, as
// soon as it and those before it have arrived. It exits 1 when any
// outcome is a failure, or when some have not arrived within --timeout.
// wait prints the outcomes of tasks as they come on outcomes, in the
// order of tasks, as w passes them on; it looks in the outcome store at
// once and after each reconnect.
// to find outcomes that will not come on outcomes.
func (c *submitCmd) wait(ctx context.Context, g *globals, tasks []submission, w *outcomeWaiter) error {
	index := make(map[string]int, len(tasks))
	for i, t := range tasks {
		index[events.OutcomeID(c.Source, t.id)] = i
	}
	type outcome struct {
		failed bool
		json   []byte
	}
	got := make([]*outcome, len(tasks))
	next, failed := 0, false
	missing := func() []string {
		var m []string
		for i := next; i < len(tasks); i++ {
			if got[i] == nil {
				m = append(m, tasks[i].from+" ("+c.Source+"/"+tasks[i].id+")")
			}
		}
		return m
	}
	timeout := time.After(c.Timeout)
	w.lookUp(ctx)
	for next < len(tasks) {
		select {
		case <-w.reconnected:
			w.lookUp(ctx)
		case m := <-w.ch:
			i, ok := index[m.Header.Get(nats.MsgIdHdr)]
			if !ok || got[i] != nil {
				continue
			}
			ev, b, err := outcomeJSON(m.Header, m.Data)
			if err != nil {
				return fmt.Errorf("%s: decode outcome: %w", tasks[i].from, err)
			}
			var out bytes.Buffer
			if err := json.Indent(&out, b, "", "  "); err != nil {
				return err
			}
			out.WriteByte('\n')
			got[i] = &outcome{failed: ev.Type() == events.TypeSpecFailed, json: out.Bytes()}
			for next < len(tasks) && got[next] != nil {
				if _, err := g.stdout.Write(got[next].json); err != nil {
					return err
				}
				failed = failed || got[next].failed
				next++
			}
		case <-timeout:
			missing := missing()
			return fmt.Errorf("no outcome within %s for %d of %d tasks: %s (is a worker running? worker tail shows outcomes as they arrive)",
				c.Timeout, len(missing), len(tasks), strings.Join(missing, ", "))
		case <-ctx.Done():
			missing := missing()
			return fmt.Errorf("interrupted: no outcome yet for %d of %d tasks: %s (the tasks were published; worker tail shows outcomes as they arrive)",
				len(missing), len(tasks), strings.Join(missing, ", "))
		}
	}
	if failed {
		return errTypedFailure
	}
	return nil
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
	if c.Count < 0 {
		return usageErr("--count %d: give 0 (run until interrupted) or more", c.Count)
	}
	filter := cmp.Or(c.Subject, c.prefix()+".specs.>")
	if !server.IsValidSubject(filter) || strings.ContainsAny(filter, " \t\r\n") {
		return usageErr("filter %q is not a NATS subject (check --subject and --prefix)", filter)
	}
	log, err := newLogger(g)
	if err != nil {
		return err
	}
	nc, js, err := c.connectJS("rolecall-tail", log)
	if err != nil {
		return err
	}
	defer nc.Close()
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy}
	if c.FromStart {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	st, err := js.Stream(ctx, c.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("tail: no stream %s (a worker creates it when it starts; --stream names another)", c.Stream)
	}
	if err != nil {
		return fmt.Errorf("tail %s: %w", c.Stream, err)
	}
	// A filter outside the stream's subjects would wait forever in silence
	// (a stream that sources others may hold any subject).
	if sc := st.CachedInfo().Config; len(sc.Sources) == 0 && sc.Mirror == nil && len(sc.Subjects) > 0 && !slices.ContainsFunc(sc.Subjects, func(s string) bool { return server.SubjectsCollide(filter, s) }) {
		return usageErr("--subject %s: stream %s holds only %s", filter, c.Stream, strings.Join(sc.Subjects, ", "))
	}
	cons, err := st.OrderedConsumer(ctx, cfg)
	if err != nil {
		return fmt.Errorf("tail %s: %w", c.Stream, err)
	}
	iter, err := cons.Messages()
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	// The ordered consumer recreates itself forever, also when the stream
	// is gone: a deleted stream ends tail instead.
	gone := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for wctx.Err() == nil {
			select {
			case <-wctx.Done():
			case <-time.After(2 * time.Second):
			}
			if _, err := js.Stream(wctx, c.Stream); errors.Is(err, jetstream.ErrStreamNotFound) {
				gone <- fmt.Errorf("tail: stream %s was deleted: %w", c.Stream, err)
				iter.Stop()
				return
			}
		}
	}()
	// Only printed events count towards --count.
	for n := 0; c.Count == 0 || n < c.Count; {
		m, err := iter.Next()
		if err != nil {
			select {
			case err := <-gone:
				return err
			default:
			}
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		_, b, err := outcomeJSON(m.Headers(), m.Data())
		if err != nil {
			log.Warn("undecodable message in outcome stream", "subject", m.Subject(), "error", err)
			continue
		}
		fmt.Fprintf(g.stdout, "%s\n", b)
		n++
	}
	return nil
}

// outcomeJSON decodes an outcome event and encodes it as one line of
// JSON that is safe to print on a terminal: the decoder refuses data that
// is not valid JSON (a raw escape sequence in a string, say), and C1
// controls, which JSON strings may hold raw, are escaped.
func outcomeJSON(h nats.Header, data []byte) (event.Event, []byte, error) {
	ev, err := events.DecodeOutcome(h, data)
	if err != nil {
		return ev, nil, err
	}
	b, err := ev.MarshalJSON()
	if err != nil {
		return ev, nil, err
	}
	var out bytes.Buffer
	for _, r := range string(b) {
		if r >= 0x7f && r <= 0x9f {
			fmt.Fprintf(&out, `\u%04x`, r)
		} else {
			out.WriteRune(r)
		}
	}
	return ev, out.Bytes(), nil
}
