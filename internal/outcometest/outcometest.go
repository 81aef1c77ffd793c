package outcometest

import (
	"context"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
)

// Outcome describes one outcome to store.
type Outcome struct {
	// Source and ID are the task event's; the outcome id derives from them.
	Source, ID string
	// Task is the task data.
	Task string
	// Time is the event time (zero: none).
	Time time.Time
	// NoDecision leaves the decision record out, as a worker that records
	// none writes outcomes.
	NoDecision bool
	// Digest, when set, replaces the snapshot digest in the decision
	// record: a decision made with another configuration.
	Digest string
	// Body, when set, is stored as the message instead of an encoded
	// outcome (a corrupted outcome).
	Body []byte
}

// Store decides o.Task against snap, stores the outcome in the specs
// stream of cfg (which must exist) and records it in the outcome store.
// It returns the outcome id and its sequence.
func Store(tb testing.TB, js jetstream.JetStream, cfg pipeline.Config, snap *discover.Snapshot, o Outcome) (string, uint64) {
	tb.Helper()
	cfg = cfg.WithDefaults()
	id := events.OutcomeID(o.Source, o.ID)
	subject, h, body := encode(tb, cfg, snap, o, id)
	if o.Body != nil {
		body = o.Body
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: h, Data: body}, jetstream.WithMsgID(id))
	if err != nil {
		tb.Fatalf("outcometest: publish: %v", err)
	}
	kv, err := js.KeyValue(ctx, cfg.OutcomesBucket)
	if err != nil {
		tb.Fatalf("outcometest: outcome store: %v", err)
	}
	rec, _ := json.Marshal(pipeline.Record{Seq: ack.Sequence, Subject: subject})
	if _, err := kv.Put(ctx, id, rec); err != nil {
		tb.Fatalf("outcometest: record: %v", err)
	}
	return id, ack.Sequence
}

func encode(tb testing.TB, cfg pipeline.Config, snap *discover.Snapshot, o Outcome, id string) (string, nats.Header, []byte) {
	tb.Helper()
	task, ref, decodeErr := events.DecodeTaskData([]byte(o.Task), events.DecodeOptions{})
	var out pipeline.Outcome
	if decodeErr != nil {
		out = pipeline.DecodeFailed(snap, &task.TaskID, decodeErr)
	} else {
		out = pipeline.Handle(snap, task, ref, nil)
	}
	if d := out.Decision(); d != nil && o.Digest != "" {
		d.Config.Digest = o.Digest
	}
	if o.NoDecision {
		if out.Resolved != nil {
			out.Resolved.Decision = nil
		} else {
			out.Failure.Decision = nil
		}
	}
	meta := events.OutcomeMeta{ID: id, Source: cfg.FleetSource, TaskID: task.TaskID, CausationID: o.ID, Time: o.Time, WorkerVersion: "0.0.0-test"}
	m, err := pipeline.EncodeOutcome(cfg, meta, task, &out, 0)
	if err != nil {
		tb.Fatalf("outcometest: encode: %v", err)
	}
	return m.Subject, m.Header, m.Data
}

// RunWorker runs a worker (pipeline.New, Run) on js until the test ends;
// a Run error then fails the test.
func RunWorker(tb testing.TB, js jetstream.JetStream, src pipeline.SnapshotSource, cfg pipeline.Config, opt pipeline.Options) *pipeline.Worker {
	tb.Helper()
	w, err := pipeline.New(js, src, cfg, opt)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("worker: %v", err)
		}
	})
	return w
}
