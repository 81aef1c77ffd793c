package bench

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// oracleHandle is pipeline.Handle as it was before it took the
// system-message-only path of the materializer: it builds the whole
// Materialized value (AgentSpec, run envelope) and keeps the message.
func oracleHandle(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef) pipeline.Outcome {
	out := pipeline.Outcome{Role: task.Role, Ref: ref, SnapshotDigest: snap.Digest}
	if task.Pack != nil {
		out.Pack = *task.Pack
	}
	taskID := task.TaskID
	in, err := snap.Inputs(discover.Request{Ref: ref, Pack: task.Pack, Profile: task.Profile, Task: task.Overrides()})
	if err != nil {
		out.Failure = oracleFailureFrom(&taskID, resolve.StageDiscover, err)
		return out
	}
	if in.Pack != nil {
		out.Pack = in.Pack.Name
	}
	out.Inputs = in
	spec, err := resolve.Resolve(ref, in)
	if err != nil {
		out.Failure = oracleFailureFrom(&taskID, resolve.StageResolve, err)
		return out
	}
	m, err := materialize.Materialize(&spec, snap.Preamble)
	if err != nil {
		out.Failure = oracleFailureFrom(&taskID, resolve.StageMaterialize, err)
		return out
	}
	out.Resolved = &events.ResolvedData{
		TaskID:            taskID,
		ResolvedAgentSpec: spec,
		SystemMessage:     m.SystemMessage,
		InputsDigest:      resolve.InputsDigest(ref, in),
	}
	return out
}

// oracleFailureFrom is pipeline.FailureFrom as it was before it matched
// the typed errors by type first and made the failure in one allocation.
func oracleFailureFrom(taskID *string, stage resolve.Stage, err error) *events.FailureData {
	strPtr := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	f := &events.FailureData{Stage: stage, Details: map[string]any{}}
	if taskID != nil && *taskID != "" {
		v := *taskID
		f.TaskID = &v
	}
	var (
		re *resolve.ResolutionError
		de *discover.Error
		ee *events.DecodeError
		me *materialize.Error
	)
	switch {
	case errors.As(err, &re):
		f.Code, f.Subject, f.Message = re.Code, strPtr(re.Subject), re.Message
		if re.Details != nil {
			f.Details = re.Details
		}
	case errors.As(err, &de):
		f.Code, f.Message, f.Details = de.Code, de.Error(), de.Details()
		switch {
		case de.Subject != "":
			f.Subject = strPtr(de.Subject)
		case de.Key != "":
			f.Subject = strPtr(de.Key)
		}
	case errors.As(err, &ee):
		f.Code, f.Subject, f.Message = ee.Code, strPtr(ee.Subject), ee.Message
		if ee.Details != nil {
			f.Details = ee.Details
		}
	case errors.As(err, &me):
		f.Code, f.Message = me.Code, me.Message
	default:
		codes := map[resolve.Stage]resolve.Code{resolve.StageDecode: resolve.CodeEventInvalid,
			resolve.StageDiscover: resolve.CodeCatalogInvalid, resolve.StageDeliver: resolve.CodeDeliveryExhausted}
		f.Code = resolve.CodeMaterializeFailed
		if c, ok := codes[stage]; ok {
			f.Code = c
		}
		f.Message = fmt.Sprintf("untyped %s error: %v", stage, err)
	}
	if f.Message == "" {
		f.Message = err.Error()
	}
	f.Stage = f.Code.Stage()
	return f
}

func testSnapshot(t testing.TB) *discover.Snapshot {
	t.Helper()
	dir := t.TempDir()
	if err := writeRoot(dir); err != nil {
		t.Fatal(err)
	}
	src, err := discover.NewSource(dir, discover.Options{ReloadInterval: time.Hour}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return src.Snapshot()
}

// TestHandleMatchesOracle: Handle gives exactly the old Handle's outcome
// for the bench's task kinds and for tasks that fail at each stage.
func TestHandleMatchesOracle(t *testing.T) {
	snap := testSnapshot(t)
	tasks, err := buildTasks(20, DefaultMix, false, false, "oracle")
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range []string{
		`{"task_id":"T-1","role":"architect","pack":"nope"}`,                                     // discover: pack_not_found
		`{"task_id":"T-2","role":"architect","profile":"missing"}`,                               // external_profile_missing
		`{"task_id":"T-3","role":"ghost"}`,                                                       // role_unknown
		`{"task_id":"T-4","role":"external:bench-house-style"}`,                                  // external_ref_requires_replacement
		`{"task_id":"T-5","role":"reviewer","pack":"team","modes":["fast"]}`,                     // mode_disallowed
		`{"task_id":"T-6","role":"architect","pack":"team","modes":[],"overrides":{"tools":[]}}`, // explicit empty lists
		`{"task_id":"T-7","role":"external:bench-scribe","modes":["fast"]}`,                      // modes_on_replacement
		`{"task_id":"T-8","role":"architect","overrides":{"lion_system":false,"effort":"low"}}`,
		// Pairs that differ only in what a plan is scoped by besides the
		// task: the profile, and who chose the pack (the same one).
		`{"task_id":"T-9","role":"architect","pack":"team","overrides":{"extra_prompt":"One."}}`,
		`{"task_id":"T-10","role":"architect","pack":"team","profile":"bench-house-style","overrides":{"extra_prompt":"Two."}}`,
		`{"task_id":"T-11","role":"architect","overrides":{"extra_prompt":"Three."}}`,
	} {
		h, body, err := events.EncodeTask(taskSource, fmt.Sprint("extra-", i), []byte(data), "", "", false)
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, packTasks([]encodedTask{{id: data, header: h, body: body}})...)
	}
	// One Plans and one arena serve every task, twice over, as a
	// processing goroutine's do: the bench's tasks of a kind differ only
	// in their extra prompts, so most are finished from an earlier task's
	// plan; the second round also sees a new snapshot of the same files.
	var plans pipeline.Plans
	var arena resolve.TextArena
	apart := 0
	defer func() {
		if apart == 0 {
			t.Error("no outcome kept its extra prompt apart")
		}
	}()
	for round := range 2 {
		if round == 1 {
			snap = testSnapshot(t)
		}
		for _, tk := range tasks {
			inc, err := events.DecodeTask(tk.header(), tk.body, events.DecodeOptions{})
			if err != nil {
				t.Fatalf("%s: %v", tk.id, err)
			}
			want := oracleHandle(snap, inc.Task, inc.Ref)
			got := pipeline.Handle(snap, inc.Task, inc.Ref, nil)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: Handle (-oracle +got):\n%s", tk.id, diff)
			}
			if got.Resolved == nil && got.Failure == nil {
				t.Errorf("%s: neither resolved nor failed", tk.id)
			}
			planned := pipeline.HandleIn(&arena, &plans, snap, inc.Task, inc.Ref, nil)
			if r := planned.Resolved; r != nil && r.PromptTail != "" {
				// Kept apart, the extra prompt is Complete's to fold in.
				apart++
				planned.Resolved = r.Complete()
			}
			if diff := cmp.Diff(want, planned); diff != "" {
				t.Errorf("round %d, %s: HandleIn with plans (-oracle +got):\n%s", round, tk.id, diff)
			}
		}
	}
}

// TestHandleLeavesSnapshotAsLoaded: Handle's outcomes share memory with
// the snapshot (resolve.ResolveShared), so resolving and encoding every
// kind of task, many times over, must leave it equal to a fresh load of
// the same files.
func TestHandleLeavesSnapshotAsLoaded(t *testing.T) {
	dir := t.TempDir()
	if err := writeRoot(dir); err != nil {
		t.Fatal(err)
	}
	load := func() *discover.Snapshot {
		snap, err := discover.Load(dir, discover.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	snap, fresh := load(), load()
	tasks, err := buildTasks(200, DefaultMix, false, false, "shared")
	if err != nil {
		t.Fatal(err)
	}
	resolved := 0
	// Half the tasks are finished from plans, whose results share the
	// snapshot too.
	var plans pipeline.Plans
	for i, tk := range tasks {
		inc, err := events.DecodeTask(tk.header(), tk.body, events.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		o := pipeline.Handle(snap, inc.Task, inc.Ref, nil)
		if i%2 == 1 {
			o = pipeline.HandleIn(nil, &plans, snap, inc.Task, inc.Ref, nil)
		}
		meta := events.OutcomeMeta{ID: tk.outID, TaskID: inc.Task.TaskID, CausationID: inc.ID, Time: time.Now()}
		if o.Resolved != nil {
			resolved++
			_, _, _, err = events.AppendResolved(nil, "rolecall", meta, o.Resolved)
		} else {
			_, _, _, err = events.AppendFailed(nil, "rolecall", meta, o.Failure)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if resolved == 0 {
		t.Fatal("no task resolved: nothing shared the snapshot")
	}
	if diff := cmp.Diff(fresh, snap, cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" {
		t.Errorf("the snapshot changed while tasks were handled (-as loaded +after):\n%s", diff)
	}
}

// TestFailureFromMatchesOracle: every kind of error, direct or wrapped,
// becomes the failure the old FailureFrom made.
func TestFailureFromMatchesOracle(t *testing.T) {
	id, empty := "T-9", ""
	errs := []error{
		&resolve.ResolutionError{Code: resolve.CodeModeConflict, Subject: "slow", Details: map[string]any{"modes": []string{"fast", "slow"}}, Message: "conflict"},
		&resolve.ResolutionError{Code: resolve.CodeRoleUnknown, Message: ""},
		&discover.Error{Code: resolve.CodePackNotFound, Subject: "nope"},
		&discover.Error{Code: resolve.CodeProfileInvalid, Key: "timeout"},
		&events.DecodeError{Code: resolve.CodeTaskInvalid, Subject: "role", Message: "bad"},
		&events.DecodeError{Code: resolve.CodeEventInvalid, Details: map[string]any{"field": "type"}},
		&materialize.Error{Code: resolve.CodeMaterializeFailed, Message: "differs"},
		errors.New("boom"),
	}
	for _, e := range errs[:len(errs)-1] {
		errs = append(errs, fmt.Errorf("wrapped: %w", e))
	}
	errs = append(errs, errors.Join(errors.New("first"), errs[2]))
	for _, err := range errs {
		for _, taskID := range []*string{nil, &empty, &id} {
			for _, stage := range []resolve.Stage{resolve.StageDecode, resolve.StageDiscover, resolve.StageResolve, resolve.StageMaterialize, resolve.StageDeliver} {
				want := oracleFailureFrom(taskID, stage, err)
				got := pipeline.FailureFrom(taskID, stage, err)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%v (stage %s): FailureFrom (-oracle +got):\n%s", err, stage, diff)
				}
			}
		}
	}
}
