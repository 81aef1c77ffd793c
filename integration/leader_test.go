package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/testcontainers/testcontainers-go"
)

// TestSpecsLeaderLossUnderLoad: the outcome stream ROLECALL_SPECS loses
// its leader again and again under a steady load, first by forced
// elections (six stepdowns, 2 s apart, the last one normally back onto
// nats-3), then by SIGKILL of nats-3, which then leads both ROLECALL_SPECS
// and the idempotency store's bucket: both stay leaderless until the
// survivors' election timeout (4–9 s in nats-server), and nats-3 is
// started again 12 s after the kill. The task side (ROLECALL_TASKS and its consumer) is
// led elsewhere, so what fails is the outcome path alone: publish,
// look-up, record. A worker retries such a fault in place while keeping
// its task alive, so no task may be nak'ed, none may reach max_deliver
// (delivery_exhausted), and every task has exactly one outcome.
func TestSpecsLeaderLossUnderLoad(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.startWorkers(3)
	c.checkReplicated(ctx)

	watch, victim := c.nodes[0], c.nodes[2]
	// The outcome path is led by the victim, the task path by the others.
	c.moveLeader(ctx, specsStream, "", victim)
	c.moveLeader(ctx, outcomesStream, "", victim)
	c.moveLeaderOff(ctx, tasksStream, "", victim)
	c.moveLeaderOff(ctx, tasksStream, consumer, victim)
	c.moveLeaderOff(ctx, "ROLECALL_DEADLETTER", "", victim)

	obs := c.observe(watch)
	acks := c.watchAcks(watch)
	probe := c.probeLeaders(watch, specsStream, outcomesStream)

	tasks := makeTasks("specsleader", 10500)
	l := c.startLoad(ctx, tasks, 300)
	c.waitOutcomes(ctx, 1500, 2*time.Minute)
	firstFault := time.Now()

	// Forced elections: each stepdown names the next node in turn, so the
	// last one normally leaves ROLECALL_SPECS on the victim again. The
	// server may elect another (a transfer is only a hint); any new
	// leader ends the election.
	var stepdowns []time.Duration
	var stepped []time.Time
	cur := victim.name
	for i := range 6 {
		to := c.nodes[i%nodeCount]
		if to.name == cur {
			to = c.nodes[(i+1)%nodeCount]
		}
		at := time.Now()
		stepped = append(stepped, at)
		c.stepDown(ctx, specsStream, "", to.name)
		old := cur
		gap, leader := probe.waitLeader(t, specsStream, at, func(l string) bool { return l != "" && l != old }, 30*time.Second)
		cur = leader
		stepdowns = append(stepdowns, gap)
		t.Logf("stepdown of %s towards %s: %s answered as leader after %s", specsStream, to.name, leader, gap.Round(10*time.Millisecond))
		time.Sleep(2 * time.Second)
	}
	if cur != victim.name {
		c.moveLeader(ctx, specsStream, "", victim)
		time.Sleep(2 * time.Second)
	}
	if got := c.streamLeader(ctx, outcomesStream); got != victim {
		t.Fatalf("%s is led by %s, want %s", outcomesStream, got.name, victim.name)
	}

	// The victim dies with both leaders of the outcome path.
	killed := time.Now()
	c.signal(ctx, victim.c, "KILL")
	c.waitExit(ctx, victim.c, 10*time.Second)
	notVictim := func(l string) bool { return l != "" && l != victim.name }
	specsGap, _ := probe.waitLeader(t, specsStream, killed, notVictim, 30*time.Second)
	kvGap, _ := probe.waitLeader(t, outcomesStream, killed, notVictim, 30*time.Second)
	t.Logf("SIGKILL %s: %s led again after %s, %s after %s", victim.name,
		specsStream, specsGap.Round(10*time.Millisecond), outcomesStream, kvGap.Round(10*time.Millisecond))
	time.Sleep(time.Until(killed.Add(12 * time.Second)))
	c.restart(ctx, victim.c)
	restarted := time.Now()
	t.Logf("restarted %s %s after the kill", victim.name, restarted.Sub(killed).Round(100*time.Millisecond))

	l.wait(t)
	c.waitDone(ctx, len(tasks), 3*time.Minute)
	for _, s := range []string{specsStream, outcomesStream, tasksStream} {
		c.waitCurrent(ctx, s, time.Minute)
	}
	probe.close()

	f := c.verify(ctx, "specs-leader", l, obs)
	a := acks.snapshot()
	before := a.rate(firstFault.Add(-3*time.Second), firstFault)
	// The longest time without an ack after each stepdown (until the
	// next one) and after the kill (until the restart).
	var stepStalls []time.Duration
	for i, at := range stepped {
		next := killed
		if i+1 < len(stepped) {
			next = stepped[i+1]
		}
		stepStalls = append(stepStalls, a.longestStall(at, next))
	}
	killStall := a.longestStall(killed, restarted)
	inPlace, nakLogged := 0, 0
	faults := map[string]int{}
	for _, w := range c.workers {
		for line := range strings.Lines(c.logs(w.c)) {
			var e struct {
				Msg   string `json:"msg"`
				Step  string `json:"step"`
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(line), &e) != nil {
				continue
			}
			switch e.Msg {
			case "transient fault; retrying in place":
				inPlace++
				faults[e.Step+": "+e.Error]++
			case "transient fault; task will be redelivered":
				nakLogged++
			}
		}
	}
	t.Logf("faults retried in place, by step and first error: %v", faults)
	f.report(t, fmt.Sprintf("6 stepdowns of ROLECALL_SPECS (leader again after %s), then SIGKILL of the node leading it and ROLECALL_OUTCOMES (led again after %s and %s), restarted after 12 s",
		spread(stepdowns), specsGap.Round(100*time.Millisecond), kvGap.Round(100*time.Millisecond)))
	t.Logf("figures: scenario=specs-leader exhausted=%d naks=%d max_delivery=%d acks=%d in_progress=%d "+
		"answered_after_redelivery=%d retried_in_place=%d naks_logged=%d stepdown_leaderless=%s kill_leaderless_specs=%s kill_leaderless_kv=%s "+
		"ack_rate_before=%.0f/s ack_stall_per_stepdown=%s ack_stall_kill=%s ack_rate_kill_to_restart=%.0f/s",
		f.Exhausted, a.naks, a.maxDelivered, a.acks, a.progress, a.redeliveredAndAnswered, inPlace, nakLogged, spread(stepdowns),
		specsGap.Round(10*time.Millisecond), kvGap.Round(10*time.Millisecond),
		before, spread(stepStalls), killStall.Round(100*time.Millisecond), a.rate(killed, restarted))
	f.check(t)
	if a.naks != 0 || nakLogged != 0 {
		t.Errorf("%d naks on the wire, %d logged by the workers: a leader election of the outcome stream must be retried in place, costing no delivery", a.naks, nakLogged)
	}
	// Every outcome is recorded in the idempotency store, one key per task
	// event: a record the faults interrupted was retried, not skipped.
	if kv, err := c.js.Stream(ctx, outcomesStream); err != nil {
		t.Errorf("%s: %v", outcomesStream, err)
	} else if n := kv.CachedInfo().State.Msgs; n != uint64(f.Tasks) {
		t.Errorf("%s holds %d records for %d tasks, want one each", outcomesStream, n, f.Tasks)
	}
	if inPlace == 0 {
		t.Errorf("no worker logged a fault retried in place: the outcome stream never failed a request, so the test proved nothing")
	}
	c.checkWorkersRunning(ctx)
}

// spread formats durations as min–max.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	lo, hi := slices.Min(ds), slices.Max(ds)
	return lo.Round(10*time.Millisecond).String() + "–" + hi.Round(10*time.Millisecond).String()
}

// ---- leaders ----

// stepDown asks the leader of a stream (consumer "") or of a consumer to
// step down, naming the node that should lead next ("" = any).
func (c *cluster) stepDown(ctx context.Context, stream, cons, preferred string) {
	c.t.Helper()
	subject := "$JS.API.STREAM.LEADER.STEPDOWN." + stream
	if cons != "" {
		subject = "$JS.API.CONSUMER.LEADER.STEPDOWN." + stream + "." + cons
	}
	var body []byte
	if preferred != "" {
		body, _ = json.Marshal(map[string]any{"placement": map[string]string{"preferred": preferred}})
	}
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := c.nc.RequestWithContext(rctx, subject, body)
		cancel()
		if err == nil {
			var resp struct {
				Success bool `json:"success"`
				Error   *struct {
					Code        int    `json:"err_code"`
					Description string `json:"description"`
				} `json:"error"`
			}
			if err = json.Unmarshal(msg.Data, &resp); err == nil {
				if resp.Success {
					return
				}
				err = fmt.Errorf("%s", msg.Data)
			}
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	c.t.Fatalf("step down %s %s (preferred %q): %v", stream, cons, preferred, last)
}

// leader names the node leading a stream (cons "") or a consumer.
func (c *cluster) leader(ctx context.Context, stream, cons string) string {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if cons == "" {
		s, err := c.js.Stream(rctx, stream)
		if err != nil || s.CachedInfo().Cluster == nil {
			return ""
		}
		return s.CachedInfo().Cluster.Leader
	}
	k, err := c.js.Consumer(rctx, stream, cons)
	if err != nil || k.CachedInfo().Cluster == nil {
		return ""
	}
	return k.CachedInfo().Cluster.Leader
}

// moveLeader makes to the leader of a stream or consumer (before the
// load: it is not a fault the test counts).
func (c *cluster) moveLeader(ctx context.Context, stream, cons string, to *node) {
	c.t.Helper()
	c.moveUntil(ctx, stream, cons, to.name, func(l string) bool { return l == to.name })
}

// moveLeaderOff makes any node but off the leader of a stream or consumer.
func (c *cluster) moveLeaderOff(ctx context.Context, stream, cons string, off *node) {
	c.t.Helper()
	c.moveUntil(ctx, stream, cons, "", func(l string) bool { return l != "" && l != off.name })
}

func (c *cluster) moveUntil(ctx context.Context, stream, cons, preferred string, ok func(string) bool) {
	c.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		l := c.leader(ctx, stream, cons)
		if ok(l) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s %s: leader %q after a minute of stepdowns", stream, cons, l)
		}
		if l != "" {
			c.stepDown(ctx, stream, cons, preferred)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// leaderProbe asks each stream's info every 100 ms through a node of its
// own and records who answered as leader ("" for no answer or none).
type leaderProbe struct {
	mu      sync.Mutex
	samples map[string][]leaderSample
	stop    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

type leaderSample struct {
	at     time.Time // when the request was sent
	leader string
}

func (c *cluster) probeLeaders(via *node, streams ...string) *leaderProbe {
	c.t.Helper()
	_, js := c.connect(via.url())
	p := &leaderProbe{samples: map[string][]leaderSample{}, stop: make(chan struct{})}
	for _, name := range streams {
		p.wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-p.stop:
					return
				case <-tick.C:
				}
				at := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				leader := ""
				if s, err := js.Stream(ctx, name); err == nil && s.CachedInfo().Cluster != nil {
					leader = s.CachedInfo().Cluster.Leader
				}
				cancel()
				p.mu.Lock()
				p.samples[name] = append(p.samples[name], leaderSample{at: at, leader: leader})
				p.mu.Unlock()
			}
		})
	}
	c.t.Cleanup(p.close)
	return p
}

func (p *leaderProbe) close() {
	p.once.Do(func() { close(p.stop); p.wg.Wait() })
}

// waitLeader waits for the first answer, asked at since or later, naming
// a leader that ok accepts, and returns how long after since it was asked
// — the time the stream had no leader that answered, to within the 100 ms
// the probe waits between requests — and the leader.
func (p *leaderProbe) waitLeader(t *testing.T, stream string, since time.Time, ok func(string) bool, within time.Duration) (time.Duration, string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for seen := 0; ; {
		p.mu.Lock()
		ss := p.samples[stream]
		for ; seen < len(ss); seen++ {
			if s := ss[seen]; !s.at.Before(since) && ok(s.leader) {
				p.mu.Unlock()
				return s.at.Sub(since), s.leader
			}
		}
		p.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%s: no acceptable leader answered within %s", stream, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- acknowledgements ----

// ackWatch reads what the workers tell the tasks consumer: every ack, nak
// and InProgress on $JS.ACK.<stream>.<consumer>.>, seen through a node
// the test keeps up.
type ackWatch struct {
	mu    sync.Mutex
	start time.Time
	// acks per 100 ms since start
	buckets                []int
	acks, naks, progress   int
	maxDelivered           uint64
	unknown                int
	redeliveredAndAnswered int
}

const ackBucket = 100 * time.Millisecond

func (c *cluster) watchAcks(via *node) *ackWatch {
	c.t.Helper()
	nc, _ := c.connect(via.url())
	a := &ackWatch{start: time.Now()}
	sub, err := nc.Subscribe("$JS.ACK."+tasksStream+"."+consumer+".>", a.record)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		c.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		c.t.Fatal(err)
	}
	return a
}

// record parses $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>
// (or the form with domain and account hash before the stream).
func (a *ackWatch) record(m *nats.Msg) {
	tok := strings.Split(m.Subject, ".")
	var delivered uint64
	var err error
	switch len(tok) {
	case 9:
		delivered, err = strconv.ParseUint(tok[4], 10, 64)
	case 11, 12:
		delivered, err = strconv.ParseUint(tok[6], 10, 64)
	default:
		err = fmt.Errorf("unexpected")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.unknown++
		return
	}
	body := string(m.Data)
	switch {
	case body == "" || body == "+ACK":
		a.acks++
		a.maxDelivered = max(a.maxDelivered, delivered)
		if delivered > 1 {
			a.redeliveredAndAnswered++
		}
		i := int(time.Since(a.start) / ackBucket)
		for len(a.buckets) <= i {
			a.buckets = append(a.buckets, 0)
		}
		a.buckets[i]++
	case strings.HasPrefix(body, "-NAK"):
		a.naks++
	case body == "+WPI":
		a.progress++
	default:
		a.unknown++
	}
}

func (a *ackWatch) snapshot() *ackWatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	return &ackWatch{start: a.start, buckets: slices.Clone(a.buckets), acks: a.acks, naks: a.naks, progress: a.progress,
		maxDelivered: a.maxDelivered, unknown: a.unknown, redeliveredAndAnswered: a.redeliveredAndAnswered}
}

func (a *ackWatch) bucket(t time.Time) int { return int(t.Sub(a.start) / ackBucket) }

// rate is acks per second between from and to.
func (a *ackWatch) rate(from, to time.Time) float64 {
	n := 0
	for i := max(a.bucket(from), 0); i < min(a.bucket(to), len(a.buckets)); i++ {
		n += a.buckets[i]
	}
	return float64(n) / to.Sub(from).Seconds()
}

// longestStall is the longest run of 100 ms buckets without an ack
// between from and to.
func (a *ackWatch) longestStall(from, to time.Time) time.Duration {
	run, longest := 0, 0
	for i := max(a.bucket(from), 0); i < a.bucket(to); i++ {
		if i < len(a.buckets) && a.buckets[i] > 0 {
			run = 0
			continue
		}
		run++
		longest = max(longest, run)
	}
	return time.Duration(longest) * ackBucket
}

// logs returns a container's whole log.
func (c *cluster) logs(ctr *testcontainers.DockerContainer) string {
	r, err := ctr.Logs(context.Background())
	if err != nil {
		c.t.Errorf("logs: %v", err)
		return ""
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	return string(b)
}
