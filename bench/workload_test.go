package bench

import (
	"bytes"
	"fmt"
	"maps"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// TestDistinctConfigs: the default workload repeats one configuration
// per kind (all but the extra prompt, which is every task's own), so the
// worker finishes most tasks from plans; with distinct every task has a
// configuration of its own and still the outcome its kind must give.
func TestDistinctConfigs(t *testing.T) {
	snap := testSnapshot(t)
	for _, distinct := range []bool{false, true} {
		tasks, err := buildTasks(40, DefaultMix, false, distinct, "configs")
		if err != nil {
			t.Fatal(err)
		}
		configs := map[string]bool{}
		for _, tk := range tasks {
			inc, err := events.DecodeTask(tk.header(), tk.body, events.DecodeOptions{})
			if err != nil {
				t.Fatalf("distinct %v, %s task: %v", distinct, tk.kind, err)
			}
			configs[string(resolve.AppendTaskKey(nil, inc.Ref, inc.Task.Overrides()))] = true
			out := pipeline.Handle(snap, inc.Task, inc.Ref, nil)
			var subject string
			if out.Failure != nil {
				subject = events.FailedSubject("rolecall", out.Failure.Code)
			} else {
				subject = events.ResolvedSubject("rolecall", inc.Ref.Token())
			}
			if want := "rolecall" + expectedSubject[tk.kind]; subject != want {
				t.Errorf("distinct %v, %s task: outcome subject %q, want %q", distinct, tk.kind, subject, want)
			}
		}
		want := int(numKinds)
		if distinct {
			want = len(tasks)
		}
		if len(configs) != want {
			t.Errorf("distinct %v: %d configurations among %d tasks, want %d", distinct, len(configs), len(tasks), want)
		}
	}
}

// TestPackTasks: packed tasks carry exactly what EncodeTask gave, and a
// run's tasks, whatever their number, are a few heap objects: they stay
// live in the process that hosts the broker and the worker, where each
// object of their own would add to every collection's mark work.
func TestPackTasks(t *testing.T) {
	for _, binary := range []bool{false, true} {
		enc := make([]encodedTask, 30)
		for i := range enc {
			id := fmt.Sprintf("pack-%d", i)
			h, body, err := events.EncodeTask(taskSource, id, []byte(`{"task_id":"T","role":"architect"}`), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k=v", binary)
			if err != nil {
				t.Fatal(err)
			}
			enc[i] = encodedTask{kind: Kind(i % int(numKinds)), id: id, outID: "out-" + id, header: h, body: body}
		}
		tasks := packTasks(enc)
		for i, tk := range tasks {
			e := enc[i]
			if tk.kind != e.kind || tk.id != e.id || tk.outID != e.outID || !bytes.Equal(tk.body, e.body) || !maps.EqualFunc(tk.header(), e.header, slices.Equal) {
				t.Errorf("binary %v, task %d: packed %v %q %q %v %q; want %v %q %q %v %q", binary, i, tk.kind, tk.id, tk.outID, tk.header(), tk.body, e.kind, e.id, e.outID, e.header, e.body)
			}
			// A window ends at its capacity: appending to one body
			// cannot write over the next.
			if cap(tk.body) != len(tk.body) {
				t.Errorf("task %d: body window has capacity %d past its %d bytes", i, cap(tk.body), len(tk.body))
			}
		}
	}

	const n = 5000
	objects := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/objects:objects"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := objects()
	tasks, err := buildTasks(n, DefaultMix, false, false, "objects")
	if err != nil {
		t.Fatal(err)
	}
	// Other goroutines of the test binary may hold a few objects more or
	// fewer; one per task would be 5,000.
	if after := objects(); after > before+n/50 {
		t.Errorf("%d tasks hold %d heap objects (%d before, %d after); want a few", n, int64(after)-int64(before), before, after)
	}
	runtime.KeepAlive(tasks)
}
