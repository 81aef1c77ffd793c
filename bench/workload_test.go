package bench

import (
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
			inc, err := events.DecodeTask(tk.header, tk.body, events.DecodeOptions{})
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
