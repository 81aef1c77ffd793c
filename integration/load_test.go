package integration

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/schematest"
)

const (
	taskSource  = "rolecall-integration"
	tasksStream = "ROLECALL_TASKS"
	specsStream = "ROLECALL_SPECS"
	consumer    = "rolecall-workers"
	// outcomesStream holds the KV bucket ROLECALL_OUTCOMES, the workers'
	// idempotency store.
	outcomesStream = "KV_ROLECALL_OUTCOMES"
)

// taskSpec is one task of a load and the outcome it must get.
type taskSpec struct {
	id     string // CloudEvents id of the task event
	taskID string
	role   string
	data   []byte
	want   string // events.TypeSpecResolved or events.TypeSpecFailed
	code   string // the failure code when want is failed
}

var roles = []string{
	"analyst", "architect", "critic", "designer", "documenter", "implementer",
	"operator", "planner", "researcher", "reviewer", "security-auditor", "tester",
}

// makeTasks builds n tasks: mostly resolvable, one in 20 asking for Modes
// the default pack does not allow, one in 50 naming no known role, so
// both outcome schemas are exercised and every worker must reach the same
// verdict for the same input.
func makeTasks(scenario string, n int) []taskSpec {
	tasks := make([]taskSpec, n)
	for i := range n {
		t := taskSpec{
			id:     fmt.Sprintf("%s-%05d", scenario, i),
			taskID: fmt.Sprintf("T-%s-%05d", scenario, i),
			role:   roles[i%len(roles)],
			want:   events.TypeSpecResolved,
		}
		switch {
		case i%50 == 13:
			t.role, t.want, t.code = "ghost", events.TypeSpecFailed, "role_unknown"
			t.data = fmt.Appendf(nil, `{"task_id":%q,"role":"ghost"}`, t.taskID)
		case i%20 == 7:
			t.role, t.want, t.code = "analyst", events.TypeSpecFailed, "mode_disallowed"
			t.data = fmt.Appendf(nil, `{"task_id":%q,"role":"analyst","modes":["fast","slow"]}`, t.taskID)
		case i%3 == 0:
			t.data = fmt.Appendf(nil, `{"task_id":%q,"role":%q,"modes":["systematic"]}`, t.taskID, t.role)
		default:
			t.data = fmt.Appendf(nil, `{"task_id":%q,"role":%q,"overrides":{"extra_prompt":"integration task %d"}}`, t.taskID, t.role, i)
		}
		tasks[i] = t
	}
	return tasks
}

// load publishes tasks at a steady rate the way a planner should: each
// with a Nats-Msg-Id, and a publish that got no PubAck (a node down, a
// leader election) is retried with the same id, so it is one task.
type load struct {
	tasks    []taskSpec
	start    time.Time
	retries  atomic.Int64
	accepted atomic.Int64
	done     chan struct{}
	mu       sync.Mutex
	err      error
}

const publishers = 8

func (c *cluster) startLoad(ctx context.Context, tasks []taskSpec, perSecond float64) *load {
	l := &load{tasks: tasks, start: time.Now(), done: make(chan struct{})}
	next := make(chan int)
	go func() {
		defer close(next)
		interval := time.Duration(float64(time.Second) / perSecond)
		for i := range tasks {
			if d := time.Until(l.start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d)
			}
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := c.publishTask(ctx, l, tasks[i]); err != nil {
					l.mu.Lock()
					if l.err == nil {
						l.err = err
					}
					l.mu.Unlock()
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(l.done) }()
	return l
}

func (c *cluster) publishTask(ctx context.Context, l *load, t taskSpec) error {
	header, body, err := events.EncodeTask(taskSource, t.id, t.data, "", "", t.id[len(t.id)-1]%2 == 0)
	if err != nil {
		return err
	}
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := c.js.PublishMsg(pctx, &nats.Msg{Subject: "rolecall.tasks." + t.role, Header: header, Data: body},
			jetstream.WithMsgID(taskSource+"/"+t.id))
		cancel()
		if err == nil {
			l.accepted.Add(1)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("publish %s: gave up: %w", t.id, err)
		}
		l.retries.Add(1)
		time.Sleep(200 * time.Millisecond)
	}
}

// wait blocks until every task was accepted by the tasks stream.
func (l *load) wait(t *testing.T) {
	t.Helper()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		t.Fatalf("load: %v", l.err)
	}
	if got := l.accepted.Load(); got != int64(len(l.tasks)) {
		t.Fatalf("load: %d of %d tasks accepted", got, len(l.tasks))
	}
}

// observer counts every outcome publish on the wire with a plain
// subscription, including the ones JetStream then drops as duplicates:
// that difference is the duplicates the Nats-Msg-Id suppressed.
type observer struct {
	n   atomic.Int64
	sub *nats.Subscription
}

// observe subscribes through one node; pick one the test will not stop.
func (c *cluster) observe(via *node) *observer {
	c.t.Helper()
	nc, _ := c.connect(via.url())
	o := &observer{}
	sub, err := nc.Subscribe("rolecall.specs.>", func(*nats.Msg) { o.n.Add(1) })
	if err != nil {
		c.t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		c.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		c.t.Fatal(err)
	}
	o.sub = sub
	return o
}

// specsCount is the number of outcomes stored so far.
func (c *cluster) specsCount(ctx context.Context) (uint64, error) {
	s, err := c.js.Stream(ctx, specsStream)
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.Msgs, nil
}

// waitOutcomes blocks until at least n outcomes are stored: the way a
// test places a fault "mid-load".
func (c *cluster) waitOutcomes(ctx context.Context, n int, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got, err := c.specsCount(ctx)
		if err == nil && got >= uint64(n) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("only %d outcomes after %s, want %d (last error: %v)", got, within, n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitDone blocks until the fleet is idle: at least want outcomes stored,
// nothing pending or unacknowledged on the tasks consumer, nothing left
// on the dead-letter stream, and the outcome count unchanged over a few
// seconds (a late duplicate would have to show up then).
func (c *cluster) waitDone(ctx context.Context, want int, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var last uint64
	stableSince := time.Time{}
	for {
		got, err := c.specsCount(ctx)
		idle := false
		if err == nil && got >= uint64(want) {
			idle = c.idle(ctx)
		}
		switch {
		case !idle || got != last:
			stableSince = time.Time{}
		case stableSince.IsZero():
			stableSince = time.Now()
		case time.Since(stableSince) > 3*time.Second:
			return
		}
		last = got
		if time.Now().After(deadline) {
			info, ierr := c.consumerInfo(ctx)
			c.t.Fatalf("not done after %s: %d outcomes of %d (err %v); consumer %+v (err %v)", within, got, want, err, info, ierr)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (c *cluster) idle(ctx context.Context) bool {
	info, err := c.consumerInfo(ctx)
	if err != nil || info.NumPending != 0 || info.NumAckPending != 0 {
		return false
	}
	dl, err := c.js.Stream(ctx, "ROLECALL_DEADLETTER")
	return err == nil && dl.CachedInfo().State.Msgs == 0
}

func (c *cluster) consumerInfo(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	cons, err := c.js.Consumer(ctx, tasksStream, consumer)
	if err != nil {
		return nil, err
	}
	return cons.Info(ctx)
}

// figures are what a scenario reports (and docs/RELIABILITY.md copies).
type figures struct {
	Scenario string
	Tasks    int // accepted by ROLECALL_TASKS
	// Stored is the number of messages in ROLECALL_TASKS: a publish
	// retried for want of a PubAck must still be one task.
	Stored   int
	Outcomes int // messages in ROLECALL_SPECS
	Distinct int // distinct task ids among them
	Resolved int
	Failed   int
	// Duplicated counts task ids with more than one stored outcome;
	// Missing, tasks with none; Wrong, outcomes of the wrong type, with
	// attributes that do not match the task, or data failing its schema.
	Duplicated, Missing, Wrong int
	Exhausted                  int // delivery_exhausted outcomes
	// PublishesSeen counts outcome publishes on the wire; Suppressed is
	// PublishesSeen − Outcomes: answers to redelivered tasks that JetStream
	// dropped by Nats-Msg-Id (plus any publish that reached no stream
	// leader during an election).
	PublishesSeen, Suppressed int
	// Redeliveries counts deliveries of the tasks consumer beyond the
	// first per task.
	Redeliveries int
	// Retries counts task publishes the test had to repeat (no PubAck).
	Retries int
	Wall    time.Duration
}

// verify reads every stored outcome and checks it against the tasks:
// exactly one per task, the expected type (and code), CloudEvents
// attributes that identify the task, and data valid against its schema.
func (c *cluster) verify(ctx context.Context, scenario string, l *load, obs *observer) figures {
	c.t.Helper()
	f := figures{Scenario: scenario, Tasks: int(l.accepted.Load()), Retries: int(l.retries.Load()), Wall: time.Since(l.start)}
	byTask := make(map[string]taskSpec, len(l.tasks))
	for _, t := range l.tasks {
		byTask[t.taskID] = t
	}
	seen := make(map[string]int, len(l.tasks))

	total, err := c.specsCount(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	cons, err := c.js.OrderedConsumer(ctx, specsStream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		c.t.Fatal(err)
	}
	wrong := func(format string, args ...any) {
		f.Wrong++
		if f.Wrong <= 10 {
			c.t.Errorf(format, args...)
		}
	}
	fetchErrs := 0
	for uint64(f.Outcomes) < total {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			// In a cluster the ordered consumer is created asynchronously:
			// the first pull may find no responder yet. It is recreated
			// from where it left off, so retrying is safe.
			if fetchErrs++; fetchErrs > 20 {
				c.t.Fatalf("read %s: %v", specsStream, err)
			}
			time.Sleep(250 * time.Millisecond)
			continue
		}
		n := 0
		for m := range batch.Messages() {
			n++
			f.Outcomes++
			ev, err := events.DecodeOutcome(m.Headers(), m.Data())
			if err != nil {
				wrong("outcome %s: %v", m.Headers().Get(nats.MsgIdHdr), err)
				continue
			}
			taskID, _ := ev.Extensions()["taskid"].(string)
			cause, _ := ev.Extensions()["causationid"].(string)
			seen[taskID]++
			t, ok := byTask[taskID]
			if !ok {
				wrong("outcome %s names unknown task %q", ev.ID(), taskID)
				continue
			}
			if cause != t.id || ev.Subject() != t.taskID || ev.ID() != events.OutcomeID(taskSource, t.id) || m.Headers().Get(nats.MsgIdHdr) != ev.ID() {
				wrong("outcome of %s: id %s causationid %q subject %q msg-id %q do not identify task event %s",
					taskID, ev.ID(), cause, ev.Subject(), m.Headers().Get(nats.MsgIdHdr), t.id)
			}
			schema := events.SchemaResolved
			if ev.Type() == events.TypeSpecFailed {
				schema = events.SchemaFailed
			}
			if err := schematest.Validate(schema, ev.Data()); err != nil {
				wrong("outcome of %s does not match %s: %v", taskID, schema, err)
			}
			switch ev.Type() {
			case events.TypeSpecResolved:
				f.Resolved++
			case events.TypeSpecFailed:
				f.Failed++
				fd, err := events.DecodeFailureData(ev)
				if err != nil {
					wrong("failure data of %s: %v", taskID, err)
					continue
				}
				if fd.Code == "delivery_exhausted" {
					f.Exhausted++
					continue // still one outcome; counted and reported
				}
				if string(fd.Code) != t.code {
					wrong("outcome of %s: code %s, want %s", taskID, fd.Code, t.code)
				}
			}
			if ev.Type() != t.want {
				wrong("outcome of %s: type %s, want %s", taskID, ev.Type(), t.want)
			}
		}
		if n == 0 {
			if fetchErrs++; fetchErrs > 20 {
				c.t.Fatalf("read %s: stuck at %d of %d: %v", specsStream, f.Outcomes, total, batch.Error())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	f.Distinct = len(seen)
	for _, t := range l.tasks {
		switch n := seen[t.taskID]; {
		case n == 0:
			f.Missing++
		case n > 1:
			f.Duplicated++
		}
	}
	ts, err := c.js.Stream(ctx, tasksStream)
	if err != nil {
		c.t.Fatal(err)
	}
	f.Stored = int(ts.CachedInfo().State.Msgs)
	info, err := c.consumerInfo(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	f.Redeliveries = int(info.Delivered.Consumer) - f.Tasks
	c.t.Logf("consumer %s: delivered %+v ack floor %+v redelivered %d ack pending %d pending %d; config max_ack_pending %d ack_wait %s",
		consumer, info.Delivered, info.AckFloor, info.NumRedelivered, info.NumAckPending, info.NumPending, info.Config.MaxAckPending, info.Config.AckWait)
	if obs != nil {
		f.PublishesSeen = int(obs.n.Load())
		f.Suppressed = f.PublishesSeen - f.Outcomes
	}
	return f
}

// check asserts the promise every scenario keeps: every accepted task has
// exactly one outcome, of the right kind, valid against its schema.
func (f figures) check(t *testing.T) {
	t.Helper()
	if f.Outcomes != f.Tasks || f.Distinct != f.Tasks || f.Missing != 0 || f.Duplicated != 0 {
		t.Errorf("%s: %d tasks, %d outcomes for %d distinct tasks: %d missing, %d duplicated; want exactly one each",
			f.Scenario, f.Tasks, f.Outcomes, f.Distinct, f.Missing, f.Duplicated)
	}
	if f.Stored != f.Tasks {
		t.Errorf("%s: %d tasks accepted but %d stored in %s: a retried publish became a second task", f.Scenario, f.Tasks, f.Stored, tasksStream)
	}
	if f.Wrong != 0 {
		t.Errorf("%s: %d outcomes wrong (see above)", f.Scenario, f.Wrong)
	}
	if f.Exhausted != 0 {
		t.Errorf("%s: %d tasks reached max_deliver (delivery_exhausted): faults this short must not exhaust a task", f.Scenario, f.Exhausted)
	}
}

// report logs the figures and, with ROLECALL_IT_FIGURES=FILE, appends them
// to FILE as a Markdown table row.
func (f figures) report(t *testing.T, note string) {
	t.Helper()
	t.Logf("figures: scenario=%s tasks=%d stored=%d outcomes=%d distinct=%d resolved=%d failed=%d duplicated=%d missing=%d "+
		"publishes_seen=%d suppressed=%d redeliveries=%d publish_retries=%d wall=%s (%s)",
		f.Scenario, f.Tasks, f.Stored, f.Outcomes, f.Distinct, f.Resolved, f.Failed, f.Duplicated, f.Missing,
		f.PublishesSeen, f.Suppressed, f.Redeliveries, f.Retries, f.Wall.Round(100*time.Millisecond), note)
	path := os.Getenv("ROLECALL_IT_FIGURES")
	if path == "" {
		return
	}
	row := fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %d | %d | %.1f s | %s |\n",
		f.Scenario, f.Tasks, f.Outcomes, f.Duplicated+f.Missing, f.Suppressed, f.Redeliveries, f.Retries, f.Resolved,
		f.Wall.Seconds(), note)
	fh, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Errorf("figures file: %v", err)
		return
	}
	defer fh.Close()
	if _, err := fh.WriteString(row); err != nil {
		t.Errorf("figures file: %v", err)
	}
}
