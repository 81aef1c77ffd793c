package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/internal/bench"
)

type benchCmd struct {
	natsFlags
	Tasks        int           `help:"Task events per run." default:"20000"`
	Concurrency  int           `help:"Deliveries each loop runs at once (0: the worker's default)." default:"0"`
	Mix          string        `help:"Task mix as kind=weight: casts, overlay, replacement, failing." default:"casts=5,overlay=2,replacement=2,failing=1"`
	Baseline     bool          `help:"Also run the bare loop (the worker's shape, none of its work) and the pipeline with the idempotency store off, and print the pipeline's throughput over the bare loop's with the store off and on."`
	Rate         float64       `help:"Offered load in tasks/s, published while the loop runs (0: preload all tasks and measure peak throughput)." default:"0"`
	PeakFraction float64       `name:"peak-fraction" help:"First find the highest offered load the pipeline sustains (bisection over offered-load runs), then measure at this fraction of it (0.5: half of peak load); overrides --rate." default:"0"`
	Trace        bool          `help:"Trace the pipeline with an always-sampling SDK tracer provider and a discarding exporter."`
	Binary       bool          `help:"Send tasks in binary content mode (ce-* headers) instead of structured."`
	Repeat       int           `help:"Runs of each loop, their order rotated from one repeat to the next; each loop's median run and the spread are reported." default:"3"`
	Warmup       int           `help:"Tasks of one unmeasured warm-up run of each loop before the measured runs, at most --tasks (0: none)." default:"20000"`
	Purge        bool          `help:"With --nats: allow deleting the bench's streams if they exist on the server."`
	PreviewFlood float64       `name:"preview-flood" help:"Also run the pipeline with the micro service beside it while preview requests (rolecall.svc.resolve) arrive at this rate per second, and print its throughput over the pipeline's (0: off)." default:"0" placeholder:"REQ/S"`
	Timeout      time.Duration `help:"Time limit of each run." default:"5m"`
	JSON         bool          `name:"json" help:"Print the report as JSON."`
	CPUProfile   string        `name:"cpuprofile" help:"Write a CPU profile of each measured run to PREFIX.<loop>.<repeat> (go tool pprof merges several files)." type:"path" placeholder:"PREFIX"`
	LatencyCSV   string        `name:"latency-csv" help:"Write each task's enqueue time and latency of every measured run to FILE as CSV (milliseconds; enqueue times count from the start of a collection forced first: with GODEBUG=gctrace=1, the first cycle marked (forced))." type:"path" placeholder:"FILE"`
}

// Run ignores --root and ROLECALL_ROOT (which the worker image sets): the
// workload's tasks name the roles, packs and profiles of the config root
// the bench generates, and each run checks every outcome against it.
func (c *benchCmd) Run(ctx context.Context, g *globals) (err error) {
	mix, err := bench.ParseMix(c.Mix)
	if err != nil {
		return usageErr("--mix: %v", err)
	}
	// Written so that NaN fails each float check (every comparison with it
	// is false): a NaN --rate neither preloaded nor published a task, and
	// the run waited out its timeout.
	if c.Tasks <= 0 || c.Concurrency < 0 || c.Repeat <= 0 || c.Warmup < 0 || c.Timeout <= 0 ||
		!(c.Rate >= 0 && c.PreviewFlood >= 0 && c.PeakFraction >= 0 && c.PeakFraction <= 1) {
		return usageErr("--tasks, --repeat and --timeout must be positive, --concurrency, --warmup, --rate and --preview-flood not negative and --peak-fraction between 0 and 1")
	}
	// An infinite rate is no schedule, and JSON has no Inf for the report.
	if math.IsInf(c.Rate, 0) || math.IsInf(c.PreviewFlood, 0) {
		return usageErr("--rate and --preview-flood must be finite")
	}
	opts := bench.Options{
		Tasks: c.Tasks, Concurrency: c.Concurrency, Mix: mix, Baseline: c.Baseline,
		Rate: c.Rate, PeakFraction: c.PeakFraction, Trace: c.Trace, Binary: c.Binary, Repeat: c.Repeat,
		Warmup: c.Warmup, PreviewFlood: c.PreviewFlood, URL: c.NATS, Prefix: c.Prefix, Purge: c.Purge, Timeout: c.Timeout,
		Progress: g.stderr, ProgressTTY: isTerminal(g.stderr),
	}
	if c.NATS != "" {
		nf := c.natsFlags
		log := slog.New(slog.DiscardHandler)
		opts.Connect = func(_, name string) (*nats.Conn, error) { return nf.connect(name, log) }
	}
	if prefix := c.CPUProfile; prefix != "" {
		opts.CPUProfile = func(loop string, repeat int) (io.WriteCloser, error) {
			return os.Create(fmt.Sprintf("%s.%s.%d", prefix, loop, repeat))
		}
	}
	if c.LatencyCSV != "" {
		// Not :=, so that the deferred close reports into the result.
		var f *os.File
		if f, err = os.Create(c.LatencyCSV); err != nil {
			return err
		}
		bw := bufio.NewWriter(f)
		opts.Latencies = bw
		defer func() {
			if ferr := bw.Flush(); ferr != nil && err == nil {
				err = ferr
			}
			if cerr := f.Close(); cerr != nil && err == nil {
				err = cerr
			}
		}()
	}
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printReport(g.stdout, rep)
	return nil
}

func printReport(w io.Writer, r *bench.Report) {
	mode := "preloaded (peak throughput)"
	if r.Rate > 0 {
		mode = fmt.Sprintf("offered at %.0f tasks/s", r.Rate)
	}
	tracing := "off"
	if r.Trace {
		tracing = "on (always sample, discarding exporter)"
	}
	fmt.Fprintf(w, "rolecall bench: %d tasks %s, concurrency %d, mix %s, %s server, tracing %s\n",
		r.Tasks, mode, r.Concurrency, r.Mix, r.Server, tracing)
	gc := "GOGC " + r.Machine.GOGC
	if l := r.Machine.MemoryLimit; l > 0 {
		gc += fmt.Sprintf(", GOMEMLIMIT %d MiB", l>>20)
	}
	fmt.Fprintf(w, "machine: %d CPUs (%s), GOMAXPROCS %d, %s (%s), load %s\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.GOMAXPROCS, r.Machine.GoVersion, gc, r.Machine.LoadAvg)
	if p := r.Peak; p != nil {
		fmt.Fprintf(w, "peak load: the pipeline sustains %.0f tasks/s offered (draining a preloaded backlog: %.0f tasks/s); measured at %.0f tasks/s\n",
			p.Sustained, p.Preloaded, r.Rate)
		for _, st := range p.Steps {
			verdict := "kept up"
			if !st.Kept {
				verdict = "fell behind"
			}
			fmt.Fprintf(w, "  offered %.0f/s: %.0f/s, p99 %.1f ms, %s\n", st.Rate, st.Throughput, st.P99, verdict)
		}
	}
	if r.WarmupTasks > 0 {
		fmt.Fprintf(w, "after an unmeasured warm-up run of %d tasks per loop\n", r.WarmupTasks)
	}
	by := "throughput"
	if r.Rate > 0 {
		by = "p99 latency"
	}
	fmt.Fprintf(w, "median run (by %s) of %d per loop, with the range over the runs\n\n", by, r.Repeat)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "loop\ttasks/s\trange\tp50 ms\tp99 ms\trange\tmax ms\tCPU s/1k tasks\tof it sys\tGC µs/task\tallocs/task\tpeak RSS MiB\ttask B\toutcome B\t")
	for _, l := range r.Loops {
		s := l.Median
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f–%.0f\t%.2f\t%.2f\t%.2f–%.2f\t%.2f\t%.3f\t%.3f\t%.1f\t%.0f\t%.1f\t%d\t%d\t\n",
			s.Loop, s.Throughput, l.Throughput.Min, l.Throughput.Max, s.Latency.P50, s.Latency.P99, l.P99.Min, l.P99.Max, s.Latency.Max,
			s.CPUPer1000, s.SysCPUPer1000, s.GCMicrosPerTask, s.AllocsPerTask, float64(s.PeakRSSBytes)/(1<<20), s.TaskBytes, s.OutcomeBytes)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	for _, x := range []struct {
		name string
		r    *bench.Ratio
	}{{"store off", r.StoreOff}, {"store on ", r.StoreOn}} {
		if x.r == nil {
			continue
		}
		verdict := "met"
		if !x.r.Met() {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "pipeline/bare, %s: %.2f (range %.2f–%.2f, each repeat %.2f); floor %.2f %s; by CPU per task %.2f\n",
			x.name, x.r.Median, x.r.Spread.Min, x.r.Spread.Max, x.r.Each, x.r.Floor, verdict, x.r.CPU)
	}
	if f := r.Loop(bench.LoopFlood); f != nil && f.Median.Flood != nil {
		fmt.Fprintf(w, "preview flood (median run): %s\n", f.Median.Flood)
	}
	if x := r.Flood; x != nil {
		verdict := "met"
		if !x.Met() {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "pipeline under preview flood/pipeline: %.2f (range %.2f–%.2f, each repeat %.2f); floor %.2f %s; by CPU per task %.2f\n",
			x.Median, x.Spread.Min, x.Spread.Max, x.Each, x.Floor, verdict, x.CPU)
	}
	if r.NATSErrors > 0 {
		fmt.Fprintf(w, "warning: %d asynchronous NATS errors during the bench; the numbers are disturbed\n", r.NATSErrors)
	}
	p := r.Loop(bench.LoopPipeline).Median
	fmt.Fprintf(w, "outcomes: %d resolved, %d failed, every task exactly one in every run\n", p.Resolved, p.Failed)
}
