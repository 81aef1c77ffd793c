package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
)

// BenchmarkStages is the CPU one task costs outside the broker, on the
// bench's workload (the default mix, structured mode, the generated config
// root), stage by stage: decode (events.DecodeTask), handle
// (pipeline.Handle: discover, resolve, materialize), encode (the outcome
// as the worker encodes it), and task, the three in a row with the outcome
// id: the worker's own work per task, its broker round trips aside. Each
// iteration is one task of the mix in turn; run it with -benchmem.
func BenchmarkStages(b *testing.B) {
	snap := testSnapshot(b)
	tasks, err := buildTasks(100, DefaultMix, false, "stages")
	if err != nil {
		b.Fatal(err)
	}
	// The inputs of each stage, made outside the timed loops: the
	// headers as a message carries them, the decoded tasks, the outcomes.
	headers := make([]nats.Header, len(tasks))
	incs := make([]events.Incoming, len(tasks))
	outs := make([]pipeline.Outcome, len(tasks))
	for i := range tasks {
		headers[i] = tasks[i].header()
		if incs[i], err = events.DecodeTask(headers[i], tasks[i].body, events.DecodeOptions{}); err != nil {
			b.Fatal(err)
		}
		outs[i] = pipeline.Handle(snap, incs[i].Task, incs[i].Ref, nil)
		if want := expectedSubject[tasks[i].kind]; (outs[i].Resolved != nil) != strings.HasPrefix(want, ".specs.resolved.") {
			b.Fatalf("%s task: outcome %+v, want one on %s", tasks[i].kind, outs[i].Failure, want)
		}
	}
	now := time.Now()
	stage := func(name string, fn func(i int) error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := fn(i % len(tasks)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
	stage("decode", func(i int) error {
		_, err := events.DecodeTask(headers[i], tasks[i].body, events.DecodeOptions{})
		return err
	})
	stage("handle", func(i int) error {
		_ = pipeline.Handle(snap, incs[i].Task, incs[i].Ref, nil)
		return nil
	})
	stage("encode", func(i int) error {
		_, _, _, err := encodeOutcome("rolecall", tasks[i].outID, incs[i], outs[i], now)
		return err
	})
	stage("task", func(i int) error {
		inc, err := events.DecodeTask(headers[i], tasks[i].body, events.DecodeOptions{})
		if err != nil {
			return err
		}
		o := pipeline.Handle(snap, inc.Task, inc.Ref, nil)
		_, _, _, err = encodeOutcome("rolecall", events.OutcomeID(inc.Source, inc.ID), inc, o, now)
		return err
	})
}
