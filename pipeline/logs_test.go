package pipeline_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/telemetry"
)

// TestUndecodableTaskLogsNameTheEvent: the log line of a task that cannot
// be decoded carries whatever names it: the CloudEvent id and source when
// the envelope gave them, the outcome id, and always the stream sequence,
// so an operator can find the message and its failure outcome.
func TestUndecodableTaskLogsNameTheEvent(t *testing.T) {
	r := newTelRig(t, telConfig())
	var buf lockedBuffer
	opt := r.options()
	opt.Logger = telemetry.NewLogger(&buf, slog.LevelInfo, true)
	stop := r.start(context.Background(), telSnapshot(t, nil), opt)

	// Binary mode with a valid envelope and data that is not JSON: the id
	// and source are known, the task id is not.
	hdr, _, err := events.EncodeTask("planner-7", "ev-bad-data", []byte(`{"task_id":"X","role":"architect"}`), "", "", true)
	if err != nil {
		t.Fatal(err)
	}
	r.publishRaw(hdr, []byte("this is not JSON"))
	// Structured mode with a body that is not an event: nothing but the
	// stream sequence names it.
	r.publishRaw(nats.Header{"content-type": []string{"application/cloudevents+json"}}, []byte("{not an event"))
	r.waitOutcomes(2)
	stop()

	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(buf.bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, sc.Bytes())
		}
		if m["msg"] == "task failed" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 2 {
		t.Fatalf("%d \"task failed\" lines, want 2:\n%s", len(lines), buf.bytes())
	}
	bySeq := map[float64]map[string]any{}
	for _, l := range lines {
		seq, ok := l["stream_seq"].(float64)
		if !ok {
			t.Fatalf("line without stream_seq: %v", l)
		}
		bySeq[seq] = l
	}
	want := []map[string]any{
		{"event_id": "ev-bad-data", "event_source": "planner-7", "outcome_id": events.OutcomeID("planner-7", "ev-bad-data"), "code": "task_invalid", "stage": "decode"},
		{"outcome_id": events.OutcomeIDForSequence(r.cfg.TasksStream, 2), "code": "event_invalid", "stage": "decode"},
	}
	for i, w := range want {
		l := bySeq[float64(i+1)]
		if l == nil {
			t.Fatalf("no line for stream_seq %d: %v", i+1, lines)
		}
		for k, v := range w {
			if l[k] != v {
				t.Errorf("seq %d: %s = %v, want %v (line %v)", i+1, k, l[k], v, l)
			}
		}
		for _, k := range []string{"task_id", "event_id", "event_source"} {
			if _, ok := w[k]; !ok {
				if v, has := l[k]; has {
					t.Errorf("seq %d: %s = %v, want it absent: nothing named it", i+1, k, v)
				}
			}
		}
	}
}

func (l *lockedBuffer) bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}
