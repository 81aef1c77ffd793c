package integration

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// checkReplicated asserts the streams, the idempotency store's bucket and
// the shared consumer the workers created are R3 with every peer present.
func (c *cluster) checkReplicated(ctx context.Context) {
	c.t.Helper()
	for _, name := range []string{tasksStream, specsStream, "ROLECALL_DEADLETTER", outcomesStream} {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			c.t.Fatalf("stream %s: %v", name, err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != 3 || info.Cluster == nil || info.Cluster.Leader == "" || len(info.Cluster.Replicas) != 2 {
			c.t.Fatalf("stream %s: replicas %d, cluster %+v; want R3 with a leader and two peers", name, info.Config.Replicas, info.Cluster)
		}
	}
	info, err := c.consumerInfo(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	if info.Config.Replicas != 3 && info.Config.Replicas != 0 { // 0 = the stream's
		c.t.Fatalf("consumer %s: replicas %d, want 3", consumer, info.Config.Replicas)
	}
}

// TestFleetExactlyOnce: 3 nodes, R3 streams, 3 workers started at the same
// moment as each other (racing to create the streams and the consumer),
// 5,000 tasks → exactly one valid outcome per task.
func TestFleetExactlyOnce(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.startWorkers(3)
	c.checkReplicated(ctx)
	obs := c.observe(c.nodes[0])

	tasks := makeTasks("fleet", 5000)
	l := c.startLoad(ctx, tasks, 2000)
	l.wait(t)
	c.waitDone(ctx, len(tasks), 3*time.Minute)
	f := c.verify(ctx, "fleet", l, obs)
	shares := c.shares()
	f.report(t, fmt.Sprintf("3 workers, no fault; answered per worker %v", shares))
	f.check(t)
	// Workers that start together all get work: none sits idle behind a
	// pull request lost while the consumer had no leader yet.
	for name, n := range shares {
		if n == 0 {
			t.Errorf("%s answered no task: it was ready but idle", name)
		}
	}
	c.checkWorkersRunning(ctx)
}

// TestWorkerKilled: SIGKILL one worker while the fleet works through a
// backlog (so it surely holds unacknowledged tasks), start a replacement:
// the dead worker's tasks come back after ack_wait and still every task
// has exactly one outcome.
func TestWorkerKilled(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	ws := c.startWorkers(3)
	obs := c.observe(c.nodes[0])

	tasks := makeTasks("kill", 5000)
	l := c.startLoad(ctx, tasks, 5000) // faster than the fleet: a backlog
	c.waitOutcomes(ctx, 1500, 2*time.Minute)
	// Kill while the fleet holds fetched, unacknowledged tasks (a backlog
	// spread over three workers), so the victim surely strands some.
	for deadline := time.Now().Add(30 * time.Second); ; {
		info, err := c.consumerInfo(ctx)
		if err == nil && info.NumAckPending >= 60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fleet never held 60 unacknowledged tasks at once (last: %v, %v)", info, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	victim := ws[1]
	c.signal(ctx, victim.c, "KILL")
	victim.stopped = true
	if code := c.waitExit(ctx, victim.c, 10*time.Second); code != 137 {
		t.Errorf("%s exit code %d after SIGKILL, want 137", victim.name, code)
	}
	c.startWorkers(1)
	l.wait(t)
	c.waitDone(ctx, len(tasks), 3*time.Minute)

	f := c.verify(ctx, "kill", l, obs)
	f.report(t, "SIGKILL worker-2 at 1,500 outcomes; worker-4 started")
	f.check(t)
	if f.Redeliveries == 0 {
		t.Errorf("no redeliveries: the killed worker held fetched tasks, which must have been redelivered")
	}
	c.checkWorkersRunning(ctx)
}

// TestStreamLeaderRestart: stop the NATS node that leads ROLECALL_TASKS
// mid-load and start it again: publishes and outcomes resume through the
// other two nodes, no worker exits, and still exactly one outcome per task.
func TestStreamLeaderRestart(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.startWorkers(3)
	leader := c.streamLeader(ctx, tasksStream)
	var other *node
	for _, n := range c.nodes {
		if n != leader {
			other = n
			break
		}
	}
	obs := c.observe(other) // not through the node that goes away

	tasks := makeTasks("leader", 5000)
	l := c.startLoad(ctx, tasks, 600)
	c.waitOutcomes(ctx, 1000, 2*time.Minute)
	stop := 10 * time.Second
	if err := leader.c.Stop(ctx, &stop); err != nil {
		t.Fatalf("stop %s: %v", leader.name, err)
	}
	t.Logf("stopped %s (leader of %s)", leader.name, tasksStream)
	time.Sleep(5 * time.Second)
	c.restart(ctx, leader.c)
	t.Logf("restarted %s; new leader of %s: %s", leader.name, tasksStream, c.streamLeader(ctx, tasksStream).name)
	l.wait(t)
	c.waitDone(ctx, len(tasks), 3*time.Minute)
	c.waitCurrent(ctx, tasksStream, time.Minute)

	f := c.verify(ctx, "leader", l, obs)
	f.report(t, "stopped the tasks-stream leader node for 5 s at 1,000 outcomes, then restarted it")
	f.check(t)
	c.checkWorkersRunning(ctx)
}

// waitCurrent waits until every replica of a stream is current again
// (the restarted node caught up).
func (c *cluster) waitCurrent(ctx context.Context, stream string, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s, err := c.js.Stream(ctx, stream)
		if err == nil {
			cl := s.CachedInfo().Cluster
			ok := cl != nil && cl.Leader != "" && len(cl.Replicas) == nodeCount-1
			for _, r := range cl.Replicas {
				ok = ok && r.Current && !r.Offline
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("stream %s: replicas not current after %s (err %v)", stream, within, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestWorkerPartitioned: cut one worker off the network while it holds
// fetched tasks, long enough for ack_wait to pass, then reconnect it with
// its address (a healed partition). Its tasks are redelivered to the
// others; its own late answers are dropped as duplicates; it then takes
// new work again.
func TestWorkerPartitioned(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	ws := c.startWorkers(3)
	obs := c.observe(c.nodes[0])

	tasks := makeTasks("part", 5000)
	l := c.startLoad(ctx, tasks, 1500) // a backlog: the victim holds tasks
	c.waitOutcomes(ctx, 1000, 2*time.Minute)
	victim := ws[2]
	ip := c.disconnect(ctx, victim)
	t.Logf("disconnected %s (%s)", victim.name, ip)
	time.Sleep(ackWait + 3*time.Second)
	c.reconnect(ctx, victim, ip)
	t.Logf("reconnected %s", victim.name)
	l.wait(t)
	c.waitDone(ctx, len(tasks), 3*time.Minute)

	// The healed worker must be a working member again: a second wave of
	// tasks, of which it answers some.
	before, err := victim.metric("rolecall_tasks_total", `outcome="resolved"`)
	if err != nil {
		t.Fatalf("%s metrics after the partition: %v", victim.name, err)
	}
	wave := makeTasks("part2", 1500)
	l2 := c.startLoad(ctx, wave, 1500)
	l2.wait(t)
	c.waitDone(ctx, len(tasks)+len(wave), 3*time.Minute)
	after, err := victim.metric("rolecall_tasks_total", `outcome="resolved"`)
	if err != nil {
		t.Fatal(err)
	}

	both := &load{tasks: append(append([]taskSpec{}, tasks...), wave...), start: l.start}
	both.accepted.Store(l.accepted.Load() + l2.accepted.Load())
	both.retries.Store(l.retries.Load() + l2.retries.Load())
	f := c.verify(ctx, "partition", both, obs)
	f.report(t, "worker-3 disconnected for ack_wait+3 s at 1,000 outcomes, reconnected; then 1,500 more tasks")
	f.check(t)
	if f.Redeliveries == 0 {
		t.Errorf("no redeliveries: the cut-off worker held fetched tasks, which must have been redelivered")
	}
	if after <= before {
		t.Errorf("%s resolved %v tasks before the second wave and %v after: it did not rejoin the fleet", victim.name, before, after)
	}
	c.checkWorkersRunning(ctx)
}

// TestRollingRestart: SIGTERM each worker in turn under a steady load,
// wait for it to drain and exit 0, start it again, then the next: zero
// lost, zero duplicated.
func TestRollingRestart(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	ws := c.startWorkers(3)
	obs := c.observe(c.nodes[0])

	// 60 s of load: one drain-and-restart cycle takes about 6 s here, so
	// all three restarts happen while tasks still arrive, with margin for
	// a much slower machine; the check below fails the test if they did not.
	tasks := makeTasks("roll", 18000)
	l := c.startLoad(ctx, tasks, 300)
	mark := 800
	for _, w := range ws {
		c.waitOutcomes(ctx, mark, 2*time.Minute)
		select {
		case <-l.done:
			t.Fatalf("the load ended before %s was stopped: the restart would not be under load", w.name)
		default:
		}
		c.signal(ctx, w.c, "TERM")
		code := c.waitExit(ctx, w.c, 45*time.Second)
		if code != 0 {
			t.Errorf("%s exit code %d after SIGTERM, want 0 (drained)", w.name, code)
		}
		c.restart(ctx, w.c)
		if st, err := w.ready(); err != nil || st != 200 {
			t.Errorf("%s after restart: /readyz %d, %v", w.name, st, err)
		}
		got, _ := c.specsCount(ctx)
		mark = int(got) + 800
	}
	l.wait(t)
	c.waitDone(ctx, len(tasks), 3*time.Minute)

	f := c.verify(ctx, "rolling", l, obs)
	f.report(t, "SIGTERM, drain, restart of each worker in turn under 300 tasks/s")
	f.check(t)
	c.checkWorkersRunning(ctx)
}
