package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/bench"
	"github.com/rolecall/rolecall/telemetry"
)

type benchCmd struct {
	natsFlags
	Tasks          int           `help:"Task events per run." default:"20000"`
	Concurrency    int           `help:"Concurrency of the worker (and of the baseline loop)." default:"4"`
	MaxAckPending  int           `help:"Consumer max_ack_pending for both loops (0: the worker's default)." default:"0"`
	MaxInFlight    int           `help:"Tasks one loop holds past its fetch buffer (0: the worker's default)." default:"0"`
	FetchBatch     int           `help:"Pull batch of both loops (0: the worker's default)." default:"0"`
	Mix            string        `help:"Task mix as kind=weight: casts, overlay, replacement, failing." default:"casts=5,overlay=2,replacement=2,failing=1"`
	Baseline       bool          `help:"Also run the bare JetStream loop on the same server and payloads, and print the ratio."`
	Rate           float64       `help:"Offered load in tasks/s, published while the loop runs (0: preload all tasks and measure peak throughput)." default:"0"`
	PeakFraction   float64       `name:"peak-fraction" help:"First find the highest offered load the pipeline sustains (bisection over offered-load runs), then measure at this fraction of it (0.5: half of peak load); overrides --rate." default:"0"`
	Trace          bool          `help:"Trace with an always-sampling SDK tracer provider and a discarding exporter."`
	CompareTracing bool          `help:"Run the pipeline untraced and traced (as --trace) back to back in each repeat and print what tracing costs."`
	Binary         bool          `help:"Send tasks in binary content mode (ce-* headers) instead of structured."`
	Distinct       bool          `name:"distinct-configs" help:"Give every task a configuration of its own (a tool named after it), so that no task is finished from another's plan."`
	Repeat         int           `help:"Runs of each loop, in pairs that alternate which loop runs first; the median run and the median of the pairs' ratios are reported (one pair's ratio swings by ±0.1 on a shared host; an even count runs as many pairs in each order)." default:"6"`
	Warmup         int           `help:"Tasks of one unmeasured warm-up run of each loop before the measured runs, at most --tasks (0: none)." default:"20000"`
	Purge          bool          `help:"With --nats: allow deleting the bench's streams if they exist on the server."`
	Timeout        time.Duration `help:"Time limit of each run." default:"5m"`
	JSON           bool          `name:"json" help:"Print the report as JSON."`
	CPUProfile     string        `name:"cpuprofile" help:"Write a CPU profile of each measured run to PREFIX.<loop>.<repeat> (go tool pprof merges several files)." type:"path" placeholder:"PREFIX"`
	LatencyCSV     string        `name:"latency-csv" help:"Write each task's enqueue time and latency of every measured run to FILE as CSV (milliseconds; enqueue times count from the start of a collection forced first: with GODEBUG=gctrace=1, the first cycle marked (forced))." type:"path" placeholder:"FILE"`
}

func (c *benchCmd) Run(ctx context.Context, g *globals, kctx *kong.Context) (err error) {
	mix, err := bench.ParseMix(c.Mix)
	if err != nil {
		return usageErr("--mix: %v", err)
	}
	if c.Tasks <= 0 || c.Concurrency <= 0 || c.Repeat <= 0 || c.Warmup < 0 || c.Rate < 0 || c.PeakFraction < 0 || c.PeakFraction > 1 {
		return usageErr("--tasks, --concurrency and --repeat must be positive, --warmup and --rate not negative and --peak-fraction between 0 and 1")
	}
	opts := bench.Options{
		Tasks: c.Tasks, Concurrency: c.Concurrency, Mix: mix,
		MaxAckPending: c.MaxAckPending, MaxInFlight: c.MaxInFlight, FetchBatch: c.FetchBatch, Baseline: c.Baseline,
		Rate: c.Rate, PeakFraction: c.PeakFraction, Trace: c.Trace, CompareTracing: c.CompareTracing, Binary: c.Binary, Distinct: c.Distinct, Repeat: c.Repeat,
		Warmup: c.Warmup, URL: c.NATS, Purge: c.Purge, Timeout: c.Timeout, Progress: g.stderr,
	}
	if f, ok := g.stderr.(*os.File); ok && telemetry.IsTerminal(f) {
		opts.ProgressTTY = true
	}
	// The generated config root is the default: --root (or ROLECALL_ROOT)
	// benchmarks a deployment's own files instead.
	if rootSet(kctx) {
		opts.Root = g.Root
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

// rootSet reports whether the user chose a root: kong marks a flag with a
// default as set, so look at the arguments and the variable themselves.
func rootSet(kctx *kong.Context) bool {
	if _, ok := os.LookupEnv("ROLECALL_ROOT"); ok {
		return true
	}
	if kctx == nil {
		return false
	}
	for _, a := range kctx.Args {
		if a == "--" {
			break
		}
		if a == "--root" || strings.HasPrefix(a, "--root=") {
			return true
		}
	}
	return false
}

func printReport(w io.Writer, r *bench.Report) {
	mode := "preloaded (peak throughput)"
	if r.Rate > 0 {
		mode = fmt.Sprintf("offered at %.0f tasks/s", r.Rate)
	}
	tracing := "off"
	switch {
	case r.CompareTracing:
		tracing = "off and on (always sample, discarding exporter), back to back"
	case r.Trace:
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
	if r.Repeat > 1 {
		by := "throughput"
		if r.Rate > 0 {
			by = "p99 latency"
		}
		fmt.Fprintf(w, "median (by %s) of %d runs each\n", by, r.Repeat)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "loop\ttasks/s\tp50 ms\tp90 ms\tp99 ms\tmax ms\tCPU s/1k tasks\tof it sys\tGC µs/task\tallocs/task\tpeak RSS MiB\ttask B\toutcome B\t")
	row := func(s bench.Stats) {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.3f\t%.3f\t%.1f\t%.0f\t%.1f\t%d\t%d\t\n",
			s.Loop, s.Throughput, s.Latency.P50, s.Latency.P90, s.Latency.P99, s.Latency.Max,
			s.CPUPer1000, s.SysCPUPer1000, s.GCMicrosPerTask, s.AllocsPerTask, float64(s.PeakRSSBytes)/(1<<20), s.TaskBytes, s.OutcomeBytes)
	}
	if r.Baseline != nil {
		row(*r.Baseline)
	}
	row(r.Pipeline)
	if r.Traced != nil {
		row(*r.Traced)
	}
	_ = tw.Flush()
	if r.Baseline != nil && r.Ratio > 0 {
		fmt.Fprintf(w, "\nratio pipeline/baseline: %.2f", r.Ratio)
		if len(r.Ratios) > 1 {
			fmt.Fprintf(w, " (median of the pairs' %.2f; baseline first %.2f, pipeline first %.2f)", r.Ratios, r.RatioBaselineFirst, r.RatioPipelineFirst)
		}
		fmt.Fprintln(w)
	}
	if r.Traced != nil && r.TracedRatio > 0 {
		fmt.Fprintf(w, "tracing costs %.1f%% of throughput: traced/untraced %.3f", 100*(1-r.TracedRatio), r.TracedRatio)
		if len(r.TracedRatios) > 1 {
			fmt.Fprintf(w, " (median of the pairs' %.3f)", r.TracedRatios)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "CPU per task: untraced %.1f µs, traced %.1f µs (median runs)\n", r.Pipeline.CPUPer1000*1000, r.Traced.CPUPer1000*1000)
	}
	if f := r.SpanFloor; f != nil {
		fmt.Fprintf(w, "the OpenTelemetry SDK alone, the same spans without the pipeline (%d tasks): %.1f µs CPU, %.0f allocations, %.1f KiB per task = %.1f%% of an untraced task's CPU\n",
			f.Tasks, f.CPUMicrosPerTask, f.AllocsPerTask, f.AllocBytesPerTask/1024, 100*f.ShareOfUntracedTask)
	}
	if r.NATSErrors > 0 {
		fmt.Fprintf(w, "warning: %d asynchronous NATS errors during the bench; the numbers are disturbed\n", r.NATSErrors)
	}
	fmt.Fprintf(w, "outcomes: %d resolved, %d failed, every task exactly one\n", r.Pipeline.Resolved, r.Pipeline.Failed)
}
