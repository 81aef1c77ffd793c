package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
	"github.com/rolecall/rolecall/telemetry"
)

// The dead-letter path answers a task that reached max_deliver without an
// outcome. JetStream announces it with a max-deliveries advisory, which
// the stream DeadLetter captures (advisories are core NATS messages: a
// worker that is down when one is sent would otherwise miss it). The
// handler fetches the task by its stream sequence and publishes
// delivery_exhausted under the outcome id the task would have had, so an
// earlier outcome, if any, stands, and records it in the idempotency
// store like any outcome.

// maxDeliveriesAdvisory is the part of JetStream's
// io.nats.jetstream.advisory.v1.max_deliver advisory the worker needs.
type maxDeliveriesAdvisory struct {
	Type       string `json:"type"`
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

func decodeMaxDeliveriesAdvisory(data []byte) (maxDeliveriesAdvisory, error) {
	var a maxDeliveriesAdvisory
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("max-deliveries advisory: %w", err)
	}
	if a.StreamSeq == 0 {
		return a, fmt.Errorf("max-deliveries advisory without stream_seq")
	}
	return a, nil
}

// deadLetter handles one max-deliveries advisory.
func (w *Worker) deadLetter(ctx context.Context, m jetstream.Msg) {
	defer w.alive.drop(m) // consume held it
	d := &delivery{msg: m, start: time.Now(), deadLetter: true}
	defer func() { w.settlePanic(ctx, d, recover()) }()
	adv, err := decodeMaxDeliveriesAdvisory(m.Data())
	if err != nil {
		// Not an advisory we understand: nothing to publish for it.
		w.log.ErrorContext(ctx, "unreadable dead-letter advisory; terminating it", "error", err)
		_ = m.Term()
		return
	}
	d.seq = adv.StreamSeq
	var raw *jetstream.RawStreamMsg
	stream, err := w.js.Stream(ctx, w.cfg.TasksStream)
	if err == nil {
		raw, err = stream.GetMsg(ctx, adv.StreamSeq)
	}
	fetched := err == nil
	var decodeErr error
	if fetched {
		d.inc, decodeErr = events.DecodeTask(raw.Header, raw.Data, events.DecodeOptions{MaxDataBytes: w.cfg.MaxDataBytes})
		// The outcome joins the task's trace, beside its failed deliveries.
		ceParent, ceState := extensionContext(&d.inc.Event)
		ctx = telemetry.ExtractTask(ctx, w.opt.Propagator, raw.Header, ceParent, ceState)
	} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
		w.log.WarnContext(ctx, "dead-letter fetch failed; retrying", "stream_seq", adv.StreamSeq, "error", err)
		_ = m.NakWithDelay(time.Second)
		return
	}
	d.id = events.OutcomeIDForSequence(w.cfg.TasksStream, adv.StreamSeq)
	if d.inc.Source != "" && d.inc.ID != "" {
		d.id = events.OutcomeID(d.inc.Source, d.inc.ID)
	}
	attrs := d.logAttrs()
	if w.outcomes != nil {
		if _, err := lookup(ctx, w.outcomes, d.id); err == nil {
			// The task got its outcome after all (its last delivery's
			// record landed after the advisory was sent).
			w.log.InfoContext(ctx, "dead-letter advisory for a task that has its outcome; nothing to publish", attrs...)
			_ = m.Ack()
			return
		} else if !errors.Is(err, ErrOutcomeNotFound) {
			w.log.WarnContext(ctx, "dead-letter look-up failed; retrying", append(attrs, "error", err)...)
			_ = m.NakWithDelay(time.Second)
			return
		}
	}
	msg := fmt.Sprintf("task reached max_deliver (%d deliveries) without an outcome", adv.Deliveries)
	if !fetched {
		msg += "; the task message is no longer in the stream"
	}
	d.out = Outcome{Failure: &events.FailureData{
		TaskID:  nonEmpty(&d.inc.Task.TaskID),
		Stage:   resolve.StageDeliver,
		Code:    resolve.CodeDeliveryExhausted,
		Details: map[string]any{"stream": w.cfg.TasksStream, "stream_seq": adv.StreamSeq, "deliveries": adv.Deliveries},
		Message: msg,
	}}
	// The record names the task as decoded, when it can be, and the
	// configuration live now; nothing of it was read, so no inputs.
	var task *events.Task
	if fetched && decodeErr == nil {
		task = &d.inc.Task
	}
	d.out.Failure.Decision = NewDecision(w.src.Snapshot(), task, nil, nil)
	ack, err := w.publish(ctx, d)
	if err == nil && w.outcomes != nil {
		rec := w.stored(d, ack)
		err = w.retry(ctx, d, "record", nil, func(ctx context.Context) error { return record(ctx, w.outcomes, d.id, rec) })
	}
	if err != nil {
		w.log.WarnContext(ctx, "dead-letter publish failed; retrying", append(attrs, "error", err)...)
		_ = m.NakWithDelay(time.Second)
		return
	}
	d.acked = true
	if err := m.Ack(); err != nil {
		w.log.WarnContext(ctx, "dead-letter ack failed", append(attrs, "error", err)...)
	}
	if in := w.opt.Instruments; in != nil {
		in.TaskDone(ctx, endFailed, string(resolve.CodeDeliveryExhausted))
	}
	w.log.WarnContext(ctx, "delivery exhausted", attrs...)
}
