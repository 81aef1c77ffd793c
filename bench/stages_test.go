package bench

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// BenchmarkStages is the per-task CPU of each stage on the bench's own
// workload (the default mix), outside the broker: where a task's time goes.
func BenchmarkStages(b *testing.B) {
	snap := testSnapshot(b)
	tasks, err := buildTasks(100, DefaultMix, false, false, "stages")
	if err != nil {
		b.Fatal(err)
	}
	type decoded struct {
		inc events.Incoming
		out pipeline.Outcome
	}
	dec := make([]decoded, len(tasks))
	for i, t := range tasks {
		inc, err := events.DecodeTask(t.header(), t.body, events.DecodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		dec[i] = decoded{inc: inc, out: pipeline.Handle(snap, inc.Task, inc.Ref, nil)}
	}
	// The outcomes the worker encodes: finished from plans, the extra
	// prompt kept apart (the second round's: by then every configuration
	// has been seen twice, and has its plan).
	var plans pipeline.Plans
	planned := make([]pipeline.Outcome, len(dec))
	for range 2 {
		for i := range dec {
			planned[i] = pipeline.HandleIn(nil, &plans, snap, dec[i].inc.Task, dec[i].inc.Ref, nil)
		}
	}
	if !slices.ContainsFunc(planned, func(o pipeline.Outcome) bool { return o.Resolved != nil && o.Resolved.PromptTail != "" }) {
		b.Fatal("no planned outcome keeps its extra prompt apart")
	}
	// The headers as messages carry them, made outside the timed loop.
	headers := make([]nats.Header, len(tasks))
	for i := range tasks {
		headers[i] = tasks[i].header()
	}
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			t := &tasks[i%len(tasks)]
			if _, err := events.DecodeTask(headers[i%len(tasks)], t.body, events.DecodeOptions{}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("inputs", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := &dec[i%len(dec)]
			task := d.inc.Task
			_, _ = snap.Inputs(discover.Request{Ref: d.inc.Ref, Pack: task.Pack, Profile: task.Profile, Task: task.Overrides()})
			i++
		}
	})
	b.Run("resolve", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := &dec[i%len(dec)]
			if d.out.Inputs.Catalog != nil {
				_, _ = resolve.Resolve(d.out.Ref, d.out.Inputs)
			}
			i++
		}
	})
	b.Run("digest", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := &dec[i%len(dec)]
			if d.out.Resolved != nil {
				_ = resolve.InputsDigest(d.out.Ref, d.out.Inputs)
			}
			i++
		}
	})
	b.Run("materialize", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := &dec[i%len(dec)]
			if d.out.Resolved != nil {
				_, _ = materialize.Materialize(&d.out.Resolved.ResolvedAgentSpec, snap.Preamble)
			}
			i++
		}
	})
	// What Handle runs: Materialize's checks, only the system message built.
	b.Run("materialize-message", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := &dec[i%len(dec)]
			if d.out.Resolved != nil {
				_, _ = materialize.MaterializeSystemMessage(&d.out.Resolved.ResolvedAgentSpec, snap.Preamble)
			}
			i++
		}
	})
	b.Run("handle", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			d := &dec[i%len(dec)]
			_ = pipeline.Handle(snap, d.inc.Task, d.inc.Ref, nil)
			i++
		}
	})
	// Handle with a processing goroutine's arena, every task resolved in
	// full: what the worker runs for a configuration it has not seen twice.
	b.Run("handle-arena", func(b *testing.B) {
		b.ReportAllocs()
		var arena resolve.TextArena
		i := 0
		for b.Loop() {
			d := &dec[i%len(dec)]
			_ = pipeline.HandleIn(&arena, nil, snap, d.inc.Task, d.inc.Ref, nil)
			i++
		}
	})
	// What the worker runs for the bench's workload: with a processing
	// goroutine's arena and plans, so every task after the first two of
	// its kind is finished from a plan.
	b.Run("handle-plans", func(b *testing.B) {
		b.ReportAllocs()
		var arena resolve.TextArena
		var plans pipeline.Plans
		i := 0
		for b.Loop() {
			d := &dec[i%len(dec)]
			_ = pipeline.HandleIn(&arena, &plans, snap, d.inc.Task, d.inc.Ref, nil)
			i++
		}
	})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		now := time.Now()
		for b.Loop() {
			d := &dec[i%len(dec)]
			meta := events.OutcomeMeta{ID: tasks[i%len(tasks)].outID, TaskID: d.inc.Task.TaskID, CausationID: d.inc.ID,
				TraceParent: d.inc.TraceParent, Time: now}
			var err error
			if d.out.Resolved != nil {
				_, _, _, err = events.EncodeResolved("", meta, d.out.Resolved)
			} else {
				_, _, _, err = events.EncodeFailed("", meta, d.out.Failure)
			}
			if err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	// The same outcomes as the worker encodes them, their extra prompts
	// kept apart (without the fixed fields' cache, which is the worker's).
	b.Run("encode-apart", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		now := time.Now()
		for b.Loop() {
			d, o := &dec[i%len(dec)], &planned[i%len(dec)]
			meta := events.OutcomeMeta{ID: tasks[i%len(tasks)].outID, TaskID: d.inc.Task.TaskID, CausationID: d.inc.ID,
				TraceParent: d.inc.TraceParent, Time: now}
			var err error
			if o.Resolved != nil {
				_, _, _, err = events.EncodeResolved("", meta, o.Resolved)
			} else {
				_, _, _, err = events.EncodeFailed("", meta, o.Failure)
			}
			if err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("outcome-id", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = events.OutcomeID(taskSource, tasks[i%len(tasks)].id)
			i++
		}
	})
}
