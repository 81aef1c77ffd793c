package pipeline

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/resolve"
)

// TestPlansKeyEveryInput: a Plans entry is found by the snapshot (the
// catalog, defaults, policy and preamble are its), the scope (pack,
// profile, pack selection) and resolve.AppendTaskKey (the role reference
// and every task override but the extra prompt). An input added to
// resolve.Inputs or resolve.TaskOverrides must be added to one of them,
// or tasks that differ in it would share a plan; this test names the
// fields each covers, so a new field fails it until it is placed.
func TestPlansKeyEveryInput(t *testing.T) {
	for _, c := range []struct {
		typ  reflect.Type
		want []string
	}{
		{reflect.TypeFor[resolve.Inputs](), []string{
			"Catalog", "Defaults", "Policy", // the snapshot's
			"Pack", "Profile", "PackSelection", // planScope
			"Task", // AppendTaskKey
		}},
		{reflect.TypeFor[resolve.TaskOverrides](), []string{
			"Model", "Effort", "Modes", "Tools", "Permissions", "Yolo", "Bypass", "FastMode", "LionSystem", // AppendTaskKey
			"ExtraPrompt", // what the plan is finished with
		}},
		{reflect.TypeFor[planScope](), []string{"pack", "profile", "selection"}},
	} {
		var got []string
		for f := range c.typ.Fields() {
			got = append(got, f.Name)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s has fields %v; the plan key covers %v", c.typ, got, want)
		}
	}
}

// TestPlansStartOver: a new snapshot, or a full Plans, starts an empty
// set of plans; within one snapshot an equal configuration finds its plan.
func TestPlansStartOver(t *testing.T) {
	load := func() *discover.Snapshot {
		snap, err := discover.Load("../examples", discover.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return snap
	}
	snap, other := load(), load()
	ref := resolve.RoleName("architect")
	in, err := snap.Inputs(discover.Request{Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	var c Plans
	if c.plan(snap, ref, in) != nil {
		t.Fatal("a configuration seen for the first time got a plan")
	}
	p := c.plan(snap, ref, in)
	if p == nil {
		t.Fatal("a configuration seen for the second time got no plan")
	}
	extra := "Another task's instructions."
	in2 := in
	in2.Task.ExtraPrompt = &extra
	if c.plan(snap, ref, in2) != p || c.n != 1 {
		t.Fatalf("a task differing only in its extra prompt did not find the plan (%d entries)", c.n)
	}
	in3 := in
	in3.Task.Tools = []string{"read"}
	if c.plan(snap, ref, in3) != nil || c.plan(snap, ref, in3) == p || c.n != 2 {
		t.Fatalf("a task with other tools shared a plan (%d entries)", c.n)
	}
	if c.plan(other, ref, in) != nil || c.n != 1 {
		t.Fatalf("a new snapshot kept the old plans (%d entries)", c.n)
	}
	c.plan(other, ref, in)
	c.n = maxPlans
	if c.plan(other, ref, in) != nil || c.n != 1 {
		t.Fatalf("a full Plans kept its plans (%d entries)", c.n)
	}
}

// TestPlannedOutcomesEncodeAsAny: every example task, three times with
// three extra prompts, through one Plans: an outcome finished from a plan
// and encoded with the plan's fixed fields is byte for byte the outcome
// Handle makes, encoded without them.
func TestPlannedOutcomesEncodeAsAny(t *testing.T) {
	snap, examples := exampleTasks(t)
	var plans Plans
	var arena resolve.TextArena
	planned, apart := 0, 0
	for round, extra := range []string{"First instructions.", "Second, with \"quotes\".", ""} {
		for _, ex := range examples {
			f, task, ref := ex.file, ex.task, ex.ref
			if task.Override == nil {
				task.Override = &events.Overrides{}
			}
			o := *task.Override
			o.ExtraPrompt = &extra
			task.Override = &o
			got := HandleIn(&arena, &plans, snap, task, ref, nil)
			want := Handle(snap, task, ref, nil)
			if (got.Resolved == nil) != (want.Resolved == nil) {
				t.Fatalf("round %d, %s: resolved %v, want %v", round, f, got.Resolved != nil, want.Resolved != nil)
			}
			if got.Resolved == nil {
				continue
			}
			if plans.fixed() != nil {
				planned++
			}
			if got.Resolved.PromptTail != "" {
				apart++
			}
			if diff := cmp.Diff(want.Resolved, got.Resolved.Complete()); diff != "" {
				t.Errorf("round %d, %s: planned outcome, completed, differs from Handle's (-Handle +planned):\n%s", round, f, diff)
			}
			meta := events.OutcomeMeta{ID: "rc-1", TaskID: task.TaskID, Time: time.Unix(1700000000, 0).UTC()}
			_, _, wantBody, err := events.AppendResolved(nil, "rolecall", meta, want.Resolved)
			if err != nil {
				t.Fatal(err)
			}
			meta.Fixed = plans.fixed()
			_, _, gotBody, err := events.AppendResolved(nil, "rolecall", meta, got.Resolved)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gotBody, wantBody) {
				t.Errorf("round %d, %s: planned outcome\n%s\nwant\n%s", round, f, gotBody, wantBody)
			}
		}
	}
	if planned == 0 || apart == 0 {
		t.Fatalf("%d outcomes were finished from a plan, %d kept the extra prompt apart; want some of each", planned, apart)
	}
}

// exampleTask is one of examples/tasks, decoded.
type exampleTask struct {
	file string
	task events.Task
	ref  resolve.RoleRef
}

// exampleTasks loads the examples' config root and decodes its tasks.
func exampleTasks(t *testing.T) (*discover.Snapshot, []exampleTask) {
	t.Helper()
	snap, err := discover.Load("../examples", discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../examples/tasks/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("example tasks: %v (%d)", err, len(files))
	}
	var out []exampleTask
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		task, ref, err := events.DecodeTaskData(data, events.DecodeOptions{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, exampleTask{f, task, ref})
	}
	return snap, out
}

// TestCheckedOnceDecidesEveryTask: checkedOnce accepts a plan's Apart
// result only when the materializer accepts every task's result (the
// result kept apart, its tail folded in), and accepts it whenever the
// materializer does and its overlays are blocks — for the example tasks'
// plans as resolved, and with their prompt, message or overlays spoiled —
// so checking once per plan decides what checking each task would.
func TestCheckedOnceDecidesEveryTask(t *testing.T) {
	snap, examples := exampleTasks(t)
	accepts := func(spec resolve.ResolvedAgentSpec, msg, preamble string) bool {
		got, err := materialize.MaterializeSystemMessageFrom(&spec, preamble, msg)
		return err == nil && got == msg
	}
	spoil := func(s string) string { return "X" + s[1:] }
	checked, rejected := 0, 0
	for _, ex := range examples {
		task := ex.task
		in, err := snap.Inputs(discover.Request{Ref: ex.ref, Pack: task.Pack, Profile: task.Profile, Task: task.Overrides()})
		if err != nil {
			continue
		}
		for _, preamble := range []string{"", snap.Preamble} {
			plan := resolve.NewPlan(ex.ref, in, preamble)
			base, _, ok := plan.Apart()
			if !ok {
				continue
			}
			if !apartChecked(plan, preamble) {
				t.Errorf("%s: the plan as resolved is not checked once", ex.file)
			}
			for _, extra := range []string{"Fix it.", "  padded \n", "ünïcode ✓ \"quoted\""} {
				spec, msg, tail, err := plan.ResolveApart(&extra, nil)
				if err != nil || tail == "" {
					t.Fatalf("%s: ResolveApart kept nothing apart (%v)", ex.file, err)
				}
				type variant struct {
					name       string
					spec, full resolve.ResolvedAgentSpec // Apart's, and the task's kept apart
					msg        string
				}
				vs := []variant{{name: "as resolved", spec: base, full: spec, msg: msg}}
				b, s := base, spec
				b.PromptBody, s.PromptBody = spoil(base.PromptBody), spoil(spec.PromptBody)
				vs = append(vs, variant{"body spoiled", b, s, msg})
				vs = append(vs, variant{"message spoiled", base, spec, spoil(msg)})
				b, s = base, spec
				b.PromptOverlays = append(slices.Clone(base.PromptOverlays), " not a block ")
				s.PromptOverlays = append(slices.Clone(b.PromptOverlays), tail)
				vs = append(vs, variant{"overlay not a block", b, s, msg})
				for _, v := range vs {
					v.full.PromptBody += resolve.BlockSeparator + tail
					once := checkedOnce(&v.spec, v.msg, preamble)
					task := accepts(v.full, v.msg+resolve.BlockSeparator+tail, preamble)
					switch {
					case once && v.name == "overlay not a block":
						t.Errorf("%s, extra %q: checked once with an overlay that is not a block", ex.file, extra)
					case once && !task:
						t.Errorf("%s, %s, extra %q: checked once, but the task's result fails the checks", ex.file, v.name, extra)
					case !once && task && v.name != "overlay not a block":
						t.Errorf("%s, %s, extra %q: not checked once, but the checks accept the task's result", ex.file, v.name, extra)
					case once:
						checked++
					default:
						rejected++
					}
				}
			}
		}
	}
	if checked == 0 || rejected == 0 {
		t.Fatalf("%d results checked once, %d not; want some of each", checked, rejected)
	}
}
