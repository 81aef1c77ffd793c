package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

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
	Concurrency     int
	// MaxAckPending bounds unacknowledged tasks on the shared consumer:
	// the whole fleet's, so it is the broker's safety limit, not one
	// worker's (0 = 1000, JetStream's own default, or more when one
	// worker's window below would not fit twice).
	MaxAckPending int
	// MaxInFlight bounds the tasks one worker holds past its fetch buffer:
	// being processed, or published and waiting for the PubAck that lets
	// them be acked (0 = the larger of 256 and 16 × Concurrency).
	// Publishing is asynchronous, so this, not Concurrency, is how many
	// broker round trips overlap; `worker bench` at concurrency 4 gave
	// about 15k tasks/s with 64 or 128 and 19k with 256 or 512.
	MaxInFlight int
	// FetchBatch is how many messages the pull iterator asks for at once
	// and keeps buffered (0 = the larger of 64 and 8 × Concurrency).
	FetchBatch int
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

// DefaultConfig returns the defaults documented in docs/EVENTS.md.
func DefaultConfig() Config {
	return Config{
		Prefix:          "rolecall",
		TasksStream:     "ROLECALL_TASKS",
		SpecsStream:     "ROLECALL_SPECS",
		DeadLetter:      "ROLECALL_DEADLETTER",
		Consumer:        "rolecall-workers",
		Replicas:        1,
		MaxDeliver:      5,
		AckWait:         30 * time.Second,
		Backoff:         []time.Duration{250 * time.Millisecond, time.Second, 5 * time.Second, 15 * time.Second},
		DuplicateWindow: 10 * time.Minute,
		TasksMaxAge:     7 * 24 * time.Hour,
		Concurrency:     4 * runtime.GOMAXPROCS(0),
		CreateStreams:   true,
		FleetSource:     "rolecall",
		DataSchemaBase:  "https://rolecall.dev/schema/",
	}
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	set(&c.Prefix, d.Prefix)
	set(&c.TasksStream, d.TasksStream)
	set(&c.SpecsStream, d.SpecsStream)
	set(&c.DeadLetter, d.DeadLetter)
	set(&c.Consumer, d.Consumer)
	set(&c.FleetSource, d.FleetSource)
	set(&c.DataSchemaBase, d.DataSchemaBase)
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
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = max(256, 16*c.Concurrency)
	}
	if c.FetchBatch <= 0 {
		c.FetchBatch = max(64, 8*c.Concurrency)
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = max(1000, 2*(c.MaxInFlight+c.FetchBatch))
	}
	return c
}

// WithDefaults returns c with every zero field filled in: the
// configuration New and Ensure actually use.
func (c Config) WithDefaults() Config { return c.withDefaults() }

// RequiredDuplicateWindow is the smallest duplicate window that still
// catches a redelivered task's second outcome: every delivery may wait
// ack_wait, and every nak waits its backoff (DESIGN.md §6).
func (c Config) RequiredDuplicateWindow() time.Duration {
	c = c.withDefaults()
	total := time.Duration(c.MaxDeliver) * c.AckWait
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
	if c.CreateStreams {
		if _, err := js.CreateOrUpdateConsumer(ctx, c.DeadLetter, dl); err != nil {
			return nil, fmt.Errorf("consumer %s: %w", dl.Durable, err)
		}
		return js.CreateOrUpdateConsumer(ctx, c.TasksStream, cc)
	}
	return js.Consumer(ctx, c.TasksStream, c.Consumer)
}
