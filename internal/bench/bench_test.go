package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
)

func ms(v ...int) []time.Duration {
	d := make([]time.Duration, len(v))
	for i, x := range v {
		d[i] = time.Duration(x) * time.Millisecond
	}
	return d
}

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	cases := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty is zero", nil, 50, 0},
		{"one value is every percentile", ms(7), 1, 7 * time.Millisecond},
		{"one value p100", ms(7), 100, 7 * time.Millisecond},
		{"median of three is the middle", ms(1, 2, 3), 50, 2 * time.Millisecond},
		{"median of four is the lower middle", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p50 of 1..100 is 50", ms(hundred...), 50, 50 * time.Millisecond},
		{"p90 of 1..100 is 90", ms(hundred...), 90, 90 * time.Millisecond},
		{"p99 of 1..100 is 99, not 100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is the maximum", ms(hundred...), 100, 100 * time.Millisecond},
		{"p99 of ten values is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p90 of ten values is the ninth", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 90, 9 * time.Millisecond},
		{"p91 of ten values rounds the rank up", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 91, 10 * time.Millisecond},
		{"a tiny p is the minimum", ms(4, 5, 6), 0.1, 4 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Percentile(c.sorted, c.p); got != c.want {
				t.Errorf("Percentile(%v, %v) = %v, want %v", c.sorted, c.p, got, c.want)
			}
		})
	}
}

func TestLatencyOfSorts(t *testing.T) {
	l := latencyOf(ms(30, 10, 20))
	if l.P50 != 20 || l.Max != 30 {
		t.Errorf("latencyOf = %+v, want p50 20 and max 30 (ms)", l)
	}
}

// TestReadUsageCountsGC: the runtime/metrics names the report's GC
// figures come from are ones the runtime knows (readUsage would panic on
// another) and moves: a forced collection shows in both.
func TestReadUsageCountsGC(t *testing.T) {
	u0 := readUsage()
	sink = make([]byte, 64<<20) // something for the collection to mark and sweep
	runtime.GC()
	sink = nil
	u1 := readUsage()
	if u1.gcCycles <= u0.gcCycles {
		t.Errorf("GC cycles %d then %d across runtime.GC", u0.gcCycles, u1.gcCycles)
	}
	if u1.gcCPU <= u0.gcCPU {
		t.Errorf("GC CPU %v then %v s across runtime.GC", u0.gcCPU, u1.gcCPU)
	}
	if u1.allocBytes-u0.allocBytes < 64<<20 {
		t.Errorf("%d bytes allocated, want the 64 MiB made in between", u1.allocBytes-u0.allocBytes)
	}
}

var sink []byte

// TestReadUsageCountsSystemCPU: kernel work moves the system CPU reading,
// and it stays a part of the total. (The kernel may account in ticks, so
// the test works until the reading moves, within a bound.)
func TestReadUsageCountsSystemCPU(t *testing.T) {
	u0 := readUsage()
	deadline := time.Now().Add(5 * time.Second)
	for {
		for range 1000 {
			if _, err := os.ReadFile("/proc/self/stat"); err != nil {
				t.Skipf("no /proc to make kernel work with: %v", err)
			}
		}
		u1 := readUsage()
		if u1.sys < u0.sys || u1.sys > u1.cpu {
			t.Fatalf("system CPU %v then %v, total %v: want a growing part of the total", u0.sys, u1.sys, u1.cpu)
		}
		if u1.sys > u0.sys {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("system CPU still %v after 5 s of reading /proc", u1.sys)
		}
	}
}

func TestParseMix(t *testing.T) {
	cases := []struct {
		in      string
		want    Mix
		wantErr string
	}{
		{in: "casts=5,overlay=2,replacement=2,failing=1", want: Mix{5, 2, 2, 1}},
		{in: "failing=3", want: Mix{0, 0, 0, 3}},
		{in: " casts=1 , overlay=0 ", want: Mix{1, 0, 0, 0}},
		{in: "casts=1,", want: Mix{1, 0, 0, 0}},
		{in: "cast=1", wantErr: `unknown kind "cast"`},
		{in: "casts", wantErr: "want kind=weight"},
		{in: "casts=-1", wantErr: "non-negative integer"},
		{in: "casts=x", wantErr: "non-negative integer"},
		{in: "casts=1,casts=2", wantErr: "given twice"},
		{in: "casts=0", wantErr: "at least one weight"},
		{in: "", wantErr: "at least one weight"},
	}
	for _, c := range cases {
		got, err := ParseMix(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseMix(%q) error %v, want one containing %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseMix(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if got, err := ParseMix(DefaultMix.String()); err != nil || got != DefaultMix {
		t.Errorf("ParseMix(DefaultMix.String()) = %v, %v; want DefaultMix", got, err)
	}
}

func TestMixSequence(t *testing.T) {
	seq := DefaultMix.sequence()
	if len(seq) != DefaultMix.total() {
		t.Fatalf("sequence has %d kinds, want %d", len(seq), DefaultMix.total())
	}
	var count Mix
	for i, k := range seq {
		count[k]++
		// Interleaved, not grouped: the heaviest kind never runs three in a
		// row, so a run of a few tasks still sees every kind.
		if i >= 2 && seq[i-2] == k && seq[i-1] == k {
			t.Errorf("kind %s three times in a row at %d: %v", k, i, seq)
		}
	}
	if count != DefaultMix {
		t.Errorf("kind counts %v, want the weights %v", count, DefaultMix)
	}
}

// TestRunEveryTaskGetsAnOutcome is the harness end to end, small: every
// task of every kind is answered exactly once on the subject its kind
// must give, in every loop, preloaded and at an offered rate.
func TestRunEveryTaskGetsAnOutcome(t *testing.T) {
	cases := []struct {
		name     string
		o        Options
		profiled bool // with a CPUProfile
	}{
		{"preloaded with baseline, three repeats", Options{Tasks: 200, Concurrency: 8, Baseline: true}, false},
		{"warmed up, with baseline, profiled", Options{Tasks: 100, Concurrency: 2, Baseline: true, Warmup: 50, Repeat: 1}, true},
		{"binary mode at an offered rate", Options{Tasks: 100, Concurrency: 2, Rate: 2000, Binary: true, Repeat: 1}, false},
		{"traced, failures only", Options{Tasks: 50, Concurrency: 1, Trace: true, Mix: Mix{0, 0, 0, 1}, Repeat: 1}, false},
		{"at half of the sustained peak, with baseline, profiled", Options{Tasks: 200, Concurrency: 4, PeakFraction: 0.5, Baseline: true, Repeat: 1}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var prog, lat strings.Builder
			c.o.Progress, c.o.Latencies = &prog, &lat
			var profiles []*profileBuffer // every profile asked for
			if c.profiled {
				c.o.CPUProfile = func(loop string, repeat int) (io.WriteCloser, error) {
					b := &profileBuffer{name: fmt.Sprintf("%s.%d", loop, repeat)}
					profiles = append(profiles, b)
					return b, nil
				}
			}
			rep, err := Run(context.Background(), c.o)
			if err != nil {
				t.Fatal(err)
			}
			loops := []string{LoopPipeline}
			if c.o.Baseline {
				loops = []string{LoopBare, LoopStoreOff, LoopPipeline}
			}
			if c.profiled {
				// One profile per measured run, none for the warm-up runs
				// or the peak search's (which would ask for pipeline.1
				// again).
				var names, want []string
				for _, b := range profiles {
					names = append(names, b.name)
					if !b.closed || !bytes.HasPrefix(b.Bytes(), []byte{0x1f, 0x8b}) {
						t.Errorf("profile %s: closed %v, %d bytes: want a closed gzip'd pprof profile", b.name, b.closed, b.Len())
					}
				}
				for _, l := range loops {
					want = append(want, l+".1")
				}
				slices.Sort(names)
				slices.Sort(want)
				if !slices.Equal(names, want) {
					t.Errorf("profiles asked for %v, want %v", names, want)
				}
			}
			for _, l := range []string{LoopBare, LoopStoreOff, LoopPipeline} {
				line := fmt.Sprintf("%s (warm-up): preloading %d tasks", l, c.o.Warmup)
				if warmed := strings.Contains(prog.String(), line); warmed != (c.o.Warmup > 0 && slices.Contains(loops, l)) {
					t.Errorf("progress has %q: %v; want it only for a loop that is measured, with a warm-up asked for:\n%s", line, warmed, prog.String())
				}
			}
			mix := c.o.Mix
			if mix.total() == 0 {
				mix = DefaultMix
			}
			wantFailed := 0
			for i := range c.o.Tasks {
				if mix.sequence()[i%mix.total()] == KindFailing {
					wantFailed++
				}
			}
			if c.o.PeakFraction > 0 {
				// The search's runs say so, and are not counted as runs.
				for _, line := range []string{"pipeline (peak search, preloaded): preloading", "pipeline (peak search at "} {
					if !strings.Contains(prog.String(), line) {
						t.Errorf("no progress line %q:\n%s", line, prog.String())
					}
				}
				if n := strings.Count(prog.String(), "pipeline (run 1/1): preloading"); n != 0 {
					t.Errorf("%d preloaded runs labelled run 1/1, want none: the measured runs are at an offered rate", n)
				}
				p := rep.Peak
				if p == nil || len(p.Steps) != peakSteps || p.Sustained <= 0 || p.Sustained > p.Preloaded {
					t.Fatalf("peak search %+v: want %d steps and a sustained rate in (0, preloaded]", p, peakSteps)
				}
				if rep.Rate != c.o.PeakFraction*p.Sustained {
					t.Errorf("measured at %v tasks/s, want %v of the sustained %v", rep.Rate, c.o.PeakFraction, p.Sustained)
				}
				kept := false
				for _, st := range p.Steps {
					kept = kept || (st.Rate == p.Sustained && st.Kept)
				}
				if !kept {
					t.Errorf("sustained rate %v is not a step that kept up: %+v", p.Sustained, p.Steps)
				}
			}
			if rep.WarmupTasks != c.o.Warmup {
				t.Errorf("report says %d warm-up tasks, want %d", rep.WarmupTasks, c.o.Warmup)
			}
			// Every loop once per repeat, rotated; a warm-up run is not
			// reported as a run.
			repeat := max(c.o.Repeat, 1)
			if c.o.Repeat == 0 {
				repeat = 3
			}
			var order, want []string
			for _, r := range rep.Runs {
				order = append(order, r.Loop)
			}
			for r := range repeat {
				for i := range loops {
					want = append(want, loops[(i+r)%len(loops)])
				}
			}
			if !slices.Equal(order, want) {
				t.Errorf("runs %v, want %v", order, want)
			}
			// Nor is a warm-up or peak-search run's latency written.
			if n, want := strings.Count(lat.String(), "\n"), 1+c.o.Tasks*len(rep.Runs); n != want {
				t.Errorf("latencies: %d lines, want a header and one per task of the %d runs reported (%d)", n, len(rep.Runs), want)
			}
			if len(rep.Loops) != len(loops) {
				t.Fatalf("%d loops reported, want %v", len(rep.Loops), loops)
			}
			for i, lr := range rep.Loops {
				s := lr.Median
				if s.Loop != loops[i] {
					t.Errorf("loop %d is %s, want %s", i, s.Loop, loops[i])
				}
				if s.Tasks != c.o.Tasks || s.Outcomes != c.o.Tasks {
					t.Errorf("%s: %d outcomes for %d tasks, want %d", s.Loop, s.Outcomes, s.Tasks, c.o.Tasks)
				}
				if s.Failed != wantFailed || s.Resolved != c.o.Tasks-wantFailed {
					t.Errorf("%s: %d resolved, %d failed; want %d and %d", s.Loop, s.Resolved, s.Failed, c.o.Tasks-wantFailed, wantFailed)
				}
				if s.Latency.Max < s.Latency.P99 || s.Latency.P99 < s.Latency.P50 || s.Latency.P50 <= 0 {
					t.Errorf("%s: latency percentiles out of order: %+v", s.Loop, s.Latency)
				}
				if s.OutcomeBytes <= 0 || s.TaskBytes <= 0 {
					t.Errorf("%s: message sizes %d/%d", s.Loop, s.TaskBytes, s.OutcomeBytes)
				}
				if lr.Throughput.Min > s.Throughput || lr.Throughput.Max < s.Throughput || lr.P99.Min > s.Latency.P99 || lr.P99.Max < s.Latency.P99 {
					t.Errorf("%s: spread %+v / %+v does not hold the median run's %v / %v", s.Loop, lr.Throughput, lr.P99, s.Throughput, s.Latency.P99)
				}
				// Within a few bytes: the bare loop sends each kind's first
				// outcome; ids of one run have one length.
				if d := s.OutcomeBytes - rep.Loop(LoopPipeline).Median.OutcomeBytes; d > 8 || d < -8 {
					t.Errorf("%s outcomes %d B, the pipeline's %d B: not the same payload", s.Loop, s.OutcomeBytes, rep.Loop(LoopPipeline).Median.OutcomeBytes)
				}
			}
			withRatios := c.o.Baseline && c.o.Rate == 0 && c.o.PeakFraction == 0
			if (rep.StoreOff != nil) != withRatios || (rep.StoreOn != nil) != withRatios {
				t.Fatalf("ratios %+v, %+v; want them exactly with a baseline at peak load", rep.StoreOff, rep.StoreOn)
			}
			if withRatios {
				for _, r := range []*Ratio{rep.StoreOff, rep.StoreOn} {
					if len(r.Each) != repeat || r.Median <= 0 || r.Spread.Min > r.Median || r.Spread.Max < r.Median {
						t.Errorf("ratio %+v: want one per repeat, the median inside the spread", r)
					}
				}
				if rep.StoreOff.Floor != FloorStoreOff || rep.StoreOn.Floor != FloorStoreOn {
					t.Errorf("floors %v and %v", rep.StoreOff.Floor, rep.StoreOn.Floor)
				}
			}
		})
	}
}

// TestLoops: the bare loop and the pipeline with the store off run
// without the idempotency store, the pipeline as deployed with it.
func TestLoops(t *testing.T) {
	e := &env{src: testSource(t)}
	tasks, err := buildTasks(10, DefaultMix, false, "loops")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Baseline: true}.withDefaults()
	loops, err := e.loops(o, tasks)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range loops {
		got = append(got, fmt.Sprintf("%s store=%v concurrency=%d", l.name, l.cfg.Idempotent(), l.cfg.Concurrency))
	}
	c := pipeline.DefaultConfig().Concurrency
	want := []string{
		fmt.Sprintf("bare store=false concurrency=%d", c),
		fmt.Sprintf("pipeline-store-off store=false concurrency=%d", c),
		fmt.Sprintf("pipeline store=true concurrency=%d", c),
	}
	if !slices.Equal(got, want) {
		t.Errorf("loops %v, want %v", got, want)
	}
	if h := loops[2].cfg.IdempotencyHorizon; h != pipeline.DefaultIdempotencyHorizon {
		t.Errorf("pipeline horizon %v, want the default %v", h, pipeline.DefaultIdempotencyHorizon)
	}
}

// profileBuffer is a CPU profile's writer in memory.
type profileBuffer struct {
	bytes.Buffer
	name   string // loop.repeat
	closed bool
}

func (b *profileBuffer) Close() error {
	b.closed = true
	return nil
}

// TestRunRefusesForeignStreams: on a server it did not start, the bench
// never deletes a stream it finds unless told to.
func TestRunRefusesForeignStreams(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ROLECALL_TASKS", Subjects: []string{"rolecall.tasks.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), "rolecall.tasks.real", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{Tasks: 10, URL: srv.ClientURL()})
	if err == nil || !strings.Contains(err.Error(), "--purge") {
		t.Fatalf("Run against an existing stream: %v, want a refusal naming --purge", err)
	}
	s, err := js.Stream(context.Background(), "ROLECALL_TASKS")
	if err != nil {
		t.Fatalf("the stream is gone: %v", err)
	}
	if info, err := s.Info(context.Background()); err != nil || info.State.Msgs != 1 {
		t.Errorf("stream after the refusal: %+v, %v; want its one message", info, err)
	}

	rep, err := Run(context.Background(), Options{Tasks: 10, URL: srv.ClientURL(), Purge: true,
		Connect: func(url, name string) (*nats.Conn, error) { return nats.Connect(url, nats.Name(name)) }})
	if err != nil {
		t.Fatalf("with Purge: %v", err)
	}
	if rep.Loop(LoopPipeline).Median.Outcomes != 10 || rep.Server != "external" {
		t.Errorf("with Purge: %d outcomes on a %s server, want 10 on external", rep.Loop(LoopPipeline).Median.Outcomes, rep.Server)
	}
	for _, name := range []string{"ROLECALL_TASKS", "ROLECALL_SPECS", "KV_ROLECALL_OUTCOMES"} {
		if _, err := js.Stream(context.Background(), name); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("the bench left its stream %s behind: %v", name, err)
		}
	}
}

// TestLatenciesCSV: Options.Latencies gets a header and one row per task
// of each measured run, none of the warm-up's, in the order the runs
// ran, and each run's rows give back the percentiles its Stats report.
func TestLatenciesCSV(t *testing.T) {
	var out bytes.Buffer
	o := Options{Tasks: 100, Concurrency: 2, Baseline: true, Repeat: 2, Warmup: 50, Latencies: &out}
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) == 0 || strings.Join(records[0], ",")+"\n" != latencyHeader {
		t.Fatalf("first record %v, want the header %q", records[:min(len(records), 1)], latencyHeader)
	}
	type run struct {
		loop, n          string
		lat              []time.Duration
		first, last, end float64 // enqueued_ms: earliest, latest; latest outcome
	}
	var runs []*run
	for _, r := range records[1:] {
		if len(r) != 4 {
			t.Fatalf("record %v: want 4 fields", r)
		}
		enq, err1 := strconv.ParseFloat(r[2], 64)
		lat, err2 := strconv.ParseFloat(r[3], 64)
		if err1 != nil || err2 != nil || enq <= 0 || lat < 0 {
			t.Fatalf("record %v: want a positive enqueue time and a latency not negative", r)
		}
		if len(runs) == 0 || runs[len(runs)-1].loop != r[0] || runs[len(runs)-1].n != r[1] {
			runs = append(runs, &run{loop: r[0], n: r[1], first: enq})
		}
		cur := runs[len(runs)-1]
		cur.lat = append(cur.lat, time.Duration(math.Round(lat*1e3))*time.Microsecond)
		cur.first, cur.last, cur.end = min(cur.first, enq), max(cur.last, enq), max(cur.end, enq+lat)
	}
	if len(runs) != len(rep.Runs) {
		t.Fatalf("%d runs in the CSV, %d reported", len(runs), len(rep.Runs))
	}
	for i, r := range runs {
		st := rep.Runs[i]
		if r.loop != st.Loop || r.n != strconv.Itoa(i/3+1) || len(r.lat) != o.Tasks {
			t.Errorf("CSV run %d: %s run %s with %d rows; reported %s, want %d rows", i, r.loop, r.n, len(r.lat), st.Loop, o.Tasks)
		}
		slices.Sort(r.lat)
		// The CSV keeps microseconds.
		if got := latencyOf(r.lat); math.Abs(got.P99-st.Latency.P99) > 0.001 || math.Abs(got.Max-st.Latency.Max) > 0.001 {
			t.Errorf("%s run %s: CSV gives p99 %v, max %v; the report %v, %v", r.loop, r.n, got.P99, got.Max, st.Latency.P99, st.Latency.Max)
		}
		if i > 0 && r.first < runs[i-1].end {
			t.Errorf("%s run %s's first task stored at %v ms, before the previous run's last outcome (%v ms)", r.loop, r.n, r.first, runs[i-1].end)
		}
	}
}

// TestGCSettings: the report states the collector's settings as the
// process runs with them.
func TestGCSettings(t *testing.T) {
	cases := []struct {
		percent   int
		limit     int64
		wantGOGC  string
		wantLimit uint64
	}{
		{100, math.MaxInt64, "100", 0},
		{400, 1 << 30, "400", 1 << 30},
		{-1, 8 << 30, "off", 8 << 30},
	}
	oldPercent := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})
	for _, c := range cases {
		debug.SetGCPercent(c.percent)
		debug.SetMemoryLimit(c.limit)
		if gogc, limit := gcSettings(); gogc != c.wantGOGC || limit != c.wantLimit {
			t.Errorf("GOGC %d, limit %d: reported %q, %d; want %q, %d", c.percent, c.limit, gogc, limit, c.wantGOGC, c.wantLimit)
		}
	}
}

// TestMedianOf: the middle value, or the mean of the middle two; the
// ratio of alternating pairs is then not taken from one order's side.
func TestMedianOf(t *testing.T) {
	cases := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{0.8}, 0.8},
		{[]float64{0.9, 0.7, 0.8}, 0.8},
		{[]float64{0.9, 0.7}, 0.8},
		{[]float64{0.90, 0.80, 0.92, 0.78, 0.88, 0.82}, 0.85},
	}
	for _, c := range cases {
		if got := medianOf(c.in); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("medianOf(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestRatio: one ratio per repeat, of the runs of that repeat.
func TestRatio(t *testing.T) {
	runs := func(tps ...float64) []Stats {
		var s []Stats
		for _, v := range tps {
			s = append(s, Stats{Throughput: v, CPUPer1000: 1 / v})
		}
		return s
	}
	r := ratio(runs(80, 60, 90), runs(100, 100, 100), 0.75)
	if !slices.Equal(r.Each, []float64{0.8, 0.6, 0.9}) || r.Median != 0.8 || r.Spread != (Spread{0.6, 0.9}) || !r.Met() {
		t.Errorf("ratio %+v, met %v: want 0.8, 0.6, 0.9, median 0.8 over the floor 0.75", r, r.Met())
	}
	if math.Abs(r.CPU-0.8) > 1e-9 {
		t.Errorf("CPU ratio %v, want 0.8: the bare loop's CPU per task over the pipeline's", r.CPU)
	}
	if r := ratio(runs(70), runs(100), 0.75); r.Met() {
		t.Errorf("ratio %+v meets the floor 0.75", r)
	}
}

// TestAwaitEndsWithTheCount: a run that times out is ErrIncomplete with
// the outcomes it got, whichever call saw the deadline first (the specs
// stream's Info request, most often); a cancellation is the context's.
func TestAwaitEndsWithTheCount(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	specs, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "SPECS", Subjects: []string{"specs.>"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{}
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err = e.await(expired, specs, 5, newProgress(nil, false, "", 5), nil)
	if !errors.Is(err, ErrIncomplete) || !strings.Contains(err.Error(), "0 of 5 outcomes after the timeout") {
		t.Errorf("await past its deadline: %v, want ErrIncomplete with 0 of 5 outcomes", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.await(canceled, specs, 5, newProgress(nil, false, "", 5), nil); !errors.Is(err, context.Canceled) || errors.Is(err, ErrIncomplete) {
		t.Errorf("await cancelled: %v, want context.Canceled", err)
	}
}

// TestRunPrefix: Options.Prefix (worker bench --prefix) is the prefix of
// every subject the bench's tasks and outcomes go on, as in worker run
// --prefix; it was ignored, and a server whose permissions allow only a
// deployment's own prefix refused the bench.
func TestRunPrefix(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	var acme, other atomic.Int64
	for subject, n := range map[string]*atomic.Int64{"acme.>": &acme, "rolecall.>": &other} {
		if _, err := nc.Subscribe(subject, func(*nats.Msg) { n.Add(1) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), Options{Tasks: 10, Concurrency: 2, Repeat: 1, URL: srv.ClientURL(), Prefix: "acme"}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Each task and its outcome, at least.
	if acme.Load() < 20 || other.Load() != 0 {
		t.Errorf("%d messages on acme.>, %d on rolecall.>; want the 10 tasks and 10 outcomes on acme.> and none on rolecall.>", acme.Load(), other.Load())
	}
}

// TestCollectBoundsProblems: a run whose outcomes are all wrong is
// ErrIncomplete naming the first ten problems, not one per task.
func TestCollectBoundsProblems(t *testing.T) {
	srv := natstest.Start(t)
	js, err := jetstream.New(natstest.Connect(t, srv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := pipeline.DefaultConfig().WithDefaults()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	e := &env{driverJS: js}
	tasks, err := buildTasks(30, DefaultMix, false, runID())
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]uint64, len(tasks))
	if err := e.publish(ctx, cfg.Prefix, tasks, seqs, 0); err != nil {
		t.Fatal(err)
	}
	for i := range tasks {
		m := &nats.Msg{Subject: cfg.Prefix + ".specs.resolved.architect", Header: nats.Header{nats.MsgIdHdr: {fmt.Sprintf("foreign-%d", i)}}}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	err = e.collect(ctx, cfg, tasks, seqs, &Stats{Loop: "test"}, nil)
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("collect: %v, want ErrIncomplete", err)
	}
	if n := strings.Count(err.Error(), "answers no task"); n != 10 || !strings.Contains(err.Error(), "0 outcomes for 30 tasks") {
		t.Errorf("%d problems named in %q; want 10 and the counts", n, err)
	}
}
