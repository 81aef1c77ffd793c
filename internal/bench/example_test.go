package bench_test

import (
	"fmt"
	"time"

	"github.com/rolecall/rolecall/internal/bench"
)

// Percentile is nearest-rank: every reported latency is one a task had.
func ExamplePercentile() {
	sorted := []time.Duration{1 * time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 40 * time.Millisecond}
	fmt.Println(bench.Percentile(sorted, 50), bench.Percentile(sorted, 99))
	// Output: 2ms 40ms
}

func ExampleParseMix() {
	m, err := bench.ParseMix("casts=3,failing=1")
	fmt.Println(m, err)
	// Output: casts=3,overlay=0,replacement=0,failing=1 <nil>
}
