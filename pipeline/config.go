package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// Config is the runner's JetStream shape and delivery policy. Zero values
// take the defaults of DefaultConfig.
type Config struct {
	// Prefix is the subject prefix: <prefix>.tasks.>, <prefix>.specs.>.
	Prefix          string
	TasksStream     string
	SpecsStream     string
	DeadLetter      string // stream capturing max-delivery advisories
	Consumer        string
	Replicas        int
	MaxDeliver      int
	AckWait         time.Duration
	Backoff         []time.Duration
	DuplicateWindow time.Duration
	TasksMaxAge     time.Duration
	// Concurrency is how many deliveries one worker runs at once, each
	// owned by one goroutine from fetch to ack. A delivery spends most of
	// its time waiting for the broker (look-up, PubAck, record), so this
	// is far more than the CPUs: it is how many round trips overlap.
	Concurrency int
	// MaxAckPending bounds unacknowledged tasks on the shared consumer:
	// the whole fleet's, so it is the broker's safety limit, not one
	// worker's (0 = 1000, JetStream's own default, or more when one
	// worker's window below would not fit twice).
	MaxAckPending int
	// FetchBatch is how many messages the pull iterator asks for at once
	// and keeps buffered (0 = Concurrency / 2, at least 64).
	FetchBatch int
	// RetryFor is how long one delivery retries a transient broker fault
	// (a publish, look-up or record that fails or gets no answer) in place,
	// keeping its task alive, before it gives the task back with a nak
	// and so spends a delivery. It covers a leader election, so that a
	// broker that recovers within it never costs a delivery (0 = 30 s).
	RetryFor time.Duration
	// IdempotencyHorizon is how long the outcome of a CloudEvent (source,
	// id) is remembered in OutcomesBucket: the same event sent again within
	// it gets no second outcome, even after the duplicate window and a
	// configuration change (0 = DefaultIdempotencyHorizon; IdempotencyOff
	// turns the store off, leaving the duplicate window alone).
	IdempotencyHorizon time.Duration
	// OutcomesBucket is the KV bucket of the idempotency store.
	OutcomesBucket string
	// CreateStreams creates missing streams and consumers; when false the
	// worker requires them to exist.
	CreateStreams bool
	// FleetSource is the CloudEvents source of outcomes: the fleet, not the
	// instance, so a redelivery to another worker yields the same event.
	FleetSource string
	// MaxDataBytes bounds task data (0 = events.DefaultMaxDataBytes).
	MaxDataBytes int
	// DataSchemaBase prefixes the dataschema attribute of outcomes.
	DataSchemaBase string
}

// DefaultIdempotencyHorizon is how long an outcome is remembered by
// default: a day of re-sends, at about 150 bytes per task.
const DefaultIdempotencyHorizon = 24 * time.Hour

// IdempotencyOff as Config.IdempotencyHorizon turns the idempotency store
// off (rolecall.yaml and the flags write it as 0).
const IdempotencyOff time.Duration = -1

// DefaultConfig returns the defaults documented in docs/EVENTS.md.
func DefaultConfig() Config {
	return Config{
		Prefix:             "rolecall",
		TasksStream:        "ROLECALL_TASKS",
		SpecsStream:        "ROLECALL_SPECS",
		DeadLetter:         "ROLECALL_DEADLETTER",
		Consumer:           "rolecall-workers",
		Replicas:           1,
		MaxDeliver:         5,
		AckWait:            30 * time.Second,
		Backoff:            []time.Duration{250 * time.Millisecond, time.Second, 5 * time.Second, 15 * time.Second},
		DuplicateWindow:    10 * time.Minute,
		TasksMaxAge:        7 * 24 * time.Hour,
		Concurrency:        128,
		RetryFor:           30 * time.Second,
		IdempotencyHorizon: DefaultIdempotencyHorizon,
		OutcomesBucket:     "ROLECALL_OUTCOMES",
		CreateStreams:      true,
		FleetSource:        "rolecall",
		DataSchemaBase:     "https://rolecall.dev/schema/",
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Prefix = cmp.Or(c.Prefix, d.Prefix)
	c.TasksStream = cmp.Or(c.TasksStream, d.TasksStream)
	c.SpecsStream = cmp.Or(c.SpecsStream, d.SpecsStream)
	c.DeadLetter = cmp.Or(c.DeadLetter, d.DeadLetter)
	c.Consumer = cmp.Or(c.Consumer, d.Consumer)
	c.FleetSource = cmp.Or(c.FleetSource, d.FleetSource)
	c.OutcomesBucket = cmp.Or(c.OutcomesBucket, d.OutcomesBucket)
	c.DataSchemaBase = cmp.Or(c.DataSchemaBase, d.DataSchemaBase)
	if c.Replicas <= 0 {
		c.Replicas = d.Replicas
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = d.MaxDeliver
	}
	if c.AckWait <= 0 {
		c.AckWait = d.AckWait
	}
	if c.Backoff == nil {
		c.Backoff = d.Backoff
	}
	if c.DuplicateWindow <= 0 {
		c.DuplicateWindow = d.DuplicateWindow
	}
	if c.TasksMaxAge <= 0 {
		c.TasksMaxAge = d.TasksMaxAge
	}
	if c.Concurrency <= 0 {
		c.Concurrency = d.Concurrency
	}
	if c.RetryFor <= 0 {
		c.RetryFor = d.RetryFor
	}
	if c.IdempotencyHorizon == 0 {
		c.IdempotencyHorizon = d.IdempotencyHorizon
	}
	if c.FetchBatch <= 0 {
		c.FetchBatch = max(64, c.Concurrency/2)
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = max(1000, 2*(c.Concurrency+c.FetchBatch))
	}
	return c
}

// WithDefaults returns c with every zero field filled in: the
// configuration New and Ensure actually use.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// Idempotent reports whether the idempotency store is on.
func (c Config) Idempotent() bool { return c.withDefaults().IdempotencyHorizon > 0 }

// RequiredDuplicateWindow is the smallest duplicate window that still
// catches a redelivered task's second outcome: every delivery may retry in
// place for RetryFor and then wait ack_wait, and every nak waits its
// backoff (docs/EVENTS.md).
func (c Config) RequiredDuplicateWindow() time.Duration {
	c = c.withDefaults()
	total := time.Duration(c.MaxDeliver) * (c.AckWait + c.RetryFor)
	for i := 0; i < c.MaxDeliver; i++ {
		total += c.backoff(i + 1)
	}
	return total
}

// backoff is the nak delay after the n-th delivery (1-based).
func (c Config) backoff(n int) time.Duration {
	if len(c.Backoff) == 0 {
		return 0
	}
	if n-1 < len(c.Backoff) {
		return c.Backoff[max(n-1, 0)]
	}
	return c.Backoff[len(c.Backoff)-1]
}

// ErrConfig marks a configuration the worker refuses to run with.
var ErrConfig = errors.New("pipeline: invalid configuration")

// Validate checks the delivery policy; it is fast and side-effect free.
func (c Config) Validate() error {
	c = c.withDefaults()
	if need := c.RequiredDuplicateWindow(); c.DuplicateWindow <= need {
		return fmt.Errorf("%w: duplicate window %s must exceed ack_wait × max_deliver + backoff = %s, or a redelivered task could get two outcomes",
			ErrConfig, c.DuplicateWindow, need)
	}
	return nil
}

func (c Config) tasksSubjects() []string { return []string{c.Prefix + ".tasks.>"} }
func (c Config) specsSubjects() []string { return []string{c.Prefix + ".specs.>"} }
func (c Config) advisorySubject() string {
	return "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + c.TasksStream + "." + c.Consumer
}

// Ensure creates or checks the streams and the shared durable consumer.
// It refuses an existing specs stream whose duplicate window is too short.
func Ensure(ctx context.Context, js jetstream.JetStream, c Config) (jetstream.Consumer, error) {
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	streams := []jetstream.StreamConfig{
		{
			Name: c.TasksStream, Subjects: c.tasksSubjects(), Replicas: c.Replicas,
			Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy, MaxAge: c.TasksMaxAge,
			Duplicates: 2 * time.Minute,
		},
		{
			Name: c.SpecsStream, Subjects: c.specsSubjects(), Replicas: c.Replicas,
			Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
			Duplicates: c.DuplicateWindow,
		},
		{
			// Advisories are core NATS messages: a worker that is down when
			// one is sent would miss it. Capturing them in a stream makes the
			// dead-letter path as durable as the tasks themselves.
			Name: c.DeadLetter, Subjects: []string{c.advisorySubject()}, Replicas: c.Replicas,
			Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, MaxAge: c.TasksMaxAge,
		},
	}
	for _, sc := range streams {
		s, err := js.Stream(ctx, sc.Name)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound) && c.CreateStreams:
			if _, err := js.CreateStream(ctx, sc); err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return nil, fmt.Errorf("create stream %s: %w", sc.Name, err)
			}
		case err != nil:
			return nil, fmt.Errorf("stream %s: %w", sc.Name, err)
		case sc.Name == c.SpecsStream:
			if got := s.CachedInfo().Config.Duplicates; got <= c.RequiredDuplicateWindow() {
				return nil, fmt.Errorf("%w: stream %s has duplicate window %s; it must exceed %s", ErrConfig, sc.Name, got, c.RequiredDuplicateWindow())
			}
		case sc.Name == c.DeadLetter:
			// Its name is fixed, but its subject names the tasks stream and
			// the consumer: one made for others would never hold this
			// worker's advisories, and an exhausted task no outcome.
			if got := s.CachedInfo().Config.Subjects; !slices.ContainsFunc(got, func(p string) bool { return server.SubjectMatchesFilter(c.advisorySubject(), p) }) {
				return nil, fmt.Errorf("%w: stream %s captures %s, not the max-deliveries advisories of consumer %s on %s (%s)",
					ErrConfig, sc.Name, strings.Join(got, ", "), c.Consumer, c.TasksStream, c.advisorySubject())
			}
		}
	}
	cc := jetstream.ConsumerConfig{
		Durable:       c.Consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		MaxDeliver:    c.MaxDeliver,
		MaxAckPending: c.MaxAckPending,
		FilterSubject: c.Prefix + ".tasks.>",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Replicas:      c.Replicas,
	}
	dl := jetstream.ConsumerConfig{
		Durable:   c.Consumer + "-deadletter",
		AckPolicy: jetstream.AckExplicitPolicy,
		AckWait:   c.AckWait,
		Replicas:  c.Replicas,
	}
	if c.Idempotent() {
		if err := ensureOutcomes(ctx, js, c); err != nil {
			return nil, err
		}
	}
	if c.CreateStreams {
		if _, err := js.CreateOrUpdateConsumer(ctx, c.DeadLetter, dl); err != nil {
			return nil, fmt.Errorf("consumer %s: %w", dl.Durable, err)
		}
		return js.CreateOrUpdateConsumer(ctx, c.TasksStream, cc)
	}
	return js.Consumer(ctx, c.TasksStream, c.Consumer)
}
