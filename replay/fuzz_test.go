package replay_test

import (
	"reflect"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/replay"
)

// FuzzReplayStored: whatever a specs stream holds, reading it and
// replaying it never panics and gives one of the statuses, the same one
// twice; an equal outcome lists no changes, and an outcome the worker
// decided under this configuration (a seed, byte for byte) is equal.
func FuzzReplayStored(f *testing.F) {
	snap := load(f, map[string]string{"packs/team.yaml": "roles:\n  tester:\n    model: t\n"})
	decided := map[string]bool{}
	for _, task := range []string{`{"task_id": "T-1", "role": "tester", "pack": "team"}`, `{"task_id": "T-2", "role": "ghost"}`} {
		tk, ref, err := events.DecodeTaskData([]byte(task), events.DecodeOptions{})
		if err != nil {
			f.Fatal(err)
		}
		out := pipeline.Handle(snap, tk, ref, nil)
		var body []byte
		if out.Resolved != nil {
			_, _, body, err = events.EncodeResolved("", events.OutcomeMeta{ID: "rc-1"}, out.Resolved)
		} else {
			_, _, body, err = events.EncodeFailed("", events.OutcomeMeta{ID: "rc-1"}, out.Failure)
		}
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
		decided[string(body)] = true
	}
	f.Add([]byte(`{"specversion": "1.0", "id": "x", "source": "s", "type": "dev.rolecall.agentspec.failed.v1", "data": {"code": "role_unknown", "decision": {"task": {"task_id": "T", "role": "tester"}}}}`))
	h := nats.Header{events.HeaderContentType: {events.ContentTypeCloudEventsJSON}}
	f.Fuzz(func(t *testing.T, body []byte) {
		so, err := explain.ParseOutcome(1, "rolecall.specs.resolved.tester", h, body)
		if err != nil {
			return
		}
		r := replay.One(snap, so, nil)
		switch r.Status {
		case replay.StatusEqual, replay.StatusChanged, replay.StatusNondeterministic, replay.StatusSkipped, replay.StatusInvalid:
		default:
			t.Fatalf("status %q", r.Status)
		}
		if r.Changes == nil {
			t.Fatal("changes is nil")
		}
		if r.Status == replay.StatusEqual && len(r.Changes) != 0 {
			t.Fatalf("equal with changes %+v", r.Changes)
		}
		if decided[string(body)] && (r.Status != replay.StatusEqual || !r.SameConfig) {
			t.Fatalf("an outcome decided under this configuration replays as %+v", r)
		}
		if again := replay.One(snap, so, nil); !reflect.DeepEqual(again, r) {
			t.Fatalf("replayed twice: %+v, then %+v", r, again)
		}
	})
}
