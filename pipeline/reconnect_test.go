package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
)

// An idle worker has one pull request waiting on the server, and a server
// restart loses it. nats.go v1.55 asks again after the reconnect; this
// pins that the worker's waiting policy keeps that recovery (it passed
// before the heartbeat fix too: the stall needs a request lost without a
// reconnect, which TestWorkerAsksAgainAfterUnansweredPull reproduces).
func TestIdleWorkerResumesAfterServerRestart(t *testing.T) {
	port := natstest.FreePorts(t, 1)[0]
	store := t.TempDir()
	at := func(o *server.Options) { o.Port, o.StoreDir = port, store }

	srv := natstest.Start(t, at)
	nc := natstest.Connect(t, srv, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, nc: nc, js: js, cfg: cfg}
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})

	var ids []string
	for i := range 10 {
		ids = append(ids, h.submit(fmt.Sprintf(`{"task_id":"T-before-%d","role":"architect"}`, i), false))
	}
	h.waitOutcomes(len(ids), 30*time.Second)
	// Let the worker settle into waiting on its pull request.
	time.Sleep(200 * time.Millisecond)

	srv.Shutdown()
	srv.WaitForShutdown()
	natstest.Start(t, at)
	deadline := time.Now().Add(20 * time.Second)
	for !nc.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("client did not reconnect within 20s")
		}
		time.Sleep(10 * time.Millisecond)
	}

	for i := range 10 {
		ids = append(ids, h.submit(fmt.Sprintf(`{"task_id":"T-after-%d","role":"architect"}`, i), false))
	}
	start := time.Now()
	exactlyOnce(t, ids, h.waitOutcomes(len(ids), 15*time.Second))
	t.Logf("outcomes after the restart took %s", time.Since(start))
}

// A worker connected to a node that stays up loses its waiting pull
// request when the node leading the consumer goes away, and requests it
// sends while the consumer has no leader go unanswered; it sees no
// reconnect. Two of three nodes stop, so for a while there is no leader;
// then one comes back, and the worker must be pulling from the new
// leader. In process the election is fast and the server tells the client
// of the leadership change, so this passed before the heartbeat fix too;
// it pins the recovery, not the stall (see
// TestWorkerAsksAgainAfterUnansweredPull).
func TestWorkerSurvivesConsumerWithoutLeader(t *testing.T) {
	cluster := natstest.StartCluster(t, 3)
	cfg := testConfig()
	cfg.Replicas = 3
	ctx := context.Background()
	leaderOf := func(js jetstream.JetStream) string {
		t.Helper()
		for range 400 {
			c, err := js.Consumer(ctx, cfg.TasksStream, cfg.Consumer)
			if err == nil && c.CachedInfo().Cluster != nil && c.CachedInfo().Cluster.Leader != "" {
				return c.CachedInfo().Cluster.Leader
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatal("consumer has no leader after 20s")
		return ""
	}
	admin := natstest.Connect(t, cluster.Servers[0])
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipeline.EnsureRetry(ctx, ajs, cfg, nil); err != nil {
		t.Fatal(err)
	}
	leader := leaderOf(ajs)
	stay, other := -1, -1
	lead := -1
	for i, s := range cluster.Servers {
		switch {
		case s.Name() == leader:
			lead = i
		case stay < 0:
			stay = i
		default:
			other = i
		}
	}
	// The worker knows only the node that stays: it never reconnects.
	nc := natstest.Connect(t, cluster.Servers[stay])
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, nc: nc, js: js, cfg: cfg}
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})

	var ids []string
	for i := range 10 {
		ids = append(ids, h.submit(fmt.Sprintf(`{"task_id":"T-before-%d","role":"architect"}`, i), false))
	}
	h.waitOutcomes(len(ids), 30*time.Second)
	time.Sleep(200 * time.Millisecond)

	for _, i := range []int{lead, other} {
		cluster.Servers[i].Shutdown()
		cluster.Servers[i].WaitForShutdown()
	}
	// Long enough for the worker's requests to the leaderless consumer to
	// go unanswered.
	time.Sleep(2 * time.Second)
	cluster.Restart(other)
	cluster.WaitForMetaLeader()
	for _, name := range []string{cfg.TasksStream, cfg.SpecsStream} {
		waitStreamLeader(t, js, name)
	}
	t.Logf("stopped %s (consumer leader) and %s; restarted %s; consumer leader now %s",
		leader, cluster.Servers[other].Name(), cluster.Servers[other].Name(), leaderOf(js))

	for i := range 10 {
		ids = append(ids, h.submit(fmt.Sprintf(`{"task_id":"T-after-%d","role":"architect"}`, i), false))
	}
	start := time.Now()
	exactlyOnce(t, ids, h.waitOutcomes(len(ids), 20*time.Second))
	t.Logf("outcomes after the leader came back took %s", time.Since(start))
}

// A pull request the server refuses with a status nats.go does not count
// as an answer leaves the iterator believing a request is outstanding; so
// does one sent while a consumer has no leader (lost without a reply), the
// stall a stream-leader restart caused in the container tests. The server
// answers a waiting request with heartbeats, so silence means no request:
// the worker must notice it and ask again. Here the consumer accepts one
// waiting request, another client holds that place for 3 s, and the
// worker's first request is refused ("Exceeded MaxWaiting").
func TestWorkerAsksAgainAfterUnansweredPull(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, cfg)
	ctx := context.Background()
	cons, err := h.js.Consumer(ctx, cfg.TasksStream, cfg.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	cc := cons.CachedInfo().Config
	cc.MaxWaiting = 1 // fixed at creation: make the consumer again
	if err := h.js.DeleteConsumer(ctx, cfg.TasksStream, cfg.Consumer); err != nil {
		t.Fatal(err)
	}
	if cons, err = h.js.CreateConsumer(ctx, cfg.TasksStream, cc); err != nil {
		t.Fatalf("consumer with one waiting request: %v", err)
	}
	blocker, err := cons.Fetch(1, jetstream.FetchMaxWait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cfg.CreateStreams = false // keep MaxWaiting 1
	h.cfg = cfg
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
	for range blocker.Messages() {
		t.Error("the blocking fetch got a task; none was published yet")
	}
	var ids []string
	for i := range 10 {
		ids = append(ids, h.submit(fmt.Sprintf(`{"task_id":"T-%d","role":"architect"}`, i), false))
	}
	exactlyOnce(t, ids, h.waitOutcomes(len(ids), 20*time.Second))
}

func waitStreamLeader(t *testing.T, js jetstream.JetStream, name string) {
	t.Helper()
	for range 400 {
		s, err := js.Stream(context.Background(), name)
		if err == nil && s.CachedInfo().Cluster != nil && s.CachedInfo().Cluster.Leader != "" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("stream %s has no leader after 20s", name)
}

// TestStopWithBrokerDown: with the server gone and nothing in flight, Run
// returns promptly after its context ends. Draining the pull iterator
// waits for the server (nats.go flushes first, for up to 10 s), so a
// worker stopped during an outage used to take 10 s and outlive a 5 s
// --drain-timeout.
func TestStopWithBrokerDown(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv, nats.MaxReconnects(-1))
	js := natstest.JetStream(t, nc)
	cfg := testConfig()
	ctx := context.Background()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, nc: nc, js: js, cfg: cfg}
	r := h.start(loadSource(t, emptyRoot(t)), pipeline.Options{})
	exactlyOnce(t, []string{h.submit(`{"task_id":"T-1","role":"architect"}`, false)}, h.waitOutcomes(1, 10*time.Second))
	cons, err := js.Consumer(ctx, cfg.TasksStream, cfg.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumAckPending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task was not acknowledged within 10s")
		}
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	for nc.IsConnected() {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	r.cancel()
	select {
	case <-r.done:
	case <-time.After(3 * time.Second):
		t.Fatal("Run did not return within 3s of its context ending with the broker down")
	}
	t.Logf("Run returned %s after cancel", time.Since(start))
	if *r.err != nil {
		t.Errorf("Run: %v", *r.err)
	}
}
