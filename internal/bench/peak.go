package bench

import (
	"context"
	"fmt"
	"time"
)

// PeakSearch is how PeakFraction found the load it measures latency at.
//
// A preloaded run measures how fast the pipeline drains a backlog: the
// tasks were published and stored before it started. Under an offered
// load the same machine must also receive and store every task while it
// processes them, so it sustains less: half of the drain rate can be
// nearly all of a small machine, and the latency measured there queueing
// on saturated cores. The sustained peak is the highest offered load the
// pipeline (the store on) keeps up with, found by bisection over
// offered-load runs.
type PeakSearch struct {
	// Preloaded is the pipeline's throughput draining a preloaded backlog
	// (the upper bound of the search).
	Preloaded float64 `json:"preloaded_tasks_per_second"`
	// Sustained is the highest offered load the pipeline kept up with.
	Sustained float64 `json:"sustained_tasks_per_second"`
	// Steps are the offered-load runs of the search, in order.
	Steps []PeakStep `json:"steps"`
}

// PeakStep is one offered-load run of the search.
type PeakStep struct {
	Rate       float64 `json:"rate"`
	Throughput float64 `json:"tasks_per_second"`
	P99        float64 `json:"p99_ms"`
	// Kept: the outcomes kept pace with the offered load (throughput at
	// least 98 % of it) and no backlog built up (p99 under keptP99).
	Kept bool `json:"kept"`
}

// keptP99 bounds the p99 of a run that keeps up: a backlog that grows for
// the length of a run pushes its tail latency to hundreds of milliseconds
// and beyond, while a loaded but stable run stays in tens.
const keptP99 = 100 * time.Millisecond

// peakSteps is the number of bisection runs: the sustained peak is found
// within 1/64 of the preloaded throughput.
const peakSteps = 6

// findPeak measures the pipeline's preloaded throughput and then bisects
// the offered load between 0 and it.
func (e *env) findPeak(ctx context.Context, o Options) (*PeakSearch, error) {
	run := func(rate float64) (Stats, error) {
		tasks, err := buildTasks(o.Tasks, o.Mix, o.Binary, runID())
		if err != nil {
			return Stats{}, err
		}
		po := o.unmeasured()
		po.Rate = rate
		return e.run(ctx, po, peakSearchRun, e.pipelineLoop(po, LoopPipeline, 0), tasks)
	}
	pre, err := run(0)
	if err != nil {
		return nil, fmt.Errorf("bench: peak search, preloaded run: %w", err)
	}
	ps := &PeakSearch{Preloaded: pre.Throughput}
	lo, hi := 0.0, pre.Throughput
	for range peakSteps {
		rate := (lo + hi) / 2
		st, err := run(rate)
		if err != nil {
			return nil, fmt.Errorf("bench: peak search at %.0f tasks/s: %w", rate, err)
		}
		step := PeakStep{Rate: rate, Throughput: st.Throughput, P99: st.Latency.P99}
		step.Kept = st.Throughput >= 0.98*rate && st.Latency.P99 < millis(keptP99)
		ps.Steps = append(ps.Steps, step)
		if step.Kept {
			lo = rate
		} else {
			hi = rate
		}
	}
	if lo == 0 {
		return nil, fmt.Errorf("bench: peak search: the pipeline kept up with no offered load down to %.0f tasks/s", hi)
	}
	ps.Sustained = lo
	return ps, nil
}
