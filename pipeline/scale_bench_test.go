package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/bigroot"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
)

// BenchmarkTaskLatencyBigRoot publishes tasks at 50/s for 10 s to a worker
// serving a generated root of 2,000 roles, 500 packs and 10,000 profiles
// (never committed), and measures each task's latency from its publish
// to its outcome's arrival. "edits" rewrites a profile and a pack every
// 100 ms throughout, so the watcher reloads on nearly every sweep;
// "steady" edits nothing. One iteration is one 10 s run:
//
//	go test ./pipeline -run '^$' -bench TaskLatencyBigRoot -benchtime 1x
func BenchmarkTaskLatencyBigRoot(b *testing.B) {
	for _, edits := range []bool{false, true} {
		name := "steady"
		if edits {
			name = "edits"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				latencyRun(b, edits)
			}
		})
	}
}

func latencyRun(b *testing.B, edits bool) {
	root := b.TempDir()
	if err := bigroot.Write(root, bigroot.Full); err != nil {
		b.Fatal(err)
	}
	ageFilesB(b, root)
	src, err := discover.NewSource(root, discover.Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src.Start(ctx)
	defer src.Stop()

	srv := natstest.Start(b)
	nc := natstest.Connect(b, srv)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		b.Fatal(err)
	}
	w, err := pipeline.New(js, src, cfg, pipeline.Options{})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lat []time.Duration
	failed := 0
	sub, err := nc.Subscribe(cfg.Prefix+".specs.>", func(m *nats.Msg) {
		at := time.Now()
		ev, err := events.DecodeOutcome(m.Header, m.Data)
		if err != nil {
			return
		}
		id, _ := ev.Extensions()["causationid"].(string)
		mu.Lock()
		if t0, ok := sent[id]; ok {
			lat = append(lat, at.Sub(t0))
			if ev.Type() != events.TypeSpecResolved {
				failed++
			}
		}
		mu.Unlock()
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()

	reloads := 0
	stopEdits := make(chan struct{})
	var editors sync.WaitGroup
	if edits {
		editors.Go(func() {
			prev := src.Snapshot()
			for gen := 1; ; gen++ {
				select {
				case <-stopEdits:
					return
				case <-time.After(100 * time.Millisecond):
				}
				replaceB(b, root, "agents/"+bigroot.ProfileName(gen%bigroot.Full.Profiles)+".md", bigroot.Profile(gen%bigroot.Full.Profiles, bigroot.Full.Roles, gen))
				replaceB(b, root, "packs/"+bigroot.PackName(1+gen%(bigroot.Full.Packs-1))+".yaml", bigroot.Pack(1+gen%(bigroot.Full.Packs-1), bigroot.Full.Roles, gen))
				if s := src.Snapshot(); s != prev {
					reloads++
					prev = s
				}
			}
		})
	}

	const rate, seconds = 50, 10
	n := rate * seconds
	tick := time.NewTicker(time.Second / rate)
	for i := range n {
		<-tick.C
		id := fmt.Sprintf("lat-%d", i)
		hdr, body, err := events.EncodeTask("bench", id, fmt.Appendf(nil, `{"task_id":"T-%d","role":%q,"pack":%q}`, i, bigroot.RoleName(1), bigroot.PackName(0)), "", "", false)
		if err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		sent[id] = time.Now()
		mu.Unlock()
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: cfg.Prefix + ".tasks.bench", Header: hdr, Data: body}); err != nil {
			b.Fatal(err)
		}
	}
	tick.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		got := len(lat)
		mu.Unlock()
		if got >= n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d outcomes after 30 s", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stopEdits)
	editors.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(1), "max-ms")
	b.ReportMetric(float64(reloads), "reloads")
	// Every task here should resolve; a failure outcome (e.g. one too large
	// to publish) is counted so that a latency figure is never read
	// without it.
	b.ReportMetric(float64(failed), "failed-outcomes")
}

func ageFilesB(b *testing.B, dir string) {
	when := time.Now().Add(-time.Hour)
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		return os.Chtimes(p, when, when)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// replaceB renames a complete file over rel, as an editor does.
func replaceB(b *testing.B, root, rel, content string) {
	p := filepath.Join(root, filepath.FromSlash(rel))
	tmp := filepath.Join(filepath.Dir(p), ".tmp-"+filepath.Base(p))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		b.Error(err)
		return
	}
	if err := os.Rename(tmp, p); err != nil {
		b.Error(err)
	}
}
