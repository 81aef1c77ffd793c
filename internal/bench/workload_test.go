package bench

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/rolecall/rolecall/discover"

	"github.com/rolecall/rolecall/events"
)

// TestPackTasks: packed tasks carry exactly what EncodeTask gave, and a
// run's tasks, whatever their number, are a few heap objects: they stay
// live in the process that hosts the broker and the worker, where each
// object of their own would add to every collection's mark work.
func TestPackTasks(t *testing.T) {
	for _, binary := range []bool{false, true} {
		enc := make([]encodedTask, 30)
		for i := range enc {
			id := fmt.Sprintf("pack-%d", i)
			h, body, err := events.EncodeTask(taskSource, id, []byte(`{"task_id":"T","role":"architect"}`), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k=v", binary)
			if err != nil {
				t.Fatal(err)
			}
			enc[i] = encodedTask{kind: Kind(i % int(numKinds)), id: id, outID: "out-" + id, header: h, body: body}
		}
		tasks := packTasks(enc)
		if len(tasks) != len(enc) {
			t.Fatalf("binary %v: %d packed tasks from %d encoded", binary, len(tasks), len(enc))
		}
		for i, tk := range tasks {
			e := enc[i]
			if tk.kind != e.kind || tk.id != e.id || tk.outID != e.outID || !bytes.Equal(tk.body, e.body) || !maps.EqualFunc(tk.header(), e.header, slices.Equal) {
				t.Errorf("binary %v, task %d: packed %v %q %q %v %q; want %v %q %q %v %q", binary, i, tk.kind, tk.id, tk.outID, tk.header(), tk.body, e.kind, e.id, e.outID, e.header, e.body)
			}
			// A window ends at its capacity: appending to one body
			// cannot write over the next.
			if cap(tk.body) != len(tk.body) {
				t.Errorf("task %d: body window has capacity %d past its %d bytes", i, cap(tk.body), len(tk.body))
			}
		}
	}

	const n = 5000
	objects := func() uint64 {
		runtime.GC()
		s := []metrics.Sample{{Name: "/gc/heap/objects:objects"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	before := objects()
	tasks, err := buildTasks(n, DefaultMix, false, "objects")
	if err != nil {
		t.Fatal(err)
	}
	// Other goroutines of the test binary may hold a few objects more or
	// fewer; one per task would be 5,000.
	if after := objects(); after > before+n/50 {
		t.Errorf("%d tasks hold %d heap objects (%d before, %d after); want a few", n, int64(after)-int64(before), before, after)
	}
	runtime.KeepAlive(tasks)
}

func testSnapshot(t testing.TB) *discover.Snapshot {
	t.Helper()
	return testSource(t).Snapshot()
}

// testSource is a source over the generated config root.
func testSource(t testing.TB) *discover.Source {
	t.Helper()
	dir := t.TempDir()
	if err := writeRoot(dir); err != nil {
		t.Fatal(err)
	}
	src, err := discover.NewSource(dir, discover.Options{ReloadInterval: time.Hour}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return src
}
