package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
)

// testSource is the CloudEvents source of every task the suite submits.
const testSource = "reliability"

// defaults are the stream and consumer names the worker uses unless
// configured otherwise.
var defaults = pipeline.DefaultConfig()

// client is the test's own connection: it plays the planner (submitting
// tasks) and the auditor (reading ROLECALL_SPECS).
type client struct {
	t  testing.TB
	nc *nats.Conn
	js jetstream.JetStream
}

func connect(t testing.TB, url string, opts ...nats.Option) *client {
	t.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("test client: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &client{t: t, nc: nc, js: js}
}

// in returns the client bound to t, for use inside a subtest.
func (c *client) in(t testing.TB) *client {
	cc := *c
	cc.t = t
	return &cc
}

func ctxT(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// publishTask publishes one task event and returns its stream sequence.
func (c *client) publishTask(id, data string, binary bool) uint64 {
	c.t.Helper()
	hdr, body, err := events.EncodeTask(testSource, id, []byte(data), "", "", binary)
	if err != nil {
		c.t.Fatalf("encode task %s: %v", id, err)
	}
	return c.publishRaw("rolecall.tasks.test", hdr, body)
}

// publishRaw publishes bytes as they are (hostile input included) and
// returns the tasks-stream sequence, retrying while the server restarts.
func (c *client) publishRaw(subject string, hdr nats.Header, body []byte) uint64 {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := ctxT(5 * time.Second)
		ack, err := c.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: hdr, Data: body})
		cancel()
		if err == nil {
			return ack.Sequence
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) || errors.Is(err, nats.ErrMaxPayload) || time.Now().After(deadline) {
			c.t.Fatalf("publish to %s: %v", subject, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submitMany publishes n tasks asynchronously (the planner's fast path)
// and returns their CloudEvents ids, in order.
func (c *client) submitMany(prefix string, n int, data func(i int) string) []string {
	c.t.Helper()
	ids := make([]string, n)
	var futures []jetstream.PubAckFuture
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
		hdr, body, err := events.EncodeTask(testSource, ids[i], []byte(data(i)), "", "", i%2 == 1)
		if err != nil {
			c.t.Fatal(err)
		}
		f, err := c.js.PublishMsgAsync(&nats.Msg{Subject: "rolecall.tasks.load", Header: hdr, Data: body})
		if err != nil {
			c.t.Fatalf("publish %s: %v", ids[i], err)
		}
		futures = append(futures, f)
		if i%500 == 499 {
			// Bounded in flight, so a slow (fsync-always) server does not
			// stall the async publisher.
			select {
			case <-c.js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				c.t.Fatal("async publishes not acknowledged within 30s")
			}
		}
	}
	select {
	case <-c.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		c.t.Fatal("async publishes not acknowledged within 30s")
	}
	for i, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			c.t.Fatalf("publish %s: %v", ids[i], err)
		}
	}
	return ids
}

// waitStream waits until a worker created the named stream.
func (c *client) waitStream(name string) jetstream.Stream {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := ctxT(2 * time.Second)
		s, err := c.js.Stream(ctx, name)
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("stream %s: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// streamInfo reads a stream's state, riding out a server restart.
func (c *client) streamInfo(name string) *jetstream.StreamInfo {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := ctxT(2 * time.Second)
		s, err := c.js.Stream(ctx, name)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = s.Info(ctx)
		}
		cancel()
		if err == nil {
			return info
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("stream %s info: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *client) specsCount() int { return int(c.streamInfo(defaults.SpecsStream).State.Msgs) }

// waitSpecs waits until ROLECALL_SPECS holds at least n outcomes.
func (c *client) waitSpecs(n int, within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := c.specsCount()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("ROLECALL_SPECS has %d outcomes after %s, want %d; consumer: %s", got, within, n, c.consumerState())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// outcome is one message of ROLECALL_SPECS.
type outcome struct {
	seq     uint64
	subject string
	msgID   string
	body    []byte
	ev      event.Event
}

func (o outcome) ext(name string) string {
	v, _ := o.ev.Extensions()[name].(string)
	return v
}

func (o outcome) failure(t testing.TB) *events.FailureData {
	t.Helper()
	f, err := events.DecodeFailureData(o.ev)
	if err != nil {
		t.Fatalf("outcome %d (%s): %v; data %s", o.seq, o.subject, err, o.ev.Data())
	}
	return f
}

func (o outcome) resolved(t testing.TB) *events.ResolvedData {
	t.Helper()
	r, err := events.DecodeResolvedData(o.ev)
	if err != nil {
		t.Fatalf("outcome %d (%s): %v; data %s", o.seq, o.subject, err, o.ev.Data())
	}
	return r
}

func (c *client) decode(seq uint64, subject string, h nats.Header, data []byte) outcome {
	c.t.Helper()
	ev, err := events.DecodeOutcome(h, data)
	if err != nil {
		c.t.Fatalf("undecodable outcome %d on %s: %v", seq, subject, err)
	}
	return outcome{seq: seq, subject: subject, msgID: h.Get(nats.MsgIdHdr), body: data, ev: ev}
}

// outcomes reads the whole of ROLECALL_SPECS in order.
func (c *client) outcomes() []outcome {
	c.t.Helper()
	n := c.specsCount()
	var out []outcome
	if n == 0 {
		return out
	}
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	cons, err := c.js.OrderedConsumer(ctx, defaults.SpecsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		c.t.Fatal(err)
	}
	for len(out) < n {
		batch, err := cons.Fetch(min(n-len(out), 1000), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			c.t.Fatal(err)
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				c.t.Fatal(err)
			}
			out = append(out, c.decode(md.Sequence.Stream, m.Subject(), m.Headers(), m.Data()))
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			c.t.Fatal(err)
		}
	}
	return out
}

// outcomeAt reads one outcome by its ROLECALL_SPECS sequence.
func (c *client) outcomeAt(seq uint64) outcome {
	c.t.Helper()
	ctx, cancel := ctxT(5 * time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, defaults.SpecsStream)
	if err != nil {
		c.t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		c.t.Fatalf("outcome %d: %v", seq, err)
	}
	return c.decode(seq, m.Subject, m.Header, m.Data)
}

// countByCause counts outcomes per causationid (the task event's id).
func countByCause(outs []outcome) map[string]int {
	n := map[string]int{}
	for _, o := range outs {
		n[o.ext(events.ExtCausationID)]++
	}
	return n
}

// exactlyOnce asserts one outcome per submitted id and none for others.
func exactlyOnce(t testing.TB, ids []string, outs []outcome) {
	t.Helper()
	count := countByCause(outs)
	bad := 0
	for _, id := range ids {
		if count[id] != 1 {
			bad++
			if bad <= 10 {
				t.Errorf("task %s has %d outcomes, want exactly 1", id, count[id])
			}
		}
		delete(count, id)
	}
	for id, n := range count {
		t.Errorf("%d outcome(s) for %q, which was never submitted", n, id)
	}
	if bad > 10 {
		t.Errorf("… %d tasks in all without exactly one outcome", bad)
	}
}

// ackLog watches the acknowledgement subjects of the tasks consumer: the
// replies a worker sends for each delivery (+ACK, -NAK, +WPI, +TERM).
// It sees every worker's replies, so it proves what was acknowledged.
type ackLog struct {
	mu   sync.Mutex
	acks map[uint64]int // stream seq → acks
	naks map[uint64]int
	wpi  int
	term int
	// maxDelivered is the highest delivery count seen in a reply subject.
	maxDelivered uint64
	redelivered  map[uint64]bool // stream seqs answered on a delivery > 1
	bad          []string
	sub          *nats.Subscription
}

func (c *client) watchAcks(stream, consumer string) *ackLog {
	c.t.Helper()
	l := &ackLog{acks: map[uint64]int{}, naks: map[uint64]int{}, redelivered: map[uint64]bool{}}
	sub, err := c.nc.Subscribe("$JS.ACK."+stream+"."+consumer+".>", l.record)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		c.t.Fatal(err)
	}
	if err := c.nc.Flush(); err != nil {
		c.t.Fatal(err)
	}
	l.sub = sub
	c.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return l
}

// record parses $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>.
func (l *ackLog) record(m *nats.Msg) {
	tok := strings.Split(m.Subject, ".")
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(tok) != 9 {
		l.bad = append(l.bad, m.Subject)
		return
	}
	delivered, err1 := strconv.ParseUint(tok[4], 10, 64)
	seq, err2 := strconv.ParseUint(tok[5], 10, 64)
	if err1 != nil || err2 != nil {
		l.bad = append(l.bad, m.Subject)
		return
	}
	l.maxDelivered = max(l.maxDelivered, delivered)
	body := string(m.Data)
	switch {
	case body == "" || body == "+ACK":
		l.acks[seq]++
		if delivered > 1 {
			l.redelivered[seq] = true
		}
	case strings.HasPrefix(body, "-NAK"):
		l.naks[seq]++
	case body == "+WPI":
		l.wpi++
	case strings.HasPrefix(body, "+TERM"):
		l.term++
	default:
		l.bad = append(l.bad, m.Subject+" "+body)
	}
}

type ackStats struct {
	acked, ackMsgs, naked, nakMsgs, wpi, term, redeliveredAcked int
	maxDelivered                                                uint64
	bad                                                         []string
}

func (l *ackLog) stats() ackStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := ackStats{acked: len(l.acks), naked: len(l.naks), wpi: l.wpi, term: l.term,
		redeliveredAcked: len(l.redelivered), maxDelivered: l.maxDelivered, bad: append([]string(nil), l.bad...)}
	for _, n := range l.acks {
		s.ackMsgs += n
	}
	for _, n := range l.naks {
		s.nakMsgs += n
	}
	return s
}

// publishLog counts every outcome publish the workers make, duplicates
// included: a core subscription on rolecall.specs.> receives each publish
// whether or not JetStream stores it, so publishes − stored outcomes is the
// number of duplicates JetStream dropped.
type publishLog struct {
	mu    sync.Mutex
	byID  map[string]int
	total int
}

func (c *client) watchPublishes() *publishLog {
	c.t.Helper()
	l := &publishLog{byID: map[string]int{}}
	sub, err := c.nc.Subscribe("rolecall.specs.>", func(m *nats.Msg) {
		l.mu.Lock()
		l.byID[m.Header.Get(nats.MsgIdHdr)]++
		l.total++
		l.mu.Unlock()
	})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		c.t.Fatal(err)
	}
	if err := c.nc.Flush(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return l
}

// counts returns all publishes and the number of ids published more than once.
func (l *publishLog) counts() (total, repeatedIDs int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.byID {
		if n > 1 {
			repeatedIDs++
		}
	}
	return l.total, repeatedIDs
}

// consumerInfo is the shared consumer's info.
func (c *client) consumerInfo() (*jetstream.ConsumerInfo, error) {
	ctx, cancel := ctxT(5 * time.Second)
	defer cancel()
	cons, err := c.js.Consumer(ctx, defaults.TasksStream, defaults.Consumer)
	if err != nil {
		return nil, err
	}
	return cons.Info(ctx)
}

// consumerState describes the shared consumer for a failure message.
func (c *client) consumerState() string {
	info, err := c.consumerInfo()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("pending %d, ack pending %d, waiting pulls %d, redelivered %d, delivered %d",
		info.NumPending, info.NumAckPending, info.NumWaiting, info.NumRedelivered, info.Delivered.Consumer)
}

// consumerDeliveries is the tasks consumer's delivery count: its consumer
// sequence grows by one per delivery, redeliveries included.
func (c *client) consumerDeliveries() uint64 {
	c.t.Helper()
	info, err := c.consumerInfo()
	if err != nil {
		c.t.Fatal(err)
	}
	return info.Delivered.Consumer
}
