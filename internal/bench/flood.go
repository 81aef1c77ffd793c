package bench

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/rolecall/rolecall/service"
)

// LoopFlood is the pipeline with the micro service registered beside it
// (its own connection and pool, as `worker run` wires it) while a planner
// sends it preview requests (rolecall.svc.resolve) at
// Options.PreviewFlood per second.
const LoopFlood = "pipeline-flood"

// FloorFlood is the lowest throughput ratio, the pipeline under a preview
// flood over the pipeline alone, the service is meant to keep.
const FloorFlood = 0.9

// FloodStats is what the flood of one run did.
type FloodStats struct {
	// Rate is the offered rate (requests/s); Achieved what was sent over
	// the run's span.
	Rate     float64 `json:"rate"`
	Achieved float64 `json:"achieved"`
	// Sent requests; Answered got a reply (an outcome or a typed failure
	// of the task, both answers); Lost got none in time or a 5xx, or were
	// not sent because MaxInFlight requests were outstanding.
	Sent     int `json:"sent"`
	Answered int `json:"answered"`
	Lost     int `json:"lost"`
	// Latency of the answered requests, request to reply.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// floodMaxInFlight bounds the outstanding preview requests: a service
// that falls behind shows as lost requests, not as a growing heap in the
// bench.
const floodMaxInFlight = 512

// floodLoop wraps the pipeline loop: the service starts after the
// pipeline and the flood after the service; both stop before it.
func (e *env) floodLoop(o Options, tasks []task) loop {
	l := e.pipelineLoop(o, LoopFlood, 0)
	startPipe := l.start
	var fs FloodStats
	l.start = func(js jetstream.JetStream) (func() error, error) {
		stopPipe, err := startPipe(js)
		if err != nil {
			return nil, err
		}
		svcNC, err := o.Connect(e.url, "rolecall-bench-service")
		if err != nil {
			return nil, errors.Join(err, stopPipe())
		}
		svc, err := service.Start(svcNC, e.src, service.Options{Pipeline: l.cfg, Instance: "bench", Version: "dev"})
		if err != nil {
			svcNC.Close()
			return nil, errors.Join(err, stopPipe())
		}
		planner, err := o.Connect(e.url, "rolecall-bench-planner")
		if err != nil {
			_ = svc.Stop()
			svcNC.Close()
			return nil, errors.Join(err, stopPipe())
		}
		stopFlood := startFlood(planner, service.Subject(l.cfg.Prefix, service.EndpointResolve), o.PreviewFlood, tasks)
		return func() error {
			fs = stopFlood()
			planner.Close()
			err := svc.Stop()
			svcNC.Close()
			return errors.Join(err, stopPipe())
		}, nil
	}
	l.after = func(st *Stats) { st.Flood = &fs }
	return l
}

// startFlood sends one preview request every 1/rate seconds, cycling
// through the run's own task events, until stop.
func startFlood(nc *nats.Conn, subject string, rate float64, tasks []task) (stop func() FloodStats) {
	quit, done := make(chan struct{}), make(chan FloodStats, 1)
	go func() {
		var (
			mu       sync.Mutex
			lat      []time.Duration
			answered int
			lost     int
			wg       sync.WaitGroup
		)
		slots := make(chan struct{}, floodMaxInFlight)
		start := time.Now()
		sent := 0
	loop:
		for i := 0; ; i++ {
			due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			select {
			case <-quit:
				break loop
			case <-time.After(time.Until(due)):
			}
			select {
			case slots <- struct{}{}:
			default:
				mu.Lock()
				lost++
				mu.Unlock()
				continue
			}
			t := &tasks[i%len(tasks)]
			m := &nats.Msg{Subject: subject, Header: t.header(), Data: t.body}
			sent++
			wg.Go(func() {
				defer func() { <-slots }()
				t0 := time.Now()
				r, err := nc.RequestMsg(m, 5*time.Second)
				d := time.Since(t0)
				mu.Lock()
				defer mu.Unlock()
				if err != nil || strings.HasPrefix(r.Header.Get(micro.ErrorCodeHeader), "5") {
					lost++
					return
				}
				answered++
				lat = append(lat, d)
			})
		}
		span := time.Since(start)
		wg.Wait()
		fs := FloodStats{Rate: rate, Sent: sent, Answered: answered, Lost: lost}
		if span > 0 {
			fs.Achieved = float64(sent) / span.Seconds()
		}
		l := latencyOf(lat)
		fs.P50, fs.P99 = l.P50, l.P99
		done <- fs
	}()
	return func() FloodStats {
		close(quit)
		return <-done
	}
}

// String is the flood in one line.
func (fs *FloodStats) String() string {
	return fmt.Sprintf("%.0f/s offered, %.0f/s sent, %d answered, %d lost, p50 %.2f ms, p99 %.2f ms",
		fs.Rate, fs.Achieved, fs.Answered, fs.Lost, fs.P50, fs.P99)
}
