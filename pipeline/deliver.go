package pipeline

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
	"github.com/rolecall/rolecall/telemetry"
)

// delivery is one task message, owned by one goroutine from fetch to
// settle (Worker.run).
type delivery struct {
	msg   jetstream.Msg
	start time.Time
	// seq is the task's sequence in the tasks stream, n its delivery
	// number (0 when the message's metadata cannot be read).
	seq, n uint64
	// deadLetter marks the dead-letter path's delivery_exhausted outcome,
	// which the test hooks leave alone.
	deadLetter bool
	// inc is the decoded event; decodeErr is why it could not be decoded
	// (inc still holds what could be read). decodeEnd closes the decode
	// stage, for its span.
	inc       events.Incoming
	decodeErr error
	decodeEnd time.Time
	// id is the outcome id: of the event's (source, id), or of its stream
	// sequence when those cannot be read.
	id  string
	out Outcome
	// subject is the published outcome's subject.
	subject string
	// retryUntil ends the delivery's retrying in place (Worker.retry):
	// zero until its first transient fault.
	retryUntil time.Time
	// acked is set once the message was acked: a panic after it (the
	// allocator's) gives nothing back.
	acked bool
	// How the delivery ended, for telemetry: ended is one of the end*
	// values, code the failure code, err the last transient fault.
	ended string
	code  resolve.Code
	err   error
}

// How a delivery can end.
const (
	endResolved  = telemetry.OutcomeResolved  // a resolved outcome was stored, the task acked
	endFailed    = telemetry.OutcomeFailed    // a failure outcome was stored, the task acked
	endDuplicate = telemetry.OutcomeDuplicate // the event already had an outcome; acked, nothing published
	endRetry     = telemetry.OutcomeRetry     // a transient fault outlasted RetryFor; nak'ed, no outcome yet
	endAbandoned = "abandoned"                // a test hook dropped the delivery
)

// run owns one delivery from fetch to settle: decode → look up → handle →
// encode → publish → record → ack. Its deferred calls are the only place
// the delivery is released (keep-alive, telemetry), however it ends, and
// the one recover (settlePanic) covers all of it, decoding included.
func (w *Worker) run(ctx context.Context, msg jetstream.Msg) {
	d := &delivery{msg: msg, start: time.Now()}
	// consume holds msg from the moment it was fetched; this is the one
	// release.
	defer w.alive.drop(msg)
	// The closures read ctx when they run: begin's, once it has returned.
	defer func() { w.obs.end(ctx, d) }()
	defer func() { w.settlePanic(ctx, d, recover()) }()
	if md, _ := msg.Metadata(); md != nil {
		d.seq, d.n = md.Sequence.Stream, md.NumDelivered
	}
	d.inc, d.decodeErr = events.DecodeTask(msg.Headers(), msg.Data(), events.DecodeOptions{MaxDataBytes: w.cfg.MaxDataBytes})
	d.decodeEnd = time.Now()
	ctx = w.obs.begin(ctx, d)
	w.deliver(ctx, d)
}

// settlePanic is deferred by run and deadLetter, with what recover
// returned. A panic is a bug, but it must not crash the worker or lose the
// task: the message is nak'ed, and another delivery (or the dead-letter
// path) produces the outcome. After the ack there is nothing to give
// back: the outcome is stored, and the delivery ended as it was counted
// (run calls only the allocator then).
func (w *Worker) settlePanic(ctx context.Context, d *delivery, r any) {
	if r == nil {
		return
	}
	attrs := append(d.logAttrs(), "error", fmt.Sprintf("panic: %v", r), "stack", string(debug.Stack()))
	switch {
	case d.acked && d.deadLetter:
		w.log.ErrorContext(ctx, "panic after the dead-letter advisory was acked", attrs...)
	case d.acked:
		w.log.ErrorContext(ctx, "allocator failed after resolution was published; the task is acked", attrs...)
	default:
		w.log.ErrorContext(ctx, "panic while processing task", attrs...)
		d.err = fmt.Errorf("panic: %v", r)
		w.nak(ctx, d)
	}
}

func (w *Worker) deliver(ctx context.Context, d *delivery) {
	d.id = w.outcomeID(d)
	if w.outcomes != nil {
		var rec Record
		err := w.retry(ctx, d, "look-up", nil, func(ctx context.Context) (err error) {
			rec, err = lookup(ctx, w.outcomes, d.id)
			if errors.Is(err, ErrOutcomeNotFound) {
				return nil
			}
			return err
		})
		switch {
		case err != nil:
			d.err = err
			w.nak(ctx, d)
			return
		case rec.Seq != 0:
			w.log.InfoContext(ctx, "duplicate task event: it already has an outcome; acked without another", append(d.logAttrs(), "outcome_seq", rec.Seq, "outcome_subject", rec.Subject)...)
			d.ended = endDuplicate
			w.ack(ctx, d)
			return
		}
		if w.abandon(StepLookup, d) {
			return
		}
	}

	if d.decodeErr != nil {
		d.out = DecodeFailed(w.src.Snapshot(), &d.inc.Task.TaskID, d.decodeErr)
	} else {
		d.out = Handle(w.src.Snapshot(), d.inc.Task, d.inc.Ref, w.obs.stages(ctx))
	}

	ack, err := w.publish(ctx, d)
	if err != nil {
		d.err = err
		w.nak(ctx, d)
		return
	}
	if h := w.opt.Hooks.AfterPublish; h != nil {
		h(&d.out, ack)
	}
	if w.abandon(StepPublish, d) {
		return
	}
	if w.outcomes != nil {
		rec := w.stored(d, ack)
		err := w.retry(ctx, d, "record", nil, func(ctx context.Context) error { return record(ctx, w.outcomes, d.id, rec) })
		if err != nil {
			d.err = err
			w.nak(ctx, d)
			return
		}
	}
	if w.abandon(StepRecord, d) {
		return
	}
	d.ended, d.code = endResolved, d.out.Code()
	if d.out.Failure != nil {
		d.ended = endFailed
	}
	w.ack(ctx, d)
	if d.out.Resolved != nil && w.opt.Allocator != nil {
		// The outcome is the delivery's own (Resolve shares nothing with
		// the snapshot) and it is published: the allocator may keep it.
		if err := w.opt.Allocator.Allocate(ctx, d.out.Resolved); err != nil {
			w.log.ErrorContext(ctx, "allocator failed after resolution was published", append(d.logAttrs(), "error", err)...)
		}
	}
}

// outcomeID names the outcome of d's event. Only an event without a
// usable source or id needs its stream sequence, read then.
func (w *Worker) outcomeID(d *delivery) string {
	if d.inc.Source != "" && d.inc.ID != "" {
		return events.OutcomeID(d.inc.Source, d.inc.ID)
	}
	return events.OutcomeIDForSequence(w.cfg.TasksStream, d.seq)
}

// publish encodes the outcome and stores it in the specs stream, retrying
// transient faults in place, inside the publish span. An outcome the
// server can never take is made smaller (shrink) until it can be: a
// resolved one becomes the typed failure outcome_too_large.
func (w *Worker) publish(ctx context.Context, d *delivery) (ack *jetstream.PubAck, err error) {
	err = w.obs.publish(ctx, d, func(ctx context.Context) error {
		for {
			m, err := w.encode(ctx, d)
			if err != nil {
				return err
			}
			d.subject = m.Subject
			ack, err = w.store(ctx, d, m)
			if !isTooLarge(err) {
				return err
			}
			// The specs stream's own limit (max_msg_size) is below the
			// connection's.
			smaller, ok := shrink(d.out, d.inc.Task, len(m.Data), -1)
			if !ok {
				return err
			}
			d.out = smaller
		}
	})
	return ack, err
}

// store publishes m, retrying in place.
func (w *Worker) store(ctx context.Context, d *delivery, m *nats.Msg) (ack *jetstream.PubAck, err error) {
	var before func() error
	if h := w.opt.Hooks.BeforePublish; h != nil && !d.deadLetter {
		before = func() error { return h(ctx, &d.out, d.n) }
	}
	err = w.retry(ctx, d, "publish", before, func(ctx context.Context) (err error) {
		ack, err = w.js.PublishMsg(ctx, m, publishOpts...)
		return err
	})
	return ack, err
}

// TooLarge is the typed failure that replaces a resolved outcome of size
// bytes the server cannot store: materialize_failed with details reason
// outcome_too_large, over limit (the max payload; -1: the specs stream's
// max_msg_size). Its decision record holds task with the extra prompt
// replaced by its digest. The worker and a preview of its outcome (the
// micro service) both use it, so they cannot differ.
func TooLarge(out Outcome, task events.Task, size int, limit int64) Outcome {
	details := map[string]any{"reason": "outcome_too_large", "bytes": size}
	msg := fmt.Sprintf("the resolved outcome is %d bytes, over the specs stream's maximum message size", size)
	if limit >= 0 {
		details["max_payload"] = limit
		msg = fmt.Sprintf("the resolved outcome is %d bytes, over the server's max payload of %d", size, limit)
	}
	return Outcome{Role: out.Role, Pack: out.Pack, SnapshotDigest: out.SnapshotDigest, Failure: &events.FailureData{
		TaskID: nonEmpty(&task.TaskID), Stage: resolve.StageMaterialize, Code: resolve.CodeMaterializeFailed,
		Details: details, Message: msg, Decision: withoutExtraPrompt(out.Decision(), task),
	}}
}

// shrink is the smaller form of an outcome of size bytes that is over
// limit (as TooLarge), and false when there is none: a resolved outcome
// becomes TooLarge; a failure keeps its code, and its decision record
// drops the task (null), the one part of a failure as large as its task.
// The task event still holds it.
func shrink(out Outcome, task events.Task, size int, limit int64) (Outcome, bool) {
	if out.Resolved != nil {
		return TooLarge(out, task, size, limit), true
	}
	if out.Failure.Decision == nil || string(out.Failure.Decision.Task) == "null" {
		return out, false
	}
	f, dec := *out.Failure, *out.Failure.Decision
	dec.Task = jsontext.Value("null")
	f.Decision = &dec
	out.Failure = &f
	return out, true
}

// DecodeFailed is the outcome of a task event that could not be decoded
// (taskID as far as it was read): the failure, with a decision record that
// holds no task and no inputs.
func DecodeFailed(snap *discover.Snapshot, taskID *string, err error) Outcome {
	// No SnapshotDigest: nothing of the configuration decided it (and the
	// span of the delivery names no snapshot).
	out := Outcome{Failure: FailureFrom(taskID, resolve.StageDecode, err)}
	out.Failure.Decision = NewDecision(snap, nil, nil, nil)
	return out
}

// jsErrMessageTooLarge is JetStream's "message size exceeds maximum
// allowed" (a stream's max_msg_size).
const jsErrMessageTooLarge jetstream.ErrorCode = 10054

func isTooLarge(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsErrMessageTooLarge || errors.Is(err, nats.ErrMaxPayload)
}

// encode builds the outcome message (EncodeOutcome, up to the
// connection's max payload). The trace context it carries is the publish
// span's, so ctx must hold it when tracing (see observer.publish).
func (w *Worker) encode(ctx context.Context, d *delivery) (*nats.Msg, error) {
	meta := events.OutcomeMeta{
		ID: d.id, Source: w.cfg.FleetSource, TaskID: d.inc.Task.TaskID, CausationID: d.inc.ID,
		Time: w.opt.Now(), DataSchemaBase: w.cfg.DataSchemaBase, WorkerVersion: w.opt.Version,
	}
	meta.TraceParent, meta.TraceState = w.obs.traceContext(ctx)
	var limit int64
	if nc := w.js.Conn(); nc != nil {
		limit = nc.MaxPayload()
	}
	m, err := EncodeOutcome(w.cfg, meta, d.inc.Task, &d.out, limit)
	if err != nil {
		return nil, err
	}
	if dec := d.out.Decision(); dec != nil && dec.Config.Revision != nil {
		m.Header.Set(HeaderConfigRevision, strconv.FormatUint(*dec.Config.Revision, 10))
	}
	return m, nil
}

// EncodeOutcome encodes out as the worker publishes it and leaves in out
// what was encoded: resolved data that cannot be encoded (a bug) becomes
// a materialize_failed failure rather than a retry forever, and an
// outcome whose message would exceed maxPayload (0: no limit) is shrunk:
// a resolved one becomes TooLarge, a failure loses its record's task. The
// worker and the micro service's preview both encode through it, so a
// preview cannot differ from the outcome. The encoder sets Nats-Msg-Id to
// meta.ID, which JetStream deduplicates on.
func EncodeOutcome(cfg Config, meta events.OutcomeMeta, task events.Task, out *Outcome, maxPayload int64) (*nats.Msg, error) {
	for {
		m, err := encodeOutcome(cfg, meta, task, out)
		if err != nil || maxPayload <= 0 || messageSize(m.Subject, m.Header, m.Data)+64 <= maxPayload {
			return m, err
		}
		smaller, ok := shrink(*out, task, len(m.Data), maxPayload)
		if !ok {
			return m, nil
		}
		*out = smaller
	}
}

// encodeOutcome is EncodeOutcome without the size limit.
func encodeOutcome(cfg Config, meta events.OutcomeMeta, task events.Task, out *Outcome) (*nats.Msg, error) {
	if out.Resolved != nil {
		subject, h, body, err := events.EncodeResolved(cfg.Prefix, meta, out.Resolved)
		if err == nil {
			return &nats.Msg{Subject: subject, Header: h, Data: body}, nil
		}
		dec := out.Resolved.Decision
		out.Failure = FailureFrom(&task.TaskID, resolve.StageMaterialize, err)
		out.Failure.Code = resolve.CodeMaterializeFailed
		out.Failure.Decision = dec
		out.Resolved = nil
	}
	subject, h, body, err := events.EncodeFailed(cfg.Prefix, meta, out.Failure)
	if err != nil {
		return nil, fmt.Errorf("encode failure outcome: %w", err)
	}
	return &nats.Msg{Subject: subject, Header: h, Data: body}, nil
}

// messageSize estimates a message's size, header bytes generously; the
// server enforces the exact limit.
func messageSize(subject string, h nats.Header, body []byte) int64 {
	size := len(body) + len(subject)
	for k, vs := range h {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	return int64(size)
}

// stored is the record of the outcome ack acknowledges. A duplicate
// PubAck names the first outcome's sequence, whose subject may differ from
// this delivery's (an earlier delivery may have decided under another
// configuration), so the record then holds the sequence alone: it is the
// authority, and a worker needs no right to read outcomes.
func (w *Worker) stored(d *delivery, ack *jetstream.PubAck) Record {
	if ack.Duplicate {
		return Record{Seq: ack.Sequence}
	}
	return Record{Seq: ack.Sequence, Subject: d.subject}
}

// PublishOptions are the options outcomes are published with: the
// worker's own retry (Worker.retry) is the only one, so the client is
// asked for none. The bench's bare loop publishes with them too.
func PublishOptions() []jetstream.PublishOpt {
	return []jetstream.PublishOpt{jetstream.WithRetryAttempts(0)}
}

var publishOpts = PublishOptions()

// abandon runs the Abandon hook after step.
func (w *Worker) abandon(step Step, d *delivery) bool {
	if h := w.opt.Hooks.Abandon; h != nil && h(step, &d.out) {
		d.ended = endAbandoned
		return true
	}
	return false
}

// ack settles a delivery that has its outcome. A lost ack only means a
// redelivery, which finds the outcome (the store, or the duplicate window).
func (w *Worker) ack(ctx context.Context, d *delivery) {
	d.acked = true
	if err := d.msg.Ack(); err != nil {
		w.log.WarnContext(ctx, "ack failed; the task will be redelivered and find its outcome", append(d.logAttrs(), "error", err)...)
	}
}

// nak gives the task back for a redelivery after the backoff of its
// delivery number; it has no outcome yet.
func (w *Worker) nak(ctx context.Context, d *delivery) {
	d.ended = endRetry
	if err := d.msg.NakWithDelay(w.cfg.backoff(int(max(d.n, 1)))); err != nil {
		w.log.WarnContext(ctx, "nak failed; the task will be redelivered after ack_wait", append(d.logAttrs(), "error", err)...)
	}
	w.log.WarnContext(ctx, "transient fault; task will be redelivered", append(d.logAttrs(), "delivery", d.n, "error", d.err)...)
}

// logAttrs name the delivery in every log line about it, with whatever
// is known of it.
func (d *delivery) logAttrs() []any {
	a := make([]any, 0, 10)
	for _, kv := range [...][2]string{
		{"task_id", d.inc.Task.TaskID}, {"event_id", d.inc.ID}, {"event_source", d.inc.Source}, {"outcome_id", d.id},
	} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	if d.seq != 0 {
		a = append(a, "stream_seq", d.seq)
	}
	return a
}
