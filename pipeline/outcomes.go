package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
)

// The idempotency store remembers, for IdempotencyHorizon, the outcome of
// every CloudEvent a worker answered: a KV bucket whose key is the outcome
// id (events.OutcomeID of the event's source and id) and whose value is
// where the outcome sits in the specs stream. A delivery looks its key up
// first and, when it is there, acks the task as a duplicate; otherwise it
// publishes the outcome (Nats-Msg-Id = the outcome id), records the key
// and acks. Nothing is pending between the steps: a worker that dies
// after the publish and before the record leaves the key absent, and the
// redelivery publishes again inside the duplicate window, which answers
// with the first outcome's sequence, and records that.

// Record is the value stored for one outcome.
type Record struct {
	// Seq is the outcome's sequence in the specs stream.
	Seq uint64 `json:"seq"`
	// Subject is the outcome's subject (it names the role or failure
	// code); empty when the recording delivery's publish came back as a
	// duplicate of an earlier one, whose subject it cannot know.
	Subject string `json:"subject,omitzero"`
}

// ErrOutcomeNotFound is returned by Outcomes when no outcome is recorded
// under an id: never answered, answered longer ago than the horizon, or
// answered by a fleet that runs without the store.
var ErrOutcomeNotFound = errors.New("pipeline: no outcome recorded under this id")

func ensureOutcomes(ctx context.Context, js jetstream.JetStream, c Config) error {
	cfg := jetstream.KeyValueConfig{
		Bucket:      c.OutcomesBucket,
		Description: "rolecall: outcome of each task event, by outcome id",
		History:     1,
		TTL:         c.IdempotencyHorizon,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	}
	if c.CreateStreams {
		if _, err := js.CreateOrUpdateKeyValue(ctx, cfg); err != nil {
			return fmt.Errorf("kv %s: %w", cfg.Bucket, err)
		}
		return nil
	}
	if _, err := js.KeyValue(ctx, cfg.Bucket); err != nil {
		return fmt.Errorf("kv %s: %w", cfg.Bucket, err)
	}
	return nil
}

// Outcomes finds the outcomes a fleet recorded in its idempotency store.
type Outcomes struct {
	kv    jetstream.KeyValue
	specs jetstream.Stream
}

// OpenOutcomes opens the store and the specs stream of c (which must
// exist: a worker creates them).
func OpenOutcomes(ctx context.Context, js jetstream.JetStream, c Config) (*Outcomes, error) {
	c = c.withDefaults()
	kv, err := js.KeyValue(ctx, c.OutcomesBucket)
	if err != nil {
		return nil, fmt.Errorf("kv %s: %w", c.OutcomesBucket, err)
	}
	specs, err := js.Stream(ctx, c.SpecsStream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", c.SpecsStream, err)
	}
	return &Outcomes{kv: kv, specs: specs}, nil
}

// Record returns what is recorded under an outcome id.
func (o *Outcomes) Record(ctx context.Context, outcomeID string) (Record, error) {
	return lookup(ctx, o.kv, outcomeID)
}

// ByID returns the outcome event recorded under an outcome id.
func (o *Outcomes) ByID(ctx context.Context, outcomeID string) (*jetstream.RawStreamMsg, error) {
	rec, err := o.Record(ctx, outcomeID)
	if err != nil {
		return nil, err
	}
	msg, err := o.specs.GetMsg(ctx, rec.Seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("%w: outcome %s was recorded at sequence %d, which the specs stream no longer holds", ErrOutcomeNotFound, outcomeID, rec.Seq)
	}
	return msg, err
}

// ByEvent returns the outcome of the task event (source, id).
func (o *Outcomes) ByEvent(ctx context.Context, source, id string) (*jetstream.RawStreamMsg, error) {
	return o.ByID(ctx, events.OutcomeID(source, id))
}

// lookup reads one record; ErrOutcomeNotFound when there is none.
func lookup(ctx context.Context, kv jetstream.KeyValue, outcomeID string) (Record, error) {
	e, err := kv.Get(ctx, outcomeID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, ErrOutcomeNotFound
	}
	if err != nil {
		return Record{}, err
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return Record{}, fmt.Errorf("pipeline: record %s is not a record: %w", outcomeID, err)
	}
	return r, nil
}

// record stores where an outcome sits.
func record(ctx context.Context, kv jetstream.KeyValue, outcomeID string, r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, outcomeID, b)
	return err
}
