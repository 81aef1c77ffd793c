package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

// Options configure one bench invocation. Zero values take the defaults
// noted on each field.
type Options struct {
	// Tasks is the number of task events per run (default 20000).
	Tasks int
	// Concurrency is the deliveries each loop runs at once (default the
	// worker's, pipeline.DefaultConfig().Concurrency).
	Concurrency int
	// Mix weights the task kinds (zero: DefaultMix).
	Mix Mix
	// Baseline also runs the bare loop and the pipeline with the
	// idempotency store off, in every repeat, and reports the pipeline's
	// throughput over the bare loop's with the store off and on.
	Baseline bool
	// Rate is the offered load in tasks per second: tasks are published
	// at this rate while the loop runs. 0 preloads every task first and
	// measures peak throughput.
	Rate float64
	// PeakFraction, when positive, first finds the highest offered load
	// the pipeline sustains (PeakSearch) and then measures at this
	// fraction of it: Rate is set from it.
	PeakFraction float64
	// Trace runs the pipeline with an always-sampling SDK tracer provider
	// whose exporter discards every span: the cost of tracing without the
	// cost of a collector.
	Trace bool
	// Binary sends tasks in binary content mode instead of structured.
	Binary bool
	// Repeat runs every loop this many times (default 3), rotating their
	// order from one repeat to the next; each loop's median run is
	// reported.
	Repeat int
	// Warmup, when positive, first runs every loop once over this many
	// tasks (at most Tasks), unmeasured: the heap, the broker's buffers and
	// the store's files grow to their working size there, not in whichever
	// loop runs first.
	Warmup int
	// URL is the NATS server; "" starts an embedded server with its own
	// temporary store directory.
	URL string
	// Prefix is the subject prefix of tasks, outcomes and the micro
	// service ("": the worker's default, rolecall).
	Prefix string
	// Connect dials URL (nil: nats.Connect with the name).
	Connect func(url, name string) (*nats.Conn, error)
	// Purge allows the bench to delete streams it finds on a server given
	// by URL (it always deletes its own on an embedded server).
	Purge bool
	// CPUProfile, when set, gives the writer for each measured run's pprof
	// CPU profile (loop is the run's loop name, repeat counts from 1),
	// closed when the run ends. A profile covers the measured window
	// alone, one per file, as pprof reads them.
	CPUProfile func(loop string, repeat int) (io.WriteCloser, error)
	// Latencies, when set, receives the enqueue-to-outcome latency of
	// every task of every measured run as CSV: the header
	// "loop,run,enqueued_ms,latency_ms", then one row per task. enqueued_ms
	// counts from the start of a collection Run forces first
	// (latencyEpoch): with GODEBUG=gctrace=1 the first cycle marked
	// "(forced)", so the tail can be lined up with the collector's cycles.
	Latencies io.Writer
	// PreviewFlood, when positive, also runs the pipeline-flood loop in
	// every repeat: the pipeline with the micro service beside it while
	// preview requests arrive at this rate (requests/s); the report gives
	// its throughput over the pipeline's.
	PreviewFlood float64
	// Timeout bounds each run (default 5 minutes).
	Timeout time.Duration
	// Progress receives a progress line while a run is going (nil: none);
	// ProgressTTY rewrites one line in place instead of printing a line
	// every two seconds.
	Progress    io.Writer
	ProgressTTY bool
}

// unmeasured is o for a run that is not reported (a warm-up or a step of
// the peak search): none of the per-run outputs.
func (o Options) unmeasured() Options {
	o.CPUProfile, o.Latencies = nil, nil
	return o
}

func (o Options) withDefaults() Options {
	if o.Tasks <= 0 {
		o.Tasks = 20000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = pipeline.DefaultConfig().Concurrency
	}
	if o.Mix.total() == 0 {
		o.Mix = DefaultMix
	}
	if o.Repeat <= 0 {
		o.Repeat = 3
	}
	o.Warmup = min(max(o.Warmup, 0), o.Tasks)
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Connect == nil {
		o.Connect = func(url, name string) (*nats.Conn, error) { return nats.Connect(url, nats.Name(name)) }
	}
	return o
}

// The loops, by the names runs, profiles and latency rows carry.
const (
	// LoopBare is the bare loop: the worker's shape, none of its work.
	LoopBare = "bare"
	// LoopStoreOff is the pipeline with the idempotency store off.
	LoopStoreOff = "pipeline-store-off"
	// LoopPipeline is the pipeline as `worker run` runs it: the store on,
	// the default horizon.
	LoopPipeline = "pipeline"
)

// The floors of the pipeline's throughput over the bare loop's.
const (
	FloorStoreOff = 0.75
	FloorStoreOn  = 0.6
)

// Stats is one run of one loop.
type Stats struct {
	Loop string `json:"loop"`
	// Load1 is the machine's one-minute load average when the run began.
	Load1 float64 `json:"load1"`
	// Tasks published and outcomes found (exactly one per task, or the
	// run is an error).
	Tasks    int `json:"tasks"`
	Outcomes int `json:"outcomes"`
	// Resolved and Failed count the outcome types.
	Resolved int `json:"resolved"`
	Failed   int `json:"failed"`
	// Seconds is the span from the first outcome to the last, from the
	// specs stream's own timestamps.
	Seconds float64 `json:"seconds"`
	// Throughput is outcomes per second over Seconds.
	Throughput float64 `json:"tasks_per_second"`
	// Latency is enqueue to outcome: the outcome's stream timestamp minus
	// its task's stream timestamp (both the server's clock).
	Latency Latency `json:"latency_ms"`
	// CPUPer1000 is the process's user+system CPU seconds per 1,000 tasks
	// over the run (with an embedded server this includes the broker);
	// SysCPUPer1000 is its system (kernel) part.
	CPUPer1000    float64 `json:"cpu_seconds_per_1000_tasks"`
	SysCPUPer1000 float64 `json:"sys_cpu_seconds_per_1000_tasks"`
	// AllocsPerTask and AllocBytesPerTask are heap allocations of the
	// whole process during the run divided by the tasks.
	AllocsPerTask     float64 `json:"allocs_per_task"`
	AllocBytesPerTask float64 `json:"alloc_bytes_per_task"`
	// GCCycles is the number of collections that completed during the
	// run, and GCMicrosPerTask the runtime's estimate of their CPU per task.
	GCCycles        uint64  `json:"gc_cycles"`
	GCMicrosPerTask float64 `json:"gc_cpu_us_per_task"`
	// PeakRSSBytes is the resident-memory high-water mark during the run.
	PeakRSSBytes uint64 `json:"peak_rss_bytes"`
	// TaskBytes and OutcomeBytes are the mean message body sizes.
	TaskBytes    int `json:"task_bytes"`
	OutcomeBytes int `json:"outcome_bytes"`
	// Flood is what the preview flood did (pipeline-flood runs only).
	Flood *FloodStats `json:"flood,omitempty"`
}

// Report is the result of Run.
type Report struct {
	Machine     Machine `json:"machine"`
	Server      string  `json:"server"` // "embedded" or "external"
	Tasks       int     `json:"tasks"`
	Concurrency int     `json:"concurrency"`
	Mix         string  `json:"mix"`
	Rate        float64 `json:"rate,omitempty"`
	// Peak is set with PeakFraction: how the measured Rate was found.
	Peak        *PeakSearch `json:"peak,omitempty"`
	Trace       bool        `json:"trace"`
	Binary      bool        `json:"binary"`
	Repeat      int         `json:"repeat"`
	WarmupTasks int         `json:"warmup_tasks"`
	// Loops are the loops measured: with Baseline bare, pipeline-store-off
	// and pipeline, else pipeline alone.
	Loops []LoopReport `json:"loops"`
	// StoreOff and StoreOn are the pipeline's throughput over the bare
	// loop's with the idempotency store off and on (Baseline, at peak
	// load).
	StoreOff *Ratio `json:"ratio_store_off,omitempty"`
	StoreOn  *Ratio `json:"ratio_store_on,omitempty"`
	// Flood is the pipeline's throughput under a preview flood over its
	// throughput without one (PreviewFlood, at peak load).
	Flood *Ratio `json:"ratio_preview_flood,omitempty"`
	// Runs is every measured run in the order it ran.
	Runs []Stats `json:"runs"`
	// NATSErrors counts asynchronous client errors (a slow-consumer drop,
	// say) during the bench: a run with any was disturbed by something
	// other than the code under test.
	NATSErrors int64 `json:"nats_errors"`
}

// Loop returns the report of the loop named name, or nil.
func (r *Report) Loop(name string) *LoopReport {
	for i := range r.Loops {
		if r.Loops[i].Median.Loop == name {
			return &r.Loops[i]
		}
	}
	return nil
}

// LoopReport is one loop's runs: the median one, whole, and the spread.
type LoopReport struct {
	// Median is the median run: by throughput at peak load, by p99 at an
	// offered rate (the lower middle one for an even count).
	Median Stats `json:"median"`
	// Throughput and P99 are the lowest and highest of the runs.
	Throughput Spread `json:"tasks_per_second"`
	P99        Spread `json:"p99_ms"`
}

// Spread is the range of a figure over the repeats.
type Spread struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Ratio is a throughput ratio of two loops, one per repeat (the two runs
// of a repeat ran in the same few seconds, so a change in the shared
// machine's load moves both alike).
type Ratio struct {
	// Median is the median of Each (the mean of the middle two for an
	// even count); Spread the lowest and highest.
	Median float64   `json:"median"`
	Spread Spread    `json:"spread"`
	Each   []float64 `json:"each"`
	// Floor is the lowest ratio the pipeline is meant to keep.
	Floor float64 `json:"floor"`
	// CPU is the median of the repeats' CPU-per-task ratios, the bare
	// loop's over the pipeline's: what the throughput ratio would be were
	// both loops bound by the CPU alone. On a shared machine it moves far
	// less than throughput, which also follows what the other tenants
	// leave to the process.
	CPU float64 `json:"cpu"`
}

// Met reports whether the median ratio reaches the floor.
func (r *Ratio) Met() bool { return r.Median >= r.Floor }

// ErrIncomplete is returned when a run ends without exactly one outcome
// per task.
var ErrIncomplete = errors.New("bench: not every task got exactly one outcome")

// Run performs the bench: per repeat every loop once, each on fresh
// streams of one server, all over the same task bytes.
func Run(ctx context.Context, o Options) (*Report, error) {
	o = o.withDefaults()
	env, cleanup, err := setup(o)
	if err != nil {
		return nil, err
	}
	defer cleanup()

	if o.Warmup > 0 {
		// Without a warm-up the first measured run pays for growing the
		// heap and the store, and runs up to twice as slow as later runs
		// of the same loop.
		w := o.unmeasured()
		w.Tasks, w.Rate = o.Warmup, 0
		if _, err := env.repeat(ctx, w, warmUpRun); err != nil {
			return nil, fmt.Errorf("bench: warm-up: %w", err)
		}
	}
	var peak *PeakSearch
	if o.PeakFraction > 0 {
		if peak, err = env.findPeak(ctx, o); err != nil {
			return nil, err
		}
		o.Rate = o.PeakFraction * peak.Sustained
	}
	rep := &Report{
		Machine: machine(), Server: env.server, Tasks: o.Tasks, Concurrency: o.Concurrency,
		Mix: o.Mix.String(), Rate: o.Rate, Peak: peak, Trace: o.Trace, Binary: o.Binary, Repeat: o.Repeat,
		WarmupTasks: o.Warmup,
	}
	if o.Latencies != nil {
		if _, err := io.WriteString(o.Latencies, latencyHeader); err != nil {
			return nil, fmt.Errorf("bench: latencies: %w", err)
		}
	}
	runs := map[string][]Stats{}
	for r := range o.Repeat {
		sts, err := env.repeat(ctx, o, r)
		if err != nil {
			return nil, err
		}
		for _, st := range sts {
			runs[st.Loop] = append(runs[st.Loop], st)
		}
		rep.Runs = append(rep.Runs, sts...)
	}
	rep.NATSErrors = env.natsErrors.Load()
	// At peak load the runs differ in throughput; at an offered rate they
	// all have the rate, and differ in latency.
	key := func(s Stats) float64 { return s.Throughput }
	if o.Rate > 0 {
		key = func(s Stats) float64 { return s.Latency.P99 }
	}
	for _, name := range []string{LoopBare, LoopStoreOff, LoopPipeline, LoopFlood} {
		if rs := runs[name]; len(rs) > 0 {
			rep.Loops = append(rep.Loops, summarize(rs, key))
		}
	}
	if o.Baseline && o.Rate <= 0 {
		rep.StoreOff = ratio(runs[LoopStoreOff], runs[LoopBare], FloorStoreOff)
		rep.StoreOn = ratio(runs[LoopPipeline], runs[LoopBare], FloorStoreOn)
	}
	if o.PreviewFlood > 0 && o.Rate <= 0 {
		rep.Flood = ratio(runs[LoopFlood], runs[LoopPipeline], FloorFlood)
	}
	return rep, nil
}

// repeat runs every loop once over fresh tasks, in an order rotated by r
// so that no loop always runs first (a warm-up, r < 0, in the order given).
func (e *env) repeat(ctx context.Context, o Options, r int) ([]Stats, error) {
	tasks, err := buildTasks(o.Tasks, o.Mix, o.Binary, runID())
	if err != nil {
		return nil, err
	}
	loops, err := e.loops(o, tasks)
	if err != nil {
		return nil, err
	}
	var sts []Stats
	for i := range loops {
		st, err := e.run(ctx, o, r, loops[(i+max(r, 0))%len(loops)], tasks)
		if err != nil {
			return nil, err
		}
		sts = append(sts, st)
	}
	return sts, nil
}

// loops are the loops a repeat runs over tasks: the pipeline, and with
// Baseline first the bare loop (answering with the pipeline's outcomes
// for these tasks' kinds) and the pipeline with the store off.
func (e *env) loops(o Options, tasks []task) ([]loop, error) {
	pipe := []loop{e.pipelineLoop(o, LoopPipeline, 0)}
	if o.PreviewFlood > 0 {
		pipe = append(pipe, e.floodLoop(o, tasks))
	}
	if !o.Baseline {
		return pipe, nil
	}
	storeOff := e.pipelineLoop(o, LoopStoreOff, pipeline.IdempotencyOff)
	tmpl, err := outcomeTemplates(e.src.Snapshot(), tasks, storeOff.cfg.Prefix)
	if err != nil {
		return nil, err
	}
	return append([]loop{bareLoop(storeOff.cfg, tmpl), storeOff}, pipe...), nil
}

// warmUpRun and peakSearchRun are the repeat indexes run is given for a
// warm-up run and a run of the peak search.
const (
	warmUpRun     = -1
	peakSearchRun = -2
)

// ratio is a[i]/b[i] of each repeat's runs' throughputs, against floor,
// and b[i]/a[i] of their CPU per task.
func ratio(a, b []Stats, floor float64) *Ratio {
	r := &Ratio{Floor: floor}
	var cpu []float64
	for i := range min(len(a), len(b)) {
		if b[i].Throughput > 0 {
			r.Each = append(r.Each, a[i].Throughput/b[i].Throughput)
		}
		if a[i].CPUPer1000 > 0 {
			cpu = append(cpu, b[i].CPUPer1000/a[i].CPUPer1000)
		}
	}
	r.Median, r.CPU = medianOf(r.Each), medianOf(cpu)
	if len(r.Each) > 0 {
		r.Spread = Spread{slices.Min(r.Each), slices.Max(r.Each)}
	}
	return r
}

// medianOf is the median of vs, the mean of the middle two for an even
// count (0 for none).
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summarize is one loop's report: the run with the median key (the lower
// middle one for an even count), reported whole so that its numbers
// belong together, and the spread of throughput and p99.
func summarize(runs []Stats, key func(Stats) float64) LoopReport {
	s := slices.Clone(runs)
	slices.SortFunc(s, func(a, b Stats) int { return cmp.Compare(key(a), key(b)) })
	lr := LoopReport{Median: s[(len(s)-1)/2]}
	lr.Throughput = Spread{s[0].Throughput, s[0].Throughput}
	lr.P99 = Spread{s[0].Latency.P99, s[0].Latency.P99}
	for _, st := range s {
		lr.Throughput = Spread{min(lr.Throughput.Min, st.Throughput), max(lr.Throughput.Max, st.Throughput)}
		lr.P99 = Spread{min(lr.P99.Min, st.Latency.P99), max(lr.P99.Max, st.Latency.P99)}
	}
	return lr
}

// env is what all runs share: the server, the connections, the config.
type env struct {
	server string // "embedded" or "external"
	url    string
	src    *discover.Source
	// workerJS is on the connection of the loop under test; driverJS
	// publishes tasks and watches the specs stream, on a connection of its
	// own so that the bench's traffic does not queue behind the worker's.
	workerJS, driverJS jetstream.JetStream
	// purge lets prepare delete the streams it finds: always on the
	// bench's own embedded server, with Options.Purge on an external one.
	purge      bool
	natsErrors atomic.Int64
	// epoch is the time base of Options.Latencies.
	epoch time.Time
}

func setup(o Options) (*env, func(), error) {
	var undo []func()
	cleanup := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	fail := func(err error) (*env, func(), error) {
		cleanup()
		return nil, nil, err
	}
	e := &env{server: "embedded", purge: true}
	if o.Latencies != nil {
		e.epoch = latencyEpoch()
	}

	// The workload is written for the generated root: expectedSubject is
	// what its tasks give there.
	root, err := os.MkdirTemp("", "rolecall-bench-root-")
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = os.RemoveAll(root) })
	if err := writeRoot(root); err != nil {
		return fail(fmt.Errorf("bench: write config root: %w", err))
	}
	// Never started: the root does not change while the bench runs.
	src, err := discover.NewSource(root, discover.Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		return fail(fmt.Errorf("bench: load config root %s: %w", root, err))
	}
	e.src = src

	e.url = o.URL
	if e.url == "" {
		embedded, stop, err := startEmbedded()
		if err != nil {
			return fail(err)
		}
		undo = append(undo, stop)
		e.url = embedded
	} else {
		e.server, e.purge = "external", o.Purge
	}
	var conns []*nats.Conn // the worker's, the driver's
	for _, name := range []string{"rolecall-bench-worker", "rolecall-bench-driver"} {
		nc, err := o.Connect(e.url, name)
		if err != nil {
			return fail(fmt.Errorf("bench: connect: %w", err))
		}
		undo = append(undo, nc.Close)
		prev := nc.ErrorHandler()
		nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
			e.natsErrors.Add(1)
			if prev != nil {
				prev(c, sub, err)
			}
		})
		conns = append(conns, nc)
	}
	if e.workerJS, err = jetstream.New(conns[0]); err != nil {
		return fail(err)
	}
	if e.driverJS, err = jetstream.New(conns[1], jetstream.WithPublishAsyncMaxPending(1024)); err != nil {
		return fail(err)
	}
	return e, cleanup, nil
}

// startEmbedded runs a JetStream server on a random loopback port with a
// store directory of its own, removed when the bench ends.
func startEmbedded() (string, func(), error) {
	dir, err := os.MkdirTemp("", "rolecall-bench-nats-")
	if err != nil {
		return "", nil, err
	}
	// A token of its own keeps out every other client on the machine: one
	// that reconnects forever to a port the kernel has since given this
	// server (another process's test) would otherwise publish into the
	// bench's streams.
	token := rand.Text()
	srv, err := server.NewServer(&server.Options{
		ServerName: "rolecall-bench", Host: "127.0.0.1", Port: -1, Authorization: token,
		JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("bench: embedded NATS: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		_ = os.RemoveAll(dir)
		return "", nil, errors.New("bench: embedded NATS did not start within 10s")
	}
	// rand.Text is base32: nothing in it needs escaping in a URL.
	return "nats://" + token + "@" + srv.Addr().String(), func() {
		srv.Shutdown()
		srv.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}, nil
}

// loop is one of the things measured.
type loop struct {
	name string
	cfg  pipeline.Config
	// start begins consuming with the loop's own connection; stop (its
	// return) cancels and waits for the loop to drain.
	start func(js jetstream.JetStream) (stop func() error, err error)
	// after, when set, adds what the loop itself measured to a run's
	// stats once it has stopped.
	after func(*Stats)
}

// pipelineLoop is pipeline.New + Run as `worker run` wires it, on the
// streams and consumer `worker run` would create (the worker's default
// configuration with the bench's concurrency), with the idempotency
// horizon given (0: the default). Every loop runs on such a configuration
// (the bare loop on the store-off one's), each run on fresh streams.
func (e *env) pipelineLoop(o Options, name string, horizon time.Duration) loop {
	cfg := pipeline.DefaultConfig()
	cfg.Concurrency = o.Concurrency
	cfg.Prefix = cmp.Or(o.Prefix, cfg.Prefix)
	cfg = cfg.WithDefaults()
	if horizon != 0 {
		cfg.IdempotencyHorizon = horizon
	}
	return loop{name: name, cfg: cfg, start: func(js jetstream.JetStream) (func() error, error) {
		var tp trace.TracerProvider
		var shutdown func(context.Context) error
		if o.Trace {
			p := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
				sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			tp, shutdown = p, p.Shutdown
		}
		// Metrics are on, as in `worker run`; nothing collects them.
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		inst, err := telemetry.NewInstruments(mp)
		if err != nil {
			return nil, err
		}
		w, err := pipeline.New(js, e.src, cfg, pipeline.Options{TracerProvider: tp, Instruments: inst,
			Propagator: telemetry.NewPropagator()})
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return func() error {
			cancel()
			err := <-done
			err = errors.Join(err, mp.Shutdown(context.Background()))
			if shutdown != nil {
				err = errors.Join(err, shutdown(context.Background()))
			}
			return err
		}, nil
	}}
}

// streamNames are the streams a loop's run may create: the idempotency
// store's too (a KV bucket is the stream KV_<bucket>), so that no run
// finds another's records.
func streamNames(cfg pipeline.Config) []string {
	return []string{cfg.TasksStream, cfg.SpecsStream, cfg.DeadLetter, "KV_" + cfg.OutcomesBucket}
}

// prepare leaves the loop's streams absent: deleted if found (refused on
// an external server without Purge, so a bench never eats a real queue).
func (e *env) prepare(ctx context.Context, cfg pipeline.Config) error {
	for _, name := range streamNames(cfg) {
		_, err := e.driverJS.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("bench: stream %s: %w", name, err)
		}
		if !e.purge {
			return fmt.Errorf("bench: stream %s exists on the server; pass --purge to let the bench delete it", name)
		}
		if err := e.driverJS.DeleteStream(ctx, name); err != nil {
			return fmt.Errorf("bench: delete stream %s: %w", name, err)
		}
	}
	return nil
}

func (e *env) drop(cfg pipeline.Config) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range streamNames(cfg) {
		_ = e.driverJS.DeleteStream(ctx, name)
	}
}

// run measures one loop over tasks.
func (e *env) run(ctx context.Context, o Options, repeat int, l loop, tasks []task) (Stats, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	cfg := l.cfg
	st := Stats{Loop: l.name, Tasks: len(tasks), Load1: load1()}
	if err := e.prepare(ctx, cfg); err != nil {
		return st, err
	}
	defer e.drop(cfg)
	if _, err := pipeline.Ensure(ctx, e.driverJS, cfg); err != nil {
		return st, fmt.Errorf("bench: streams for %s: %w", l.name, err)
	}
	specs, err := e.driverJS.Stream(ctx, cfg.SpecsStream)
	if err != nil {
		return st, err
	}
	label := fmt.Sprintf("%s (run %d/%d)", l.name, repeat+1, o.Repeat)
	switch {
	case repeat == warmUpRun:
		label = l.name + " (warm-up)"
	case repeat == peakSearchRun && o.Rate > 0:
		label = fmt.Sprintf("%s (peak search at %.0f tasks/s)", l.name, o.Rate)
	case repeat == peakSearchRun:
		label = l.name + " (peak search, preloaded)"
	}
	prog := newProgress(o.Progress, o.ProgressTTY, label, len(tasks))
	defer prog.done()

	seqs := make([]uint64, len(tasks))
	if o.Rate <= 0 {
		prog.phase("preloading")
		if err := e.publish(ctx, cfg.Prefix, tasks, seqs, 0); err != nil {
			return st, err
		}
	}

	runtime.GC()
	resetPeakRSS()
	// The profile and the loop are stopped when the measured window ends,
	// or on an early return: each once.
	stopProfile, err := startProfile(o.CPUProfile, l.name, repeat+1)
	if err != nil {
		return st, err
	}
	defer func() { _ = stopProfile() }()
	u0 := readUsage()
	start, err := l.start(e.workerJS)
	if err != nil {
		return st, fmt.Errorf("bench: start %s: %w", l.name, err)
	}
	stop := sync.OnceValue(start)
	defer func() { _ = stop() }()
	var published chan error // nil when preloaded
	if o.Rate > 0 {
		// Offered load starts when the loop is pulling, so that its start-up
		// is not measured as the first tasks' latency.
		if err := e.pulling(ctx, cfg); err != nil {
			return st, fmt.Errorf("bench: %s did not start pulling: %w", l.name, err)
		}
		published = make(chan error, 1)
		go func() { published <- e.publish(ctx, cfg.Prefix, tasks, seqs, o.Rate) }()
	}
	prog.phase("running")
	if err := e.await(ctx, specs, len(tasks), prog, published); err != nil {
		return st, fmt.Errorf("bench: %s: %w", l.name, err)
	}
	u1 := readUsage()
	if err := stopProfile(); err != nil {
		return st, err
	}
	st.PeakRSSBytes = peakRSS()
	if err := stop(); err != nil {
		return st, fmt.Errorf("bench: %s returned: %w", l.name, err)
	}
	if l.after != nil {
		l.after(&st)
	}

	n := float64(len(tasks))
	st.CPUPer1000 = (u1.cpu - u0.cpu).Seconds() / n * 1000
	st.SysCPUPer1000 = (u1.sys - u0.sys).Seconds() / n * 1000
	st.AllocsPerTask = float64(u1.allocs-u0.allocs) / n
	st.AllocBytesPerTask = float64(u1.allocBytes-u0.allocBytes) / n
	st.GCCycles = u1.gcCycles - u0.gcCycles
	st.GCMicrosPerTask = (u1.gcCPU - u0.gcCPU) / n * 1e6
	prog.phase("collecting")
	var rows []byte
	var row func(enqueued time.Time, latency time.Duration)
	if o.Latencies != nil {
		rows = make([]byte, 0, len(tasks)*32)
		row = func(enqueued time.Time, latency time.Duration) {
			rows = fmt.Appendf(rows, "%s,%d,%.3f,%.3f\n", l.name, repeat+1, millis(enqueued.Sub(e.epoch)), millis(latency))
		}
	}
	if err := e.collect(ctx, cfg, tasks, seqs, &st, row); err != nil {
		return st, err
	}
	if o.Latencies != nil {
		if _, err := o.Latencies.Write(rows); err != nil {
			return st, fmt.Errorf("bench: latencies: %w", err)
		}
	}
	return st, nil
}

// latencyHeader is the first line of Options.Latencies.
const latencyHeader = "loop,run,enqueued_ms,latency_ms\n"

// latencyEpoch forces a collection and returns when it began: the time
// base of Options.Latencies. GODEBUG=gctrace=1 prints each cycle's start
// from the runtime's start, which a program cannot read; a package-level
// time.Now() in this binary ran about 18 ms after it (the dependencies'
// initialization), more than a collection lasts here. The forced cycle is
// the one clock both share.
func latencyEpoch() time.Time {
	t := time.Now()
	runtime.GC()
	return t
}

// publish sends every task, at rate tasks/s when rate > 0, and records
// each one's stream sequence.
func (e *env) publish(ctx context.Context, prefix string, tasks []task, seqs []uint64, rate float64) error {
	futures := make([]jetstream.PubAckFuture, len(tasks))
	// Acknowledged futures are taken in order as the run goes, not at its
	// end, so that it does not keep every one of them (and through it every
	// message) alive to the end: like the tasks themselves (packTasks),
	// they would add to every collection's mark work in the process the
	// worker shares.
	next := 0
	take := func(upTo int, wait bool) error {
		for ; next < upTo; next++ {
			// Both channels hold their one value once it has come.
			ok, failed := futures[next].Ok(), futures[next].Err()
			if !wait && len(ok) == 0 && len(failed) == 0 {
				return nil
			}
			select {
			case ack := <-ok:
				seqs[next] = ack.Sequence
			case err := <-failed:
				return fmt.Errorf("bench: publish task %d: %w", next, err)
			case <-ctx.Done():
				return ctx.Err()
			}
			futures[next] = nil
		}
		return nil
	}
	start := time.Now()
	for i := range tasks {
		if rate > 0 {
			// Pace by schedule rather than by sleeping a fixed gap: a late
			// wake-up is caught up by the next tasks, so the offered rate
			// holds on average even with coarse timers.
			due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(due); d > 50*time.Microsecond {
				time.Sleep(d)
			}
		}
		t := &tasks[i]
		m := &nats.Msg{Subject: events.TasksSubject(prefix, t.kind.String()), Header: t.header(), Data: t.body}
		f, err := e.driverJS.PublishMsgAsync(m)
		for errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			// The server is behind (a busy machine): let the outstanding
			// publishes complete, then send this one again.
			select {
			case <-e.driverJS.PublishAsyncComplete():
			case <-time.After(time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
			f, err = e.driverJS.PublishMsgAsync(m)
		}
		if err != nil {
			return fmt.Errorf("bench: publish task %d: %w", i, err)
		}
		futures[i] = f
		if i%takeEvery == takeEvery-1 {
			if err := take(i+1, false); err != nil {
				return err
			}
		}
	}
	return take(len(tasks), true)
}

// takeEvery is how many publishes apart publish takes the acknowledged
// futures: often enough that few wait, seldom enough that looking costs
// nothing (each look takes the client's lock).
const takeEvery = 64

// pulling waits until the loop's consumer has a pull request waiting.
func (e *env) pulling(ctx context.Context, cfg pipeline.Config) error {
	c, err := e.driverJS.Consumer(ctx, cfg.TasksStream, cfg.Consumer)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumWaiting > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// await polls the specs stream until it holds want messages. published,
// when not nil, gives the result of a publisher running alongside. When
// ctx ends first, whichever call saw it, the run's timeout is
// ErrIncomplete with the count reached, and a cancellation ctx's error.
func (e *env) await(ctx context.Context, specs jetstream.Stream, want int, prog *progress, published <-chan error) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	got := 0
	ended := func(err error) error {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fmt.Errorf("%w: %d of %d outcomes after the timeout", ErrIncomplete, got, want)
		case ctx.Err() != nil:
			return ctx.Err()
		}
		return err
	}
	for {
		info, err := specs.Info(ctx)
		if err != nil {
			return ended(fmt.Errorf("specs stream info: %w", err))
		}
		got = int(info.State.Msgs)
		prog.update(got)
		if got >= want {
			if published != nil {
				// Every outcome is in, so every task was stored; wait for
				// the publisher to have recorded their sequences.
				return <-published
			}
			return nil
		}
		select {
		case err := <-published:
			if err != nil {
				return ended(err)
			}
			published = nil
		case <-ctx.Done():
			return ended(nil)
		case <-tick.C:
		}
	}
}

// collect reads the stream timestamps of every task and outcome and checks
// that each task has exactly one outcome on the subject its kind must give.
// row, when not nil, is given each task's enqueue time and latency.
func (e *env) collect(ctx context.Context, cfg pipeline.Config, tasks []task, seqs []uint64, st *Stats, row func(enqueued time.Time, latency time.Duration)) error {
	bySeq := make(map[uint64]int, len(tasks))
	byOut := make(map[string]int, len(tasks))
	taskBytes := 0
	for i, t := range tasks {
		bySeq[seqs[i]] = i
		byOut[t.outID] = i
		taskBytes += len(t.body)
	}
	st.TaskBytes = taskBytes / max(len(tasks), 1)

	enqueued := make([]time.Time, len(tasks))
	err := e.readStream(ctx, cfg.TasksStream, len(tasks), func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		i, ok := bySeq[md.Sequence.Stream]
		if !ok {
			return fmt.Errorf("task stream message %d was not published by this run", md.Sequence.Stream)
		}
		enqueued[i] = md.Timestamp
		return nil
	})
	if err != nil {
		return err
	}

	outcomes := make([]time.Time, len(tasks))
	lat := make([]time.Duration, 0, len(tasks))
	// The first few problems are enough to see what went wrong; the error
	// gives the counts.
	var problems []string
	problem := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	outBytes := 0
	err = e.readStream(ctx, cfg.SpecsStream, len(tasks), func(m jetstream.Msg, md *jetstream.MsgMetadata) error {
		id := m.Headers().Get(nats.MsgIdHdr)
		i, ok := byOut[id]
		switch {
		case !ok:
			problem("outcome %q on %s answers no task of this run", id, m.Subject())
			return nil
		case !outcomes[i].IsZero():
			problem("task %s has a second outcome", tasks[i].id)
			return nil
		}
		outcomes[i] = md.Timestamp
		st.Outcomes++
		if want := cfg.Prefix + expectedSubject[tasks[i].kind]; m.Subject() != want {
			problem("%s task %s: outcome on %s, want %s", tasks[i].kind, tasks[i].id, m.Subject(), want)
		}
		if strings.HasPrefix(m.Subject(), cfg.Prefix+".specs.resolved.") {
			st.Resolved++
		} else {
			st.Failed++
		}
		size, _ := strconv.Atoi(m.Headers().Get(outcomeSizeHeader))
		outBytes += size
		d := md.Timestamp.Sub(enqueued[i])
		lat = append(lat, d)
		if row != nil {
			row(enqueued[i], d)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range tasks {
		if outcomes[i].IsZero() {
			problem("task %s has no outcome", tasks[i].id)
		}
	}
	if len(problems) > 0 || st.Outcomes != len(tasks) {
		return fmt.Errorf("%w (%s: %d outcomes for %d tasks): %v", ErrIncomplete, st.Loop, st.Outcomes, len(tasks), problems)
	}
	st.Latency = latencyOf(lat)
	// Every task has its one outcome: the span is from the earliest to the latest.
	span := slices.MaxFunc(outcomes, time.Time.Compare).Sub(slices.MinFunc(outcomes, time.Time.Compare))
	if span > 0 && len(tasks) > 1 {
		st.Seconds = span.Seconds()
		st.Throughput = float64(len(tasks)-1) / span.Seconds()
	}
	st.OutcomeBytes = outBytes / max(st.Outcomes, 1)
	return nil
}

// outcomeSizeHeader is the header a headers-only consumer adds with the
// size of the body it left out.
const outcomeSizeHeader = "Nats-Msg-Size"

// readStream reads n messages of a stream, headers only (the metadata
// has all the bench needs), with an ordered consumer.
func (e *env) readStream(ctx context.Context, name string, n int, each func(jetstream.Msg, *jetstream.MsgMetadata) error) error {
	c, err := e.driverJS.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{HeadersOnly: true})
	if err != nil {
		return fmt.Errorf("bench: read %s: %w", name, err)
	}
	for read := 0; read < n; {
		batch, err := c.Fetch(min(n-read, 1000), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return fmt.Errorf("bench: read %s: %w", name, err)
		}
		got := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("bench: read %s: %w", name, err)
			}
			if err := each(m, md); err != nil {
				return err
			}
			got++
		}
		if err := batch.Error(); err != nil {
			return fmt.Errorf("bench: read %s: %w", name, err)
		}
		if got == 0 {
			return fmt.Errorf("bench: read %s: %d of %d messages", name, read, n)
		}
		read += got
	}
	return nil
}

// startProfile starts a CPU profile into the writer open gives for this
// run; the returned function stops it and closes the writer, once. With
// no open (warm-up and peak-search runs) there is no profile.
func startProfile(open func(string, int) (io.WriteCloser, error), loop string, repeat int) (func() error, error) {
	if open == nil {
		return func() error { return nil }, nil
	}
	f, err := open(loop, repeat)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	return sync.OnceValue(func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("bench: cpu profile: %w", err)
		}
		return nil
	}), nil
}
