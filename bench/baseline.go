package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
)

// outcomeTemplate is the outcome the baseline publishes for one kind: the
// subject, headers and body the real pipeline produces for that kind's
// first task, so the broker carries the same bytes in both loops.
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
		o := pipeline.Handle(snap, inc.Task, inc.Ref, nil)
		meta := events.OutcomeMeta{
			ID: t.outID, Source: events.DefaultSource, TaskID: inc.Task.TaskID, CausationID: inc.ID,
			TraceParent: inc.TraceParent, TraceState: inc.TraceState, Time: time.Now(),
		}
		var (
			subject string
			h       nats.Header
			body    []byte
		)
		if o.Resolved != nil {
			subject, h, body, err = events.EncodeResolved(prefix, meta, o.Resolved)
		} else {
			subject, h, body, err = events.EncodeFailed(prefix, meta, o.Failure)
		}
		if err != nil {
			return out, fmt.Errorf("bench: encode %s outcome: %w", t.kind, err)
		}
		delete(h, nats.MsgIdHdr)
		out[t.kind] = outcomeTemplate{subject: subject, header: h, body: body}
	}
	return out, nil
}

// baselineDecode reads the least a worker needs to answer a task with
// encoding/json: in binary mode the id from the ce- headers and the task
// from the body, in structured mode both from the envelope.
func baselineDecode(m jetstream.Msg) (id, source string, err error) {
	h := m.Headers()
	if id = h.Get("ce-id"); id != "" {
		var t baselineTaskData
		if err := json.Unmarshal(m.Data(), &t); err != nil {
			return "", "", fmt.Errorf("baseline: decode: %w", err)
		}
		return id, h.Get("ce-source"), nil
	}
	var t baselineTask
	if err := json.Unmarshal(m.Data(), &t); err != nil {
		return "", "", fmt.Errorf("baseline: decode: %w", err)
	}
	return t.ID, t.Source, nil
}

type baselineTaskData struct {
	TaskID string `json:"task_id"`
	Role   string `json:"role"`
}

// baselineTask is the least a worker must read from a task to answer it:
// the event id (for the outcome's message id) and the task's id and role.
type baselineTask struct {
	ID     string           `json:"id"`
	Source string           `json:"source"`
	Data   baselineTaskData `json:"data"`
}

// baselineLoop is the bare JetStream loop the pipeline is measured
// against. It has the pipeline's shape — one pull iterator with the same
// pull options (pipeline.PullOptions: batch and heartbeat) feeding
// Concurrency goroutines, at most MaxInFlight tasks held, asynchronous
// publish with the message id and the worker's publish options
// (pipeline.PublishOptions), one completion goroutine that acks each
// task on its PubAck — and does none of rolecall's work: a
// minimal encoding/json decode of the envelope, then the prepared outcome
// bytes of the task's kind.
func baselineLoop(o Options, tmpl [numKinds]outcomeTemplate) loop {
	cfg := baselineConfig(o)
	return loop{name: "baseline", cfg: cfg, start: func(js jetstream.JetStream) (func() error, error) {
		ctx, cancel := context.WithCancel(context.Background())
		cons, err := js.Consumer(ctx, cfg.TasksStream, cfg.Consumer)
		if err != nil {
			cancel()
			return nil, err
		}
		done := make(chan error, 1)
		go func() { done <- runBaseline(ctx, js, cons, cfg, tmpl) }()
		return func() error {
			cancel()
			return <-done
		}, nil
	}}
}

type baselinePending struct {
	msg jetstream.Msg
	f   jetstream.PubAckFuture
}

func runBaseline(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, cfg pipeline.Config, tmpl [numKinds]outcomeTemplate) error {
	cfg = cfg.WithDefaults()
	iter, err := cons.Messages(pipeline.PullOptions(cfg.FetchBatch)...)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, iter.Drain)
	defer stop()

	slots := make(chan struct{}, cfg.MaxInFlight)
	work := make(chan jetstream.Msg)
	pending := make(chan baselinePending, cfg.MaxInFlight)
	var workers sync.WaitGroup
	var errMu sync.Mutex
	var firstErr error
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
	}
	prefix := cfg.Prefix + ".tasks."
	pubOpts := pipeline.PublishOptions()
	for range cfg.Concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for m := range work {
				id, source, err := baselineDecode(m)
				k := kindByName(strings.TrimPrefix(m.Subject(), prefix))
				if err == nil && k < 0 {
					err = fmt.Errorf("baseline: task on unexpected subject %s", m.Subject())
				}
				if err != nil {
					fail(err)
					_ = m.Term()
					<-slots
					continue
				}
				ot := &tmpl[k]
				hdr := make(nats.Header, len(ot.header)+1)
				for key, v := range ot.header {
					hdr[key] = v
				}
				hdr[nats.MsgIdHdr] = []string{events.OutcomeID(source, id)}
				f, err := js.PublishMsgAsync(&nats.Msg{Subject: ot.subject, Header: hdr, Data: ot.body}, pubOpts...)
				if err != nil {
					_ = m.Nak()
					<-slots
					continue
				}
				pending <- baselinePending{msg: m, f: f}
			}
		}()
	}
	completed := make(chan struct{})
	go func() {
		defer close(completed)
		for p := range pending {
			select {
			case <-p.f.Ok():
				_ = p.msg.Ack()
			case <-p.f.Err():
				_ = p.msg.Nak()
			}
			<-slots
		}
	}()
	for {
		// The same wake-up as the pipeline's (see pipeline.nextWait): the
		// baseline must not be the loop that stalls.
		m, err := iter.Next(jetstream.NextMaxWait(50 * time.Millisecond))
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			break
		}
		if err != nil {
			continue
		}
		slots <- struct{}{}
		work <- m
	}
	close(work)
	workers.Wait()
	close(pending)
	<-completed
	return firstErr
}

func kindByName(s string) Kind {
	for k, n := range kindNames {
		if n == s {
			return Kind(k)
		}
	}
	return -1
}
