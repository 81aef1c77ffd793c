package reliability_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rolecall/rolecall/pipeline"
)

// workerLoadArgs keep redelivery quick: a killed worker's unacknowledged
// tasks come back after ack_wait (2 s), well inside the 10-minute
// duplicate window the worker requires.
var workerLoadArgs = []string{"--ack-wait", "2s", "--concurrency", "4", "--log-level", "warn"}

// TestKill9WorkerUnderLoad: 10,000 tasks arrive over ~1.5 s while two worker
// processes share the consumer; ten times, at a random moment, one of them
// is killed with SIGKILL and started again (the other one is always up).
// Every task ends with exactly one outcome, and each is the right answer.
func TestKill9WorkerUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 tasks and 10 kills; pipeline.TestStoppedWorkerAndSecondWorker is the in-process counterpart")
	}
	// 5,000 tasks (3,300/s) once sufficed; since the worker got faster,
	// two of them answered that rate with so little in flight that about
	// one run in ten had every kill land on an idle worker.
	const tasks, kills = 10000, 10
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	srv := startNATS(t, "")
	root := openDir(t)
	c := connect(t, srv.url())
	workers := []*worker{
		startWorker(t, srv.url(), root, workerOpts{name: "worker-a", args: workerLoadArgs}),
		startWorker(t, srv.url(), root, workerOpts{name: "worker-b", args: workerLoadArgs}),
	}
	acks := c.watchAcks(defaults.TasksStream, defaults.Consumer)
	pubs := c.watchPublishes()

	start := time.Now()
	// Tasks arrive faster than two workers answer them, so each worker
	// always holds a full fetch buffer and every kill strands some tasks.
	ids, submitted := c.submitPaced("k", tasks, 1500*time.Millisecond)
	var maxHWM int64
	for i := range kills {
		// One kill per 150 ms slot, at a random point in the slot; the
		// victims alternate, and the survivor must be up before a kill.
		at := time.Duration(i)*150*time.Millisecond + time.Duration(rng.Int64N(int64(100*time.Millisecond)))
		time.Sleep(time.Until(start.Add(at)))
		victim, other := i%2, 1-i%2
		workers[other].waitReady(10 * time.Second)
		// A victim killed before it bound the consumer held nothing: wait
		// until it consumes, so the kill lands on fetched, unacked tasks.
		workers[victim].waitReady(10 * time.Second)
		done := c.specsCount()
		if done >= tasks {
			t.Fatalf("kill %d came after all tasks were answered; the test no longer kills under load", i+1)
		}
		maxHWM = max(maxHWM, workers[victim].statusKB("VmHWM"))
		workers[victim].kill()
		t.Logf("kill -9 #%d of %s at %s with %d/%d outcomes", i+1, workers[victim].name, time.Since(start).Round(time.Millisecond), done, tasks)
		workers[victim] = startWorker(t, srv.url(), root, workerOpts{name: workers[victim].name, args: workerLoadArgs, noWait: true})
	}
	<-submitted
	c.waitSpecs(tasks, 90*time.Second)
	elapsed := time.Since(start)
	// Let late redeliveries of already-answered tasks run, so their
	// (dropped) second publishes are counted and cannot hide a second outcome.
	time.Sleep(2500 * time.Millisecond)
	for _, w := range workers {
		maxHWM = max(maxHWM, w.statusKB("VmHWM"))
	}

	outs := c.outcomes()
	exactlyOnce(t, ids, outs)
	checkLoadAnswers(t, outs)
	st := acks.stats()
	if len(st.bad) > 0 {
		t.Errorf("unparsed ack replies: %q", st.bad)
	}
	if st.acked != tasks {
		t.Errorf("%d tasks acknowledged, want %d", st.acked, tasks)
	}
	published, _ := pubs.counts()
	deliveries := int(c.consumerDeliveries())
	f := figures{tasks: tasks, outcomes: len(outs), publishes: published, duplicates: published - len(outs),
		deliveries: deliveries, redeliveries: deliveries - tasks, naks: st.nakMsgs, maxHWMKB: maxHWM, elapsed: elapsed}
	t.Logf("figures: %s kills=%d", f, kills)
	if f.redeliveries == 0 {
		t.Errorf("no task was redelivered: the kills did not hit work in flight")
	}
	const boundKB = 256 << 10
	if maxHWM > boundKB {
		t.Errorf("a worker's peak RSS was %d KiB, over the %d KiB bound", maxHWM, boundKB)
	}
}

// TestKill9NATSServerUnderLoad: the separately run nats-server is killed
// with SIGKILL twice while two workers process 20,000 tasks, and started
// again on the same store. The workers reconnect by themselves (nobody
// restarts them) and every task ends with exactly one outcome.
func TestKill9NATSServerUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 tasks and two server kills; pipeline.TestTwoWorkersManyTasks is the in-process counterpart")
	}
	// 20,000 tasks: with 5,000, the first worker sometimes answered a
	// quarter of them while the second was starting; with 10,000, one
	// worker once answered all that were left while the other waited out
	// its reconnect delay after the first restart.
	const tasks = 20000
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0xdead))

	srv := startNATS(t, "")
	root := openDir(t)
	c := connect(t, srv.url())
	// The tasks are stored before the workers start, so that the first
	// kill lands at its intended point: when they were submitted while two
	// workers consumed them, a loaded CI machine sometimes answered all
	// 5,000 of them before the test had read the count once.
	cfg := pipeline.DefaultConfig()
	cfg.AckWait, cfg.Concurrency = 2*time.Second, 2
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	if _, err := pipeline.Ensure(ctx, c.js, cfg); err != nil {
		t.Fatalf("ensure streams: %v", err)
	}
	pubs := c.watchPublishes()
	ids := c.submitMany("s", tasks, loadTask)
	args := []string{"--ack-wait", "2s", "--concurrency", "2", "--log-level", "info"}
	a := startWorker(t, srv.url(), root, workerOpts{name: "worker-a", args: args})
	b := startWorker(t, srv.url(), root, workerOpts{name: "worker-b", args: args})
	start := time.Now()

	at := 1500 + rng.IntN(1500)
	for i := range 2 {
		c.waitSpecs(at, 60*time.Second)
		done := c.specsCount()
		if done >= tasks {
			t.Fatalf("server kill %d came after all tasks were answered", i+1)
		}
		srv.kill9()
		down := time.Duration(300+rng.IntN(700)) * time.Millisecond
		t.Logf("kill -9 #%d of nats-server at %s with %d/%d outcomes; down for %s", i+1, time.Since(start).Round(time.Millisecond), done, tasks, down)
		time.Sleep(down)
		srv.restart()
		restarted := time.Now()
		// Should the last outcomes have been stored just before the kill,
		// none is left to come.
		if base := c.specsCount(); base < tasks {
			c.waitSpecs(base+1, 60*time.Second)
		}
		t.Logf("restarted; outcomes flowing again %s later", time.Since(restarted).Round(time.Millisecond))
		// Outcomes may flow from one worker while the other still waits
		// out its reconnect delay: the next kill must find both
		// reconnected, or it is not the second kill one of them survives.
		for _, w := range []*worker{a, b} {
			for deadline := time.Now().Add(30 * time.Second); strings.Count(w.stderr.String(), "nats reconnected") < i+1; {
				if time.Now().After(deadline) {
					t.Fatalf("%s has not reconnected 30 s after restart #%d", w.name, i+1)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		// The next kill is counted from here, not from the start: the
		// worker that reconnected first may have answered thousands while
		// the other was still in its reconnect delay.
		at = c.specsCount() + 500 + rng.IntN(1000)
	}
	c.waitSpecs(tasks, 90*time.Second)
	elapsed := time.Since(start)
	time.Sleep(2500 * time.Millisecond)

	for _, w := range []*worker{a, b} {
		if w.exited() {
			t.Fatalf("%s exited (%v); it should have reconnected", w.name, w.state)
		}
		w.waitReady(10 * time.Second)
	}
	outs := c.outcomes()
	exactlyOnce(t, ids, outs)
	checkLoadAnswers(t, outs)
	deliveries := int(c.consumerDeliveries())
	published, _ := pubs.counts()
	f := figures{tasks: tasks, outcomes: len(outs), publishes: published, duplicates: published - len(outs), deliveries: deliveries, redeliveries: deliveries - tasks,
		maxHWMKB: max(a.statusKB("VmHWM"), b.statusKB("VmHWM")), elapsed: elapsed}
	// Each worker's two reconnects were waited for after each restart.
	t.Logf("figures: %s server_kills=2 reconnects_logged=%d", f, strings.Count(a.stderr.String()+b.stderr.String(), "nats reconnected"))
}
