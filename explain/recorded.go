package explain

import (
	"context"
	"errors"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/coded"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// Code is a stable code of an explain failure: what went wrong finding or
// reading a recorded outcome. Codes are public API (docs/OPERATIONS.md).
type Code string

const (
	// CodeOutcomeNotFound: no outcome is recorded under the id (never
	// answered, answered longer ago than the idempotency horizon, the
	// specs stream no longer holds the outcome's sequence, or the id is
	// not one an outcome can have).
	CodeOutcomeNotFound Code = "outcome_not_found"
	// CodeOutcomeInvalid: what is stored is not a readable outcome event
	// (or its record or decision record does not decode).
	CodeOutcomeInvalid Code = "outcome_invalid"
	// CodeDecisionMissing: the outcome carries no decision record (a
	// worker that records none wrote it), so there is no task to explain,
	// or it is delivery_exhausted: the task was never decided.
	CodeDecisionMissing Code = "decision_missing"
	// CodeTaskNotRecorded: the decision records no task, because the task
	// event could not be decoded (the outcome is event_invalid or
	// task_invalid) or the failure would have been too large to publish
	// with it, or not the task as sent (outcome_too_large: the extra
	// prompt is replaced by its digest).
	CodeTaskNotRecorded Code = "task_not_recorded"
	// CodeOutcomesUnavailable: the specs stream or the outcome store does
	// not exist (or JetStream is off).
	CodeOutcomesUnavailable Code = "outcomes_unavailable"
)

// Error is a typed explain failure (coded.Error with this package's
// codes). Match it with errors.As, or compare codes with errors.Is against
// another *Error carrying only a Code.
type Error = coded.Error[Code]

func fail(code Code, details map[string]any, format string, args ...any) *Error {
	return coded.New(code, details, format, args...)
}

// StoredOutcome is an outcome event as the specs stream holds it.
type StoredOutcome struct {
	// Seq and Subject are where it is stored.
	Seq     uint64
	Subject string
	// ID is the outcome id; Type the event type; Time the event time
	// (zero when it has none); TaskID the CloudEvents subject.
	ID     string
	Type   string
	Time   time.Time
	TaskID string
	// Exactly one of Resolved and Failure is set.
	Resolved *events.ResolvedData
	Failure  *events.FailureData
	// Decision is the outcome's decision record, nil when it has none.
	Decision *events.Decision
	// Data is the event's data as stored.
	Data jsontext.Value
}

// Kind is "resolved" or "failed".
func (o *StoredOutcome) Kind() string {
	if o.Failure != nil {
		return OutcomeFailed
	}
	return OutcomeResolved
}

// ParseOutcome reads a stored outcome event (resolved or failed) and its
// decision record. An event of another type, or one that does not decode,
// is an outcome_invalid *Error.
func ParseOutcome(seq uint64, subject string, header nats.Header, body []byte) (*StoredOutcome, error) {
	where := map[string]any{"seq": seq, "subject": subject}
	ev, err := events.DecodeOutcome(header, body)
	if err != nil {
		return nil, fail(CodeOutcomeInvalid, where, "the message at sequence %d is not an outcome event: %v", seq, err)
	}
	o := &StoredOutcome{Seq: seq, Subject: subject, ID: ev.ID(), Type: ev.Type(), Time: ev.Time(), TaskID: ev.Subject(), Data: jsontext.Value(ev.DataEncoded)}
	if ev.Type() == events.TypeSpecResolved {
		o.Resolved, err = events.DecodeResolvedData(ev)
	} else {
		o.Failure, err = events.DecodeFailureData(ev)
	}
	if err != nil {
		return nil, fail(CodeOutcomeInvalid, where, "the outcome at sequence %d has unreadable data: %v", seq, err)
	}
	// The decision record is read on its own, so that outcomes written
	// before it existed (without one) still parse.
	var rec struct {
		Decision *events.Decision `json:"decision"`
	}
	if err := json.Unmarshal(o.Data, &rec); err != nil {
		return nil, fail(CodeOutcomeInvalid, where, "the outcome at sequence %d has an unreadable decision record: %v", seq, err)
	}
	o.Decision = rec.Decision
	return o, nil
}

// Open opens the outcome store and specs stream of cfg; a missing one is
// an outcomes_unavailable *Error.
func Open(ctx context.Context, js jetstream.JetStream, cfg pipeline.Config) (*pipeline.Outcomes, error) {
	o, err := pipeline.OpenOutcomes(ctx, js, cfg)
	if err != nil {
		return nil, unavailable(err)
	}
	return o, nil
}

// Lookup finds the outcome recorded under an outcome id and parses it.
// An unknown id is outcome_not_found; an unreadable record or event is
// outcome_invalid; a store or stream that is gone is
// outcomes_unavailable. Other errors (a broker that does not answer) are
// returned as they are.
func Lookup(ctx context.Context, o *pipeline.Outcomes, outcomeID string) (*StoredOutcome, error) {
	id := map[string]any{"outcome_id": outcomeID}
	rec, err := o.Record(ctx, outcomeID)
	switch {
	// An id that is no key of the store (".", "*", a space) names no
	// outcome either.
	case errors.Is(err, pipeline.ErrOutcomeNotFound) || errors.Is(err, jetstream.ErrInvalidKey):
		return nil, fail(CodeOutcomeNotFound, id, "no outcome is recorded under %s (never answered, older than the idempotency horizon, or answered by a fleet without the outcome store)", outcomeID)
	case isDecodeError(err):
		return nil, fail(CodeOutcomeInvalid, id, "the record of %s does not decode: %v", outcomeID, err)
	case err != nil:
		return nil, unavailable(err)
	}
	msg, err := o.ByID(ctx, outcomeID)
	switch {
	case errors.Is(err, pipeline.ErrOutcomeNotFound):
		id["seq"] = rec.Seq
		return nil, fail(CodeOutcomeNotFound, id, "outcome %s was recorded at sequence %d, which the specs stream no longer holds", outcomeID, rec.Seq)
	case err != nil:
		return nil, unavailable(err)
	}
	so, err := ParseOutcome(msg.Sequence, msg.Subject, msg.Header, msg.Data)
	if err != nil {
		return nil, err
	}
	if so.ID != outcomeID {
		id["seq"], id["found_id"] = msg.Sequence, so.ID
		return nil, fail(CodeOutcomeInvalid, id, "the record of %s points at sequence %d, which holds outcome %s", outcomeID, msg.Sequence, so.ID)
	}
	return so, nil
}

// LookupEvent finds the outcome of the task event (source, id).
func LookupEvent(ctx context.Context, o *pipeline.Outcomes, source, id string) (*StoredOutcome, error) {
	so, err := Lookup(ctx, o, events.OutcomeID(source, id))
	var e *Error
	if errors.As(err, &e) {
		e.Details["event_source"], e.Details["event_id"] = source, id
	}
	return so, err
}

// Stored explains the task of a recorded outcome against snap: the
// decision's task is decoded and resolved again, as the worker would now.
// The document's recorded block says whether snap is the configuration
// the decision was made with and which fields would change.
func Stored(snap *discover.Snapshot, so *StoredOutcome) (*Document, error) {
	where := map[string]any{"outcome_id": so.ID, "seq": so.Seq}
	if so.Decision == nil {
		return nil, fail(CodeDecisionMissing, where, "outcome %s carries no decision record (written by a worker that records none): there is no task to explain", so.ID)
	}
	task := so.Decision.Task
	switch f := so.Failure; {
	// Neither holds a resolver's decision to compare a run with (replay
	// skips them too).
	case f != nil && f.Code == resolve.CodeDeliveryExhausted:
		return nil, fail(CodeDecisionMissing, where, "outcome %s is delivery_exhausted: the task was never decided, so there is no decision to explain", so.ID)
	case f != nil && f.Details["reason"] == "outcome_too_large":
		return nil, fail(CodeTaskNotRecorded, where, "outcome %s is outcome_too_large: its record holds the extra prompt's digest, not the task as sent", so.ID)
	case len(task) != 0 && task.Kind() != 'n':
	case f != nil && f.Stage != resolve.StageDecode:
		// The task decoded; the failure would have been over the message
		// size limit with it, so the worker left it out.
		return nil, fail(CodeTaskNotRecorded, where, "outcome %s records no task: the outcome would have been too large to publish with it", so.ID)
	default:
		return nil, fail(CodeTaskNotRecorded, where, "outcome %s records no task: its task event could not be decoded", so.ID)
	}
	d, out := TaskData(snap, task)
	r := &Recorded{
		OutcomeID: so.ID, Seq: so.Seq, Subject: so.Subject, Outcome: so.Kind(),
		Config: so.Decision.Config, WorkerVersion: so.Decision.WorkerVersion,
		SameConfig: so.Decision.Config.Digest == snap.Digest,
	}
	if !so.Time.IsZero() {
		t := so.Time.UTC().Format(time.RFC3339Nano)
		r.Time = &t
	}
	if so.Failure != nil {
		c := string(so.Failure.Code)
		r.Code = &c
	}
	switch {
	case so.Resolved != nil && out.Resolved != nil:
		r.Changed = Changed(so.Resolved, out.Resolved)
	case so.Kind() != d.Outcome:
		r.Changed = []string{"outcome"}
	case so.Failure.Code != out.Failure.Code:
		r.Changed = []string{"code"}
	default:
		r.Changed = []string{}
	}
	d.Recorded = r
	return d, nil
}

// Recorded describes the recorded outcome a document explains.
type Recorded struct {
	OutcomeID string  `json:"outcome_id"`
	Seq       uint64  `json:"seq"`
	Subject   string  `json:"subject"`
	Time      *string `json:"time"`
	// Outcome is "resolved" or "failed"; Code the failure code (null when
	// resolved).
	Outcome string  `json:"outcome"`
	Code    *string `json:"code"`
	// Config and WorkerVersion are the decision record's.
	Config        events.DecisionConfig `json:"config"`
	WorkerVersion string                `json:"worker_version"`
	// SameConfig is true when the configuration explained against has the
	// recorded digest: the chain then explains the recorded decision.
	// When false it explains what would be decided now.
	SameConfig bool `json:"same_config"`
	// Changed lists what differs between the recorded outcome and this
	// run: field names in the order of the precedence table, "outcome"
	// when one resolved and the other failed, "code" when both failed
	// with different codes; [] when nothing does. With the same
	// configuration anything listed here is a determinism failure.
	Changed []string `json:"changed"`
}

// unavailable types the errors that mean the store or stream is gone.
func unavailable(err error) error {
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fail(CodeOutcomesUnavailable, nil, "%v", err)
	}
	return err
}

func isDecodeError(err error) bool {
	var se *json.SemanticError
	var sy *jsontext.SyntacticError
	return errors.As(err, &se) || errors.As(err, &sy)
}
