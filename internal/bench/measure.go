package bench

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
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
	ms := func(v time.Duration) float64 { return float64(v) / float64(time.Millisecond) }
	var max time.Duration
	if len(d) > 0 {
		max = d[len(d)-1]
	}
	return Latency{P50: ms(Percentile(d, 50)), P90: ms(Percentile(d, 90)), P99: ms(Percentile(d, 99)), Max: ms(max)}
}

// usage is a point-in-time reading of the process's resource counters.
type usage struct {
	cpu        time.Duration // user + system
	sys        time.Duration // system alone
	allocs     uint64        // heap objects allocated since start
	allocBytes uint64
	gcCycles   uint64  // completed GC cycles
	gcCPU      float64 // the runtime's estimate of GC CPU seconds
}

var usageSamples = []metrics.Sample{
	{Name: "/gc/heap/allocs:objects"},
	{Name: "/gc/heap/allocs:bytes"},
	{Name: "/gc/cycles/total:gc-cycles"},
	{Name: "/cpu/classes/gc/total:cpu-seconds"},
}

func readUsage() usage {
	var u usage
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		u.sys = time.Duration(ru.Stime.Nano())
	}
	s := slices.Clone(usageSamples)
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		u.allocs = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		u.allocBytes = s[1].Value.Uint64()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		u.gcCycles = s[2].Value.Uint64()
	}
	if s[3].Value.Kind() == metrics.KindFloat64 {
		u.gcCPU = s[3].Value.Float64()
	}
	return u
}

// resetPeakRSS starts a new high-water mark for resident memory (Linux
// clear_refs "5"), so each run reports its own peak, not the process's.
// It reports whether the kernel accepted the reset.
func resetPeakRSS() bool {
	runtime.GC()
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is the resident-memory high-water mark in bytes: VmHWM since the
// last reset, or ru_maxrss (the whole process's peak) where /proc is not
// available.
func peakRSS() uint64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			line := sc.Bytes()
			if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
				f := bytes.Fields(v)
				if len(f) > 0 {
					if kb, err := strconv.ParseUint(string(f[0]), 10, 64); err == nil {
						return kb * 1024
					}
				}
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
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(string(f[0]), 64)
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
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if k, v, ok := bytes.Cut(sc.Bytes(), []byte(":")); ok && string(bytes.TrimSpace(k)) == "model name" {
				m.CPUModel = string(bytes.TrimSpace(v))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := bytes.Fields(b); len(f) >= 3 {
			m.LoadAvg = string(bytes.Join(f[:3], []byte(" ")))
		}
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
