package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/internal/bench"
)

// TestBenchSmoke is what CI runs as `worker bench --tasks 2000`, smaller,
// with --baseline: the command completes, every task has its outcome in
// every loop, and the JSON report says so.
func TestBenchSmoke(t *testing.T) {
	stdout, stderr := runBench(t, "--tasks", "200", "--concurrency", "8", "--baseline", "--json")
	var rep bench.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, stdout.String())
	}
	for _, l := range []string{bench.LoopBare, bench.LoopStoreOff, bench.LoopPipeline} {
		if lr := rep.Loop(l); lr == nil || lr.Median.Outcomes != 200 {
			t.Errorf("%s: %+v, want 200 outcomes", l, lr)
		}
	}
	if rep.StoreOff == nil || rep.StoreOn == nil || rep.StoreOff.Median <= 0 || rep.StoreOn.Median <= 0 {
		t.Errorf("ratios %+v and %+v, want both", rep.StoreOff, rep.StoreOn)
	}
	// Three repeats by default, a ratio of each, the order rotated.
	if rep.Repeat != 3 || len(rep.StoreOn.Each) != 3 || len(rep.Runs) != 9 {
		t.Errorf("repeat %d, %d ratios, %d runs; want 3, 3 and 9 by default", rep.Repeat, len(rep.StoreOn.Each), len(rep.Runs))
	}
	for _, line := range []string{"pipeline (run 1/3)", "bare (run 3/3)", "pipeline-store-off (warm-up)"} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("no progress line %q on stderr:\n%s", line, stderr.String())
		}
	}
}

// runBench runs `worker bench args...`, fails the test unless it exits 0,
// and returns what it printed.
func runBench(t *testing.T, args ...string) (stdout, stderr *bytes.Buffer) {
	t.Helper()
	stdout, stderr = new(bytes.Buffer), new(bytes.Buffer)
	if code := run(append([]string{"bench"}, args...), nil, stdout, stderr); code != 0 {
		t.Fatalf("bench %v: exit %d; stderr:\n%s", args, code, stderr.String())
	}
	return stdout, stderr
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--mix", "casts=1,bogus=2"},
		{"bench", "--tasks", "0"},
		{"bench", "--rate", "-1"},
		// The = form reaches the command's own checks (kong refuses
		// "--rate -1" itself); NaN and Inf pass a plain < 0 check. A small
		// run, so that one the checks let through ends quickly.
		{"bench", "--rate=-1", "--tasks", "1", "--warmup", "0", "--repeat", "1"},
		{"bench", "--rate=NaN", "--tasks", "1", "--warmup", "0", "--repeat", "1", "--timeout", "2s"},
		{"bench", "--rate=+Inf", "--tasks", "1", "--warmup", "0", "--repeat", "1", "--json"},
		{"bench", "--preview-flood=NaN", "--tasks", "1", "--warmup", "0", "--repeat", "1"},
		{"bench", "--preview-flood=+Inf", "--tasks", "1", "--warmup", "0", "--repeat", "1", "--json"},
		{"bench", "--peak-fraction=NaN", "--tasks", "1", "--warmup", "0", "--repeat", "1"},
		{"bench", "--timeout=0s", "--tasks", "1", "--warmup", "0", "--repeat", "1"},
		{"bench", "--distinct-configs"},
		{"bench", "--max-in-flight", "8"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, nil, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage); stderr: %s", args, code, stderr.String())
		}
	}
}

func TestBenchText(t *testing.T) {
	stdout, _ := runBench(t, "--tasks", "40", "--concurrency", "1", "--baseline", "--repeat", "1")
	for _, want := range []string{"tasks/s", "p99 ms", "of it sys", "GC µs/task", "GOGC ", "concurrency 1,", "bare", "pipeline-store-off", "pipeline/bare, store off: ", "pipeline/bare, store on : ", "floor 0.75", "floor 0.60", "by CPU per task", "36 resolved, 4 failed, every task exactly one"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestBenchCPUProfiles: --cpuprofile PREFIX writes one gzip'd pprof profile
// per measured run, named PREFIX.<loop>.<repeat>, and none for the warm-up.
func TestBenchCPUProfiles(t *testing.T) {
	prefix := filepath.Join(t.TempDir(), "cpu")
	runBench(t, "--tasks", "100", "--concurrency", "2", "--baseline", "--repeat", "2", "--cpuprofile", prefix)
	got, err := filepath.Glob(prefix + ".*")
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	slices.Sort(got)
	if want := []string{"cpu.bare.1", "cpu.bare.2", "cpu.pipeline-store-off.1", "cpu.pipeline-store-off.2", "cpu.pipeline.1", "cpu.pipeline.2"}; !slices.Equal(got, want) {
		t.Fatalf("profiles %v, want %v", got, want)
	}
	for _, name := range got {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(prefix), name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s is not a gzip'd profile (%d bytes)", name, len(b))
		}
	}
}

// TestBenchLatencyCSV: --latency-csv FILE holds the header and one row per
// task of each measured run.
func TestBenchLatencyCSV(t *testing.T) {
	file := filepath.Join(t.TempDir(), "lat.csv")
	runBench(t, "--tasks", "60", "--concurrency", "2", "--baseline", "--repeat", "1", "--latency-csv", file)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 1+3*60 || lines[0] != "loop,run,enqueued_ms,latency_ms" {
		t.Fatalf("%d lines starting %q: want the header and 180 rows", len(lines), lines[0])
	}
	loops := map[string]int{}
	for _, l := range lines[1:] {
		loops[strings.SplitN(l, ",", 2)[0]]++
	}
	if loops["pipeline"] != 60 || loops["pipeline-store-off"] != 60 || loops["bare"] != 60 {
		t.Errorf("rows per loop %v, want 60 of each", loops)
	}
}

// TestBenchIgnoresRoot: the bench answers its tasks from the root it
// generates, whatever ROLECALL_ROOT (which the worker image sets) or
// --root name: against a deployment's root (examples/ here) every task
// failed with pack_not_found and the run was an error.
func TestBenchIgnoresRoot(t *testing.T) {
	t.Setenv("ROLECALL_ROOT", "../../examples")
	stdout, _ := runBench(t, "--tasks", "20", "--concurrency", "2", "--warmup", "0", "--repeat", "1")
	if want := "18 resolved, 2 failed, every task exactly one"; !strings.Contains(stdout.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, stdout.String())
	}
	runBench(t, "--root", "../../examples", "--tasks", "20", "--concurrency", "2", "--warmup", "0", "--repeat", "1")
}
