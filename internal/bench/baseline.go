package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sourcegraph/conc/pool"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
)

// outcomeTemplate is the outcome the bare loop publishes for one kind:
// the subject, headers and body the pipeline produces for that kind's
// first task, so the broker carries the same bytes in every loop.
type outcomeTemplate struct {
	subject string
	header  nats.Header // without Nats-Msg-Id, which is per task
	body    []byte
}

// outcomeTemplates runs the real decode → handle → encode once per kind.
func outcomeTemplates(snap *discover.Snapshot, tasks []task, prefix string) ([numKinds]outcomeTemplate, error) {
	var out [numKinds]outcomeTemplate
	var done [numKinds]bool
	for _, t := range tasks {
		if done[t.kind] {
			continue
		}
		done[t.kind] = true
		inc, err := events.DecodeTask(t.header(), t.body, events.DecodeOptions{})
		if err != nil {
			return out, fmt.Errorf("bench: %s task does not decode: %w", t.kind, err)
		}
		subject, h, body, err := encodeOutcome(prefix, t.outID, inc, pipeline.Handle(snap, inc.Task, inc.Ref, nil), time.Now())
		if err != nil {
			return out, fmt.Errorf("bench: encode %s outcome: %w", t.kind, err)
		}
		delete(h, nats.MsgIdHdr)
		out[t.kind] = outcomeTemplate{subject: subject, header: h, body: body}
	}
	return out, nil
}

// encodeOutcome encodes o as the worker does (its outcome metadata, the
// fleet's default source).
func encodeOutcome(prefix, outID string, inc events.Incoming, o pipeline.Outcome, now time.Time) (string, nats.Header, []byte, error) {
	meta := events.OutcomeMeta{
		ID: outID, Source: events.DefaultSource, TaskID: inc.Task.TaskID, CausationID: inc.ID,
		TraceParent: inc.TraceParent, TraceState: inc.TraceState, Time: now,
	}
	if o.Resolved != nil {
		return events.EncodeResolved(prefix, meta, o.Resolved)
	}
	return events.EncodeFailed(prefix, meta, o.Failure)
}

// bareTask is the least a worker reads from a task to answer it: the
// event's id and source (for the outcome's message id) and the task's id
// and role. In binary mode the id and source are headers and the body is
// the data; in structured mode all of it is in the envelope.
type bareTask struct {
	ID     string       `json:"id"`
	Source string       `json:"source"`
	Data   bareTaskData `json:"data"`
}

type bareTaskData struct {
	TaskID string `json:"task_id"`
	Role   string `json:"role"`
}

func bareDecode(m jetstream.Msg) (bareTask, error) {
	var t bareTask
	var err error
	if h := m.Headers(); h.Get("ce-id") != "" {
		t.ID, t.Source = h.Get("ce-id"), h.Get("ce-source")
		err = json.Unmarshal(m.Data(), &t.Data)
	} else {
		err = json.Unmarshal(m.Data(), &t)
	}
	if err == nil && (t.ID == "" || t.Source == "" || t.Data.TaskID == "" || t.Data.Role == "") {
		err = errors.New("missing id, source, task_id or role")
	}
	return t, err
}

// bareLoop is the loop the pipeline is measured against: the worker's
// shape with none of rolecall's work. One pull iterator with the worker's
// pull options feeds a pool of Concurrency goroutines, each owning one
// delivery: a minimal decode, the prepared outcome of the task's kind
// published with its message id and the worker's publish options, the
// PubAck waited for, the task acked. No idempotency store.
func bareLoop(cfg pipeline.Config, tmpl [numKinds]outcomeTemplate) loop {
	return loop{name: LoopBare, cfg: cfg, start: func(js jetstream.JetStream) (func() error, error) {
		ctx, cancel := context.WithCancel(context.Background())
		cons, err := js.Consumer(ctx, cfg.TasksStream, cfg.Consumer)
		if err != nil {
			cancel()
			return nil, err
		}
		iter, err := cons.Messages(pipeline.PullOptions(cfg.FetchBatch)...)
		if err != nil {
			cancel()
			return nil, err
		}
		context.AfterFunc(ctx, iter.Drain)
		done := make(chan error, 1)
		go func() { done <- runBare(js, iter, cfg, tmpl) }()
		return func() error {
			cancel()
			return <-done
		}, nil
	}}
}

func runBare(js jetstream.JetStream, iter jetstream.MessagesContext, cfg pipeline.Config, tmpl [numKinds]outcomeTemplate) error {
	deliveries := pool.New().WithErrors().WithMaxGoroutines(cfg.Concurrency)
	prefix := cfg.Prefix + ".tasks."
	pubOpts := pipeline.PublishOptions()
	for {
		m, err := iter.Next(jetstream.NextMaxWait(50 * time.Millisecond))
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			break
		}
		if err != nil {
			continue
		}
		deliveries.Go(func() error {
			t, err := bareDecode(m)
			k := slices.Index(kindNames[:], strings.TrimPrefix(m.Subject(), prefix))
			if err == nil && k < 0 {
				err = errors.New("no such kind")
			}
			if err != nil {
				_ = m.Term()
				return fmt.Errorf("bench: bare loop: task on %s: %w", m.Subject(), err)
			}
			ot := &tmpl[k]
			hdr := make(nats.Header, len(ot.header)+1)
			maps.Copy(hdr, ot.header)
			hdr[nats.MsgIdHdr] = []string{events.OutcomeID(t.Source, t.ID)}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: ot.subject, Header: hdr, Data: ot.body}, pubOpts...); err != nil {
				_ = m.Nak()
				return nil
			}
			_ = m.Ack()
			return nil
		})
	}
	return deliveries.Wait()
}
