package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/internal/natstest"
)

func TestJetStreamUnavailable(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	api := func(code jetstream.ErrorCode) error {
		return &jetstream.APIError{Code: 503, ErrorCode: code, Description: "x"}
	}
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"API request timed out", live, fmt.Errorf("stream X: %w", context.DeadlineExceeded), true},
		{"core request timed out", live, nats.ErrTimeout, true},
		{"system temporarily unavailable", live, api(errCodeClusterNotAvail), true},
		{"no meta leader", live, api(errCodeClusterNotLeader), true},
		{"not enough peers yet", live, api(errCodeClusterNoPeers), true},
		{"consumer just created, not visible yet", live, fmt.Errorf("%w: x: %w", errNotVisibleYet, jetstream.ErrConsumerNotFound), true},
		{"consumer missing", live, jetstream.ErrConsumerNotFound, false},
		{"caller gave up", cancelled, context.DeadlineExceeded, false},
		{"caller cancelled", cancelled, context.Canceled, false},
		{"refused configuration", live, fmt.Errorf("%w: short window", ErrConfig), false},
		{"stream name in use with another config", live, api(jetstream.JSErrCodeStreamNameInUse), false},
		{"JetStream not enabled", live, jetstream.ErrJetStreamNotEnabled, false},
		{"other error", live, errors.New("boom"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := jetStreamUnavailable(tt.ctx, tt.err); got != tt.want {
				t.Errorf("jetStreamUnavailable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// A worker that starts while its 3-node cluster is still forming waits
// for the JetStream meta leader and then creates R3 streams, instead of
// failing: the first node runs alone (every API request times out) until
// the other two join.
func TestEnsureRetryWaitsForClusterToForm(t *testing.T) {
	ports := natstest.FreePorts(t, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	start := func(i int) *server.Server {
		s, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: -1,
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "ensure", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatalf("server %d not ready", i+1)
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		return s
	}
	first := start(0)
	nc, err := nats.Connect(first.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Replicas = 3

	// No deadline on ctx: the client's default timeout then bounds each
	// API request, as in the worker. The timer only stops a hung test.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer time.AfterFunc(time.Minute, cancel).Stop()
	var (
		wg   sync.WaitGroup
		cons jetstream.Consumer
		eerr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		cons, eerr = EnsureRetry(ctx, js, cfg, nil)
	}()
	// Ensure has been refused at least once before the peers exist: a
	// lone clustered node has no meta leader.
	if _, err := Ensure(ctx, js, cfg); !jetStreamUnavailable(ctx, err) {
		t.Fatalf("Ensure on a lone clustered node = %v, want a cluster-unavailable error", err)
	}
	start(1)
	start(2)
	wg.Wait()
	if eerr != nil {
		t.Fatalf("EnsureRetry = %v, want the streams once the cluster formed", eerr)
	}
	if got := cons.CachedInfo().Config.Replicas; got != 3 {
		t.Errorf("consumer replicas = %d, want 3", got)
	}
	for _, name := range []string{cfg.TasksStream, cfg.SpecsStream, cfg.DeadLetter} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if got := s.CachedInfo().Config.Replicas; got != 3 {
			t.Errorf("stream %s replicas = %d, want 3", name, got)
		}
	}
}

func TestEnsureRetryReturnsRefusalsAtOnce(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	// Another stream already owns the task subjects: the server refuses
	// the tasks stream, and waiting would not change that.
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"rolecall.tasks.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err = EnsureRetry(context.Background(), js, cfg, nil)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || jetStreamUnavailable(context.Background(), err) {
		t.Fatalf("EnsureRetry with the task subjects taken = %v, want the server's refusal", err)
	}
}

// The dead-letter stream's name is fixed, its subject is not: it names
// the tasks stream and the consumer. A worker configured with another
// tasks stream (or consumer) beside an existing dead-letter stream refuses
// to start, as for a short duplicate window. It used to start, and the
// stream never captured its max-deliveries advisories: a task that
// reached max_deliver got no outcome at all.
func TestEnsureRefusesDeadLetterStreamOfAnotherConsumer(t *testing.T) {
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Start(t)))
	ctx := context.Background()
	first := DefaultConfig()
	if _, err := Ensure(ctx, js, first); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		change func(*Config)
	}{
		{"tasks stream", func(c *Config) { c.Prefix, c.TasksStream = "other", "OTHER_TASKS" }},
		{"consumer", func(c *Config) { c.Consumer = "other-workers" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := first
			c.change(&cfg)
			_, err := Ensure(ctx, js, cfg)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), cfg.advisorySubject()) {
				t.Fatalf("Ensure = %v, want ErrConfig naming %s", err, cfg.advisorySubject())
			}
		})
	}
	if _, err := Ensure(ctx, js, first); err != nil {
		t.Fatalf("Ensure with the first configuration again: %v", err)
	}
}

// A dead-letter stream made by hand may capture the advisories with a
// wildcard; one whose subjects miss this worker's advisories is refused.
func TestEnsureAcceptsAWildcardDeadLetterStream(t *testing.T) {
	for _, c := range []struct {
		subject string
		ok      bool
	}{
		{"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>", true},
		{"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.*.rolecall-workers", true},
		{"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ROLECALL_TASKS.*", true},
		{"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.*", false},
		{"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.OTHER.rolecall-workers", false},
	} {
		t.Run(c.subject, func(t *testing.T) {
			js := natstest.JetStream(t, natstest.Connect(t, natstest.Start(t)))
			ctx := context.Background()
			cfg := DefaultConfig()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: cfg.DeadLetter, Subjects: []string{c.subject}}); err != nil {
				t.Fatal(err)
			}
			_, err := Ensure(ctx, js, cfg)
			if c.ok && err != nil || !c.ok && !errors.Is(err, ErrConfig) {
				t.Fatalf("Ensure = %v, want ok %v", err, c.ok)
			}
		})
	}
}
