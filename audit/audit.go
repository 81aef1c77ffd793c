package audit

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

// Defaults of the allocations stream and the audit consumer.
const (
	DefaultStream   = "ROLECALL_ALLOCATIONS"
	DefaultConsumer = "rolecall-audit"
	// MetricDrift counts differing fields, with the attribute field.
	MetricDrift = "rolecall.drift"
	// FieldUnknownDecision is the field attribute of an unknown decision.
	FieldUnknownDecision = "unknown_decision"
)

// Config names the allocations stream and the audit consumer; the specs
// stream, outcome store, prefix, fleet source, replicas and whether to
// create what is missing come from the worker's pipeline.Config.
type Config struct {
	Stream   string
	Consumer string
	// AckWait and MaxDeliver bound the consumer's redeliveries.
	AckWait    time.Duration
	MaxDeliver int
	// UnknownAfter is how many deliveries an allocation whose decision is
	// not found gets before it is drift_unknown_decision, UnknownDelay the
	// wait between them: a worker records an outcome just after
	// publishing it, so an allocator quick to act on the outcome can be
	// ahead of the record by a moment.
	UnknownAfter int
	UnknownDelay time.Duration
}

func (c Config) withDefaults() Config {
	c.Stream, c.Consumer = cmp.Or(c.Stream, DefaultStream), cmp.Or(c.Consumer, DefaultConsumer)
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 10
	}
	if c.UnknownAfter <= 0 {
		c.UnknownAfter = 3
	}
	c.UnknownAfter = min(c.UnknownAfter, c.MaxDeliver)
	if c.UnknownDelay <= 0 {
		c.UnknownDelay = time.Second
	}
	return c
}

// AllocationsSubject is <prefix>.allocations.<role token, ':' → '_'>,
// where allocators publish.
func AllocationsSubject(prefix, role string) string {
	return prefix + ".allocations." + strings.ReplaceAll(role, ":", "_")
}

// DriftSubject is <prefix>.specs.drift.<field>, or .unknown_decision.
func DriftSubject(prefix, field string) string {
	return prefix + ".specs.drift." + field
}

// Options are the auditor's collaborators.
type Options struct {
	Logger        *slog.Logger
	MeterProvider metric.MeterProvider
	// Now is the clock for drift event times (default time.Now).
	Now func() time.Time
}

// Auditor consumes allocations and publishes drift.
type Auditor struct {
	js       jetstream.JetStream
	pcfg     pipeline.Config
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	drift    metric.Int64Counter
	outcomes *pipeline.Outcomes
	cons     jetstream.Consumer
}

// New ensures the allocations stream and the shared durable consumer
// (creating them when pcfg.CreateStreams) and opens the outcome store.
// A fleet without the outcome store cannot audit: that is an error.
func New(ctx context.Context, js jetstream.JetStream, pcfg pipeline.Config, cfg Config, opt Options) (*Auditor, error) {
	pcfg, cfg = pcfg.WithDefaults(), cfg.withDefaults()
	if !pcfg.Idempotent() {
		return nil, errors.New("audit: drift needs the outcome store (idempotency_horizon > 0) to find decisions")
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.MeterProvider == nil {
		opt.MeterProvider = noop.NewMeterProvider()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	a := &Auditor{js: js, pcfg: pcfg, cfg: cfg, log: opt.Logger, now: opt.Now}
	var err error
	if a.drift, err = opt.MeterProvider.Meter(telemetry.ScopeName).Int64Counter(MetricDrift,
		metric.WithDescription("Fields an allocator did not take as decided, by field (unknown_decision for an unknown decision)."),
		metric.WithUnit("{field}")); err != nil {
		return nil, fmt.Errorf("audit: %s: %w", MetricDrift, err)
	}
	sc := jetstream.StreamConfig{
		Name: cfg.Stream, Description: "rolecall: allocations reported by allocators, for drift",
		Subjects: []string{pcfg.Prefix + ".allocations.>"}, Storage: jetstream.FileStorage, Replicas: pcfg.Replicas,
		Duplicates: pcfg.DuplicateWindow,
	}
	cc := jetstream.ConsumerConfig{
		Durable: cfg.Consumer, Description: "rolecall: the fleet's drift check",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver,
	}
	var stream jetstream.Stream
	if pcfg.CreateStreams {
		if stream, err = js.CreateOrUpdateStream(ctx, sc); err == nil {
			a.cons, err = stream.CreateOrUpdateConsumer(ctx, cc)
		}
	} else if stream, err = js.Stream(ctx, cfg.Stream); err == nil {
		a.cons, err = stream.Consumer(ctx, cfg.Consumer)
	}
	if err != nil {
		return nil, fmt.Errorf("audit: stream %s, consumer %s: %w", cfg.Stream, cfg.Consumer, err)
	}
	if a.outcomes, err = explain.Open(ctx, js, pcfg); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return a, nil
}

// Run consumes allocations until ctx ends. A broker that goes silent or
// away is waited out, not returned: the iterator pulls again on the next
// call, as the worker's own consumer does.
func (a *Auditor) Run(ctx context.Context) error {
	it, err := a.cons.Messages(jetstream.PullMaxMessages(64), jetstream.PullHeartbeat(500*time.Millisecond))
	if err != nil {
		return fmt.Errorf("audit: consume: %w", err)
	}
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	silent := false
	for {
		// A bounded wait: the iterator re-checks whether to pull only
		// inside Next, and recovers a lost pull request only there.
		msg, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
		switch {
		case err == nil:
			silent = false
			a.handle(ctx, msg)
		case ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed):
			return nil
		case errors.Is(err, nats.ErrTimeout):
		default:
			if !silent {
				a.log.WarnContext(ctx, "audit: no allocations from the consumer; asking again", "error", err)
			}
			silent = true
		}
	}
}

// handle settles one allocation: compare, publish at most one drift
// event, then ack. A broker fault naks for a redelivery.
func (a *Auditor) handle(ctx context.Context, msg jetstream.Msg) {
	ev, err := DecodeAllocated(msg.Headers(), msg.Data())
	if err != nil {
		a.log.WarnContext(ctx, "audit: an allocation that does not decode is dropped", "subject", msg.Subject(), "error", err)
		_ = msg.Term()
		return
	}
	attrs := []any{"allocation_id", ev.ID, "allocation_source", ev.Source, "decision_id", ev.Data.DecisionID}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	so, err := explain.Lookup(lctx, a.outcomes, ev.Data.DecisionID)
	cancel()
	var d *Drift
	var xe *explain.Error
	switch {
	case err == nil:
		d = Compare(ev, so)
	case errors.As(err, &xe) && xe.Code == explain.CodeOutcomeNotFound:
		if md, _ := msg.Metadata(); md != nil && md.NumDelivered < uint64(a.cfg.UnknownAfter) {
			_ = msg.NakWithDelay(a.cfg.UnknownDelay)
			return
		}
		code := CodeUnknownDecision
		d = &Drift{DecisionID: ev.Data.DecisionID, AllocationID: ev.ID, Fields: []Field{}, Code: &code}
	case errors.As(err, &xe) && xe.Code == explain.CodeOutcomeInvalid:
		a.log.ErrorContext(ctx, "audit: the allocation's decision cannot be read; not compared", append(attrs, "error", err)...)
		_ = msg.Term()
		return
	default:
		a.log.WarnContext(ctx, "audit: decision look-up failed; the allocation will be redelivered", append(attrs, "error", err)...)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if d == nil {
		_ = msg.Ack()
		return
	}
	subject, m, err := a.encode(ev, d)
	if err != nil {
		a.log.ErrorContext(ctx, "audit: drift event does not encode", append(attrs, "error", err)...)
		_ = msg.Term()
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	ack, err := a.js.PublishMsg(pctx, m, jetstream.WithMsgID(m.Header.Get(events.HeaderMsgID)))
	cancel()
	if err != nil {
		a.log.WarnContext(ctx, "audit: drift publish failed; the allocation will be redelivered", append(attrs, "error", err)...)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if !ack.Duplicate {
		for _, f := range d.Fields {
			a.drift.Add(ctx, 1, metric.WithAttributes(attribute.String("field", f.Field)))
		}
		if d.Code != nil { // an unknown decision has no fields
			a.drift.Add(ctx, 1, metric.WithAttributes(attribute.String("field", FieldUnknownDecision)))
		}
		a.log.InfoContext(ctx, "audit: drift", append(attrs, "subject", subject)...)
	}
	_ = msg.Ack()
}

// Drift is the data of a drift event.
type Drift struct {
	DecisionID   string  `json:"decision_id"`
	AllocationID string  `json:"allocation_id"`
	Fields       []Field `json:"fields"`
	// Code is drift_unknown_decision, or null when fields differ.
	Code *string `json:"code"`
}

// Field is one field an allocation did not take as decided.
type Field struct {
	Field     string  `json:"field"`
	Decided   *string `json:"decided"`
	Allocated string  `json:"allocated"`
}

// Compare is the drift of one allocation from its decision, nil when
// every reported value is the decided one. Fields are model, then
// effort; a value the allocator did not report is not compared. A
// failed decision decided no value, so every reported value differs.
func Compare(ev AllocatedEvent, so *explain.StoredOutcome) *Drift {
	var model, effort *string
	if r := so.Resolved; r != nil {
		m := r.Model
		model, effort = &m, r.Effort
	}
	fields := []Field{}
	for _, f := range []struct {
		name               string
		decided, allocated *string
	}{{"model", model, ev.Data.Model}, {"effort", effort, ev.Data.Effort}} {
		if f.allocated == nil || (f.decided != nil && *f.decided == *f.allocated) {
			continue
		}
		fields = append(fields, Field{Field: f.name, Decided: f.decided, Allocated: *f.allocated})
	}
	if len(fields) == 0 {
		return nil
	}
	return &Drift{DecisionID: ev.Data.DecisionID, AllocationID: ev.ID, Fields: fields}
}

// DriftID is the id of the drift event about the allocation event
// (source, id): a redelivered allocation yields the same id.
func DriftID(source, id string) string {
	sum := sha256.Sum256([]byte("drift\x00" + source + "\x00" + id))
	return "rd-" + hex.EncodeToString(sum[:16])
}

// encode builds the structured-mode drift event.
func (a *Auditor) encode(ev AllocatedEvent, d *Drift) (string, *nats.Msg, error) {
	field := FieldUnknownDecision
	if d.Code == nil {
		field = d.Fields[0].Field
	}
	id := DriftID(ev.Source, ev.ID)
	body, err := json.Marshal(struct {
		SpecVersion     string `json:"specversion"`
		ID              string `json:"id"`
		Source          string `json:"source"`
		Type            string `json:"type"`
		Subject         string `json:"subject"`
		Time            string `json:"time"`
		DataContentType string `json:"datacontenttype"`
		CausationID     string `json:"causationid"`
		Data            *Drift `json:"data"`
	}{events.SpecVersion, id, a.pcfg.FleetSource, TypeDrift, d.DecisionID, a.now().UTC().Format(time.RFC3339Nano),
		events.ContentTypeJSON, ev.ID, d}, json.Deterministic(true))
	if err != nil {
		return "", nil, err
	}
	subject := DriftSubject(a.pcfg.Prefix, field)
	h := nats.Header{events.HeaderContentType: {events.ContentTypeCloudEventsJSON}, events.HeaderMsgID: {id}}
	return subject, &nats.Msg{Subject: subject, Header: h, Data: body}, nil
}
