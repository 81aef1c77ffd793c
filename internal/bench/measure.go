package bench

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Latency holds enqueue-to-outcome percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Percentile returns the nearest-rank percentile p (0 < p ≤ 100) of
// sorted: the smallest value with at least p% of the values at or below
// it. It returns 0 for an empty slice. Nearest rank never interpolates,
// so every reported latency is one that a task really had.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// rank = ceil(p/100 × n), computed in integers where possible so that
	// p99 of 100 values is the 99th value, not the 100th through rounding.
	rank := int(p * float64(n) / 100)
	if float64(rank)*100 < p*float64(n) {
		rank++
	}
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// latencyOf sorts d in place and summarizes it.
func latencyOf(d []time.Duration) Latency {
	slices.Sort(d)
	var max time.Duration
	if len(d) > 0 {
		max = d[len(d)-1]
	}
	return Latency{P50: millis(Percentile(d, 50)), P90: millis(Percentile(d, 90)), P99: millis(Percentile(d, 99)), Max: millis(max)}
}

// millis is d in milliseconds, the unit of every reported duration.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// usage is a point-in-time reading of the process's resource counters.
type usage struct {
	cpu        time.Duration // user + system
	sys        time.Duration // system alone
	allocs     uint64        // heap objects allocated since start
	allocBytes uint64
	gcCycles   uint64  // completed GC cycles
	gcCPU      float64 // the runtime's estimate of GC CPU seconds
}

func readUsage() usage {
	var u usage
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		u.sys = time.Duration(ru.Stime.Nano())
	}
	s := []metrics.Sample{
		{Name: "/gc/heap/allocs:objects"},
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
	}
	metrics.Read(s)
	u.allocs, u.allocBytes, u.gcCycles = s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	u.gcCPU = s[3].Value.Float64()
	return u
}

// resetPeakRSS starts a new high-water mark for resident memory (Linux
// clear_refs "5"), so each run reports its own peak, not the process's.
func resetPeakRSS() {
	runtime.GC()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS is the resident-memory high-water mark in bytes: VmHWM since the
// last reset, or ru_maxrss (the whole process's peak) where /proc is not
// available.
func peakRSS() uint64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb uint64
			if _, err := fmt.Sscan(v, &kb); err == nil {
				return kb * 1024
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		return uint64(ru.Maxrss) * 1024 // kilobytes on Linux
	}
	return 0
}

// load1 is the one-minute load average (0 where /proc is not available).
func load1() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	var v float64
	_, _ = fmt.Sscan(string(b), &v)
	return v
}

// Machine describes where the numbers were taken.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpu_model"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	LoadAvg    string `json:"load_avg,omitempty"`
	// GOGC is the collector's target ("off" when disabled) and
	// MemoryLimit its soft memory limit in bytes (0: none), as the
	// process runs with them: the latency tail at an offered load follows
	// the collector's cycles, so a report says which settings it was
	// measured with.
	GOGC        string `json:"gogc"`
	MemoryLimit uint64 `json:"gomemlimit_bytes,omitempty"`
}

func machine() Machine {
	m := Machine{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
	}
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			m.CPUModel = strings.TrimSpace(v)
			break
		}
	}
	b, _ = os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		m.LoadAvg = strings.Join(f[:3], " ")
	}
	m.GOGC, m.MemoryLimit = gcSettings()
	return m
}

// gcSettings reads the collector's settings from runtime/metrics, which
// reports GOGC=off as -1 and no memory limit as math.MaxInt64.
func gcSettings() (gogc string, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	gogc = "off"
	if p := int64(s[0].Value.Uint64()); p >= 0 {
		gogc = strconv.FormatInt(p, 10)
	}
	if l := s[1].Value.Uint64(); l < math.MaxInt64 {
		limit = l
	}
	return gogc, limit
}
