package discover_test

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/internal/bigroot"
)

// The scale benchmarks run on a generated root of 2,000 roles, 500 packs
// and 10,000 profiles (bigroot.Full), written to a temporary directory
// and never committed. Their figures are in docs/PERFORMANCE.md. Run:
//
//	go test ./discover -run '^$' -bench 'Big' -benchtime 20x

// bigSource writes the large root with every file an hour old (as in a
// running deployment) and loads it.
func bigSource(b *testing.B, opts discover.Options) (string, *discover.Source) {
	b.Helper()
	dir := b.TempDir()
	if err := bigroot.Write(dir, bigroot.Full); err != nil {
		b.Fatal(err)
	}
	ageFiles(b, dir, -time.Hour)
	src, err := discover.NewSource(dir, opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	return dir, src
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// editProfile rewrites profile i as generation gen. old gives it an old,
// distinct mtime (as if edited long ago), so the benchmark measures the
// reload of one changed file, not the 2 s "racily clean" re-reads that
// follow a fresh edit.
func editProfile(b *testing.B, dir string, i, gen int, old bool) {
	b.Helper()
	p := filepath.Join(dir, "agents", bigroot.ProfileName(i)+".md")
	tmp := filepath.Join(dir, "agents", ".tmp")
	if err := os.WriteFile(tmp, []byte(bigroot.Profile(i, bigroot.Full.Roles, gen)), 0o644); err != nil {
		b.Fatal(err)
	}
	if old {
		when := time.Now().Add(-time.Hour + time.Duration(gen)*time.Millisecond)
		if err := os.Chtimes(tmp, when, when); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.Rename(tmp, p); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkBigSweep is one check of the unchanged large root: what the
// watcher spends every --reload-interval when nothing changed.
func BenchmarkBigSweep(b *testing.B) {
	_, src := bigSource(b, discover.Options{})
	first := src.Snapshot()
	cpu := cpuTime()
	for b.Loop() {
		if changed, err := src.Reload(); changed || err != nil {
			b.Fatalf("unchanged root: changed %v, err %v", changed, err)
		}
	}
	if src.Snapshot() != first {
		b.Fatal("the snapshot changed")
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N)/1000, "cpu-ms/op")
}

// BenchmarkBigReloadOneEdit is a check that finds one edited profile and
// reloads: the sweep, then the incremental load. cpu-ms/op is the
// process's CPU time per reload (GC included); reads and decodes count
// the files that were not served from the cache.
func BenchmarkBigReloadOneEdit(b *testing.B) {
	dir, src := bigSource(b, discover.Options{})
	gen := 0
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		gen++
		editProfile(b, dir, gen%bigroot.Full.Profiles, gen, true)
		c0 := cpuTime()
		b.StartTimer()
		if changed, err := src.Reload(); !changed || err != nil {
			b.Fatalf("edit %d: changed %v, err %v", gen, changed, err)
		}
		b.StopTimer()
		cpu += cpuTime() - c0
		b.StartTimer()
	}
	reads, decodes := discover.CacheCounts(src)
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/op")
	b.ReportMetric(float64(reads), "reads/op")
	b.ReportMetric(float64(decodes), "decodes/op")
}

// BenchmarkBigFullLoad is a cold Load of the large root, for comparison.
func BenchmarkBigFullLoad(b *testing.B) {
	dir, _ := bigSource(b, discover.Options{})
	cpu := cpuTime()
	for b.Loop() {
		if _, err := discover.Load(dir, discover.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/float64(b.N)/1000, "cpu-ms/op")
}

// BenchmarkBigEditVisible edits one profile the ordinary way (a fresh
// mtime) under a running watcher with its defaults and measures how long
// until Snapshot serves it (p50 and max over the edits) and the process's
// CPU per edit: the file events, the sweep of what they name and the
// reload, GC included. BenchmarkBigEditVisiblePollOnly is the same with
// the sweep alone. A fresh mtime keeps the edited files "racily clean"
// for 2 s, so each reload also reads the files edited in the 2 s before;
// BenchmarkBigReloadOneEditEvents gives edits old mtimes and so measures
// the reload of one changed file.
func BenchmarkBigEditVisible(b *testing.B) { benchEditVisible(b, discover.Options{}, false) }

func BenchmarkBigEditVisiblePollOnly(b *testing.B) {
	benchEditVisible(b, discover.Options{PollOnly: true}, false)
}

func BenchmarkBigReloadOneEditEvents(b *testing.B) { benchEditVisible(b, discover.Options{}, true) }

func benchEditVisible(b *testing.B, opts discover.Options, oldMtime bool) {
	dir, src := bigSource(b, opts)
	src.Start(b.Context())
	defer src.Stop()
	// The watcher's first sweep, then a quiet moment.
	time.Sleep(time.Second)
	var lat []time.Duration
	var cpu time.Duration
	gen := 0
	for b.Loop() {
		gen++
		i := gen % bigroot.Full.Profiles
		want := "generation " + strconv.Itoa(gen)
		start, c0 := time.Now(), cpuTime()
		editProfile(b, dir, i, gen, oldMtime)
		for !strings.Contains(src.Snapshot().Profiles[bigroot.ProfileName(i)].Body, want) {
			if time.Since(start) > 30*time.Second {
				b.Fatalf("edit %d not visible after 30s", gen)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(start))
		cpu += cpuTime() - c0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/edit")
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-visible-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-visible-ms")
}

// BenchmarkBigReloadPeakRSS compares the peak resident set during reloads
// with two steady states: the live set (RSS right after a collection that
// returned free memory to the OS: a floor no running Go process stays at)
// and the running steady state (the peak over 20 unchanged sweeps: what
// the watcher itself holds while nothing changes). The reloads are the
// running watcher's, on file events.
// The kernel's high-water mark is reset (clear_refs 5) before each phase,
// so each peak is that phase's own.
func BenchmarkBigReloadPeakRSS(b *testing.B) {
	dir, src := bigSource(b, discover.Options{})
	runtime.GC()
	debug.FreeOSMemory()
	live := procStatus(b, "VmRSS")
	resetPeak := func() {
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			b.Skipf("cannot reset the peak RSS: %v", err)
		}
	}
	resetPeak()
	for range 20 {
		if changed, err := src.Reload(); changed || err != nil {
			b.Fatalf("unchanged root: changed %v, err %v", changed, err)
		}
	}
	running := procStatus(b, "VmHWM")
	// The reloads the running watcher makes on file events.
	src.Start(b.Context())
	defer src.Stop()
	time.Sleep(time.Second)
	resetPeak()
	gen := 0
	for b.Loop() {
		gen++
		i := gen % bigroot.Full.Profiles
		editProfile(b, dir, i, gen, true)
		for want := "generation " + strconv.Itoa(gen); !strings.Contains(src.Snapshot().Profiles[bigroot.ProfileName(i)].Body, want); {
			time.Sleep(time.Millisecond)
		}
	}
	peak := procStatus(b, "VmHWM")
	b.ReportMetric(float64(live)/1024, "live-MiB")
	b.ReportMetric(float64(running)/1024, "running-MiB")
	b.ReportMetric(float64(peak)/1024, "peak-MiB")
	b.ReportMetric(float64(peak)/float64(live), "peak/live")
	b.ReportMetric(float64(peak)/float64(running), "peak/running")
}

// procStatus reads a kB figure from /proc/self/status.
func procStatus(b *testing.B, key string) int64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	b.Skipf("no %s in /proc/self/status", key)
	return 0
}
