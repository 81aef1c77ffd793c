package replay_test

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/replay"
	"github.com/rolecall/rolecall/resolve"
)

// stored decides task against snap and reads the outcome back as the
// specs stream would hold it.
func stored(t *testing.T, snap *discover.Snapshot, task string) *explain.StoredOutcome {
	t.Helper()
	tk, ref, err := events.DecodeTaskData([]byte(task), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := pipeline.Handle(snap, tk, ref, nil)
	meta := events.OutcomeMeta{ID: "rc-1", WorkerVersion: "1.0.0"}
	var (
		subject string
		h       map[string][]string
		body    []byte
	)
	if out.Resolved != nil {
		subject, h, body, err = events.EncodeResolved("", meta, out.Resolved)
	} else {
		subject, h, body, err = events.EncodeFailed("", meta, out.Failure)
	}
	if err != nil {
		t.Fatal(err)
	}
	so, err := explain.ParseOutcome(1, subject, h, body)
	if err != nil {
		t.Fatal(err)
	}
	return so
}

func load(t testing.TB, files map[string]string) *discover.Snapshot {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		writeFile(t, root, name, body)
	}
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestOne(t *testing.T) {
	pack := map[string]string{"packs/team.yaml": "roles:\n  architect:\n    model: a\n  tester:\n    model: t\n"}
	snap := load(t, pack)
	edited := load(t, map[string]string{"packs/team.yaml": "roles:\n  architect:\n    model: a\n  tester:\n    model: t2\n"})
	tester := `{"task_id": "T-1", "role": "tester", "pack": "team"}`

	if r := replay.One(snap, stored(t, snap, tester), nil); r.Status != replay.StatusEqual || !r.SameConfig || len(r.Changes) != 0 {
		t.Errorf("same root: %+v", r)
	}
	if r := replay.One(snap, stored(t, snap, `{"task_id": "T-2", "role": "ghost"}`), nil); r.Status != replay.StatusEqual || r.Was != "role_unknown" {
		t.Errorf("a failure replays equal: %+v", r)
	}
	r := replay.One(edited, stored(t, snap, tester), nil)
	if r.Status != replay.StatusChanged || r.SameConfig || len(r.Changes) != 1 || r.Changes[0].Field != "model" ||
		string(r.Changes[0].Before) != `"t"` || string(r.Changes[0].After) != `"t2"` || r.Changes[0].Origin != "packs/team.yaml:5" {
		t.Errorf("edited root: %+v", r)
	}
	preamble := load(t, map[string]string{"packs/team.yaml": pack["packs/team.yaml"], "rolecall.yaml": "preamble_file: p.md\n", "p.md": "Another preamble.\n"})
	if r := replay.One(preamble, stored(t, snap, tester), nil); r.Status != replay.StatusChanged || len(r.Changes) != 1 || r.Changes[0].Field != "system_message" {
		t.Errorf("a preamble edit: %+v", r)
	}
	if r := replay.One(edited, stored(t, snap, `{"task_id": "T-3", "role": "architect", "pack": "team"}`), nil); r.Status != replay.StatusEqual {
		t.Errorf("an unaffected decision: %+v", r)
	}
	if r := replay.One(edited, stored(t, snap, `{"task_id": "T-4", "role": "tester", "pack": "nope"}`), nil); r.Status != replay.StatusEqual || r.Was != "pack_not_found" {
		t.Errorf("a failure both times: %+v", r)
	}

	// A resolver that decides otherwise under the same configuration.
	flip := func(s *discover.Snapshot, task events.Task, ref resolve.RoleRef) pipeline.Outcome {
		out := pipeline.Handle(s, task, ref, nil)
		out.Resolved.Yolo = !out.Resolved.Yolo
		return out
	}
	if r := replay.One(snap, stored(t, snap, tester), flip); r.Status != replay.StatusNondeterministic || len(r.Changes) != 1 || r.Changes[0].Field != "yolo" {
		t.Errorf("non-deterministic: %+v", r)
	}

	noTask := func(so *explain.StoredOutcome) { so.Decision.Task = jsontext.Value("null") }
	for _, tc := range []struct {
		name   string
		mutate func(*explain.StoredOutcome)
		reason string // a part of the reason
	}{
		{"no record", func(so *explain.StoredOutcome) { so.Decision = nil }, "no decision record"},
		{"no task", func(so *explain.StoredOutcome) {
			noTask(so)
			so.Failure.Stage, so.Failure.Code = resolve.StageDecode, resolve.CodeTaskInvalid
		}, "could not be decoded"},
		// The worker leaves the task out of a failure too large with it.
		{"no task, a failure too large with it", noTask, "too large"},
		{"delivery exhausted", func(so *explain.StoredOutcome) { so.Failure.Code = resolve.CodeDeliveryExhausted }, "delivery_exhausted"},
		{"delivery exhausted, its task event gone", func(so *explain.StoredOutcome) { noTask(so); so.Failure.Code = resolve.CodeDeliveryExhausted }, "delivery_exhausted"},
		{"too large", func(so *explain.StoredOutcome) { so.Failure.Details = map[string]any{"reason": "outcome_too_large"} }, "outcome_too_large"},
	} {
		so := stored(t, snap, `{"task_id": "T-5", "role": "ghost"}`)
		tc.mutate(so)
		if r := replay.One(snap, so, nil); r.Status != replay.StatusSkipped || !strings.Contains(r.Reason, tc.reason) {
			t.Errorf("%s: %+v, want skipped saying %q", tc.name, r, tc.reason)
		}
	}
	so := stored(t, snap, tester)
	so.Decision.Task = jsontext.Value(`{"task_id": "T-6"}`)
	if r := replay.One(snap, so, nil); r.Status != replay.StatusInvalid {
		t.Errorf("a recorded task that does not decode: %+v", r)
	}
}
