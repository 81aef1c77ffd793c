package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A broker request of a delivery (a look-up, a publish's PubAck, a
// record) takes milliseconds on a healthy broker. One left unanswered — a
// publish to a stream electing its leader gets no reply, not an error — is
// retried after firstOpTimeout, then after twice that, up to maxOpTimeout:
// a short first wait keeps a brief election from holding every delivery
// for seconds, the growth keeps a slow broker from being flooded.
const (
	firstOpTimeout = time.Second
	maxOpTimeout   = 5 * time.Second
)

// retry runs op, each attempt bounded by opTimeout, until it succeeds or
// fails for good, or the delivery's RetryFor has passed: a broker that is
// electing a leader or reconnecting answers again within that, and the
// task is kept alive meanwhile, so the fault costs no delivery. RetryFor
// is one budget per delivery, counted from its first fault and shared by
// its look-up, publish and record, and no attempt outlasts it: a delivery
// holds its task at most RetryFor past its first fault, as the duplicate
// window's rule assumes (RequiredDuplicateWindow). d may be nil (a budget
// of its own).
func (w *Worker) retry(ctx context.Context, d *delivery, what string, before func() error, op func(context.Context) error) error {
	until := new(time.Time)
	if d != nil {
		until = &d.retryUntil
	}
	wait, timeout := 50*time.Millisecond, firstOpTimeout
	for attempt := 1; ; attempt++ {
		began := time.Now()
		err := attemptOnce(ctx, timeout, *until, before, op)
		if err == nil || permanent(err) {
			return err
		}
		if until.IsZero() {
			*until = began.Add(w.cfg.RetryFor)
		}
		left := time.Until(*until)
		if left <= 0 {
			return fmt.Errorf("%s: %w (still failing after %d attempts, retry_for %s spent)", what, err, attempt, w.cfg.RetryFor)
		}
		if attempt == 1 {
			var attrs []any
			if d != nil {
				attrs = d.logAttrs()
			}
			w.log.WarnContext(ctx, "transient fault; retrying in place", append(attrs, "step", what, "error", err, "retry_for", w.cfg.RetryFor.String())...)
		}
		// A worker that is stopping gives the task back at once, for
		// another worker to finish, rather than hold its drain.
		select {
		case <-time.After(min(wait, left)):
		case <-w.stopping:
			return fmt.Errorf("%s: %w (the worker is stopping)", what, err)
		}
		wait, timeout = min(2*wait, 2*time.Second), min(2*timeout, maxOpTimeout)
	}
}

// attemptOnce runs before (a test hook; its time is its own) and then op
// with the attempt's timeout, cut short at until (zero: not).
func attemptOnce(ctx context.Context, timeout time.Duration, until time.Time, before func() error, op func(context.Context) error) error {
	if before != nil {
		if err := before(); err != nil {
			return err
		}
	}
	if !until.IsZero() {
		timeout = min(timeout, time.Until(until))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return op(ctx)
}

// permanent reports errors that retrying cannot cure: the server refused
// the request for what it is, not for its state.
func permanent(err error) bool {
	return isTooLarge(err) || errors.Is(err, jetstream.ErrMsgNotFound)
}
