package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
)

// TestRunRegistersTheService: worker run registers the micro service by
// default, with the worker's instance id and version in its identity, and
// --service=false leaves it out.
func TestRunRegistersTheService(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	startWorker(t, "--root", "../../examples", "--nats", srv.ClientURL(), "--instance", "w-svc", "--service-concurrency", "1")
	deadline := time.Now().Add(20 * time.Second)
	var info micro.Info
	for {
		m, err := nc.Request("$SRV.INFO.rolecall", nil, time.Second)
		if err == nil {
			if err := json.Unmarshal(m.Data, &info); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rolecall service after 20s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if info.Metadata["instance"] != "w-svc" || info.Version != "0.0.0-dev" || len(info.Endpoints) != 5 {
		t.Fatalf("info: %+v", info)
	}
	m, err := nc.Request("rolecall.svc.resolve", []byte(`{"task_id":"T-1","role":"architect"}`), 5*time.Second)
	if err != nil || m.Header.Get(micro.ErrorCodeHeader) != "" {
		t.Fatalf("resolve: %v %v %s", err, m.Header, m.Data)
	}

	srv2 := natstest.Start(t)
	nc2 := natstest.Connect(t, srv2)
	w := startWorker(t, "--root", "../../examples", "--nats", srv2.ClientURL(), "--service=false")
	// The worker is up once its consumer exists; by then a service would
	// have registered.
	waitConsumer(t, nc2, w)
	if _, err := nc2.Request("$SRV.PING.rolecall", nil, 500*time.Millisecond); err != nats.ErrNoResponders {
		t.Fatalf("--service=false: ping answered or failed otherwise: %v", err)
	}
}

func waitConsumer(t *testing.T, nc *nats.Conn, w *bgWorker) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		m, err := nc.Request("$JS.API.CONSUMER.INFO.ROLECALL_TASKS.rolecall-workers", nil, time.Second)
		if err == nil && json.Valid(m.Data) {
			var r struct {
				Error *struct{} `json:"error"`
			}
			if json.Unmarshal(m.Data, &r) == nil && r.Error == nil {
				time.Sleep(200 * time.Millisecond)
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the worker never created its consumer; stderr:\n%s", w.stderr.String())
}

type fixedSnapshot struct{ snap *discover.Snapshot }

func (f fixedSnapshot) Snapshot() *discover.Snapshot { return f.snap }

// TestServiceStopAnswersWhatItReceived: stopping the service (on SIGTERM)
// answers every request it has already received before its connection
// closes. micro drains its subscriptions in the background, so closing the
// connection right after Stop dropped most of a burst.
func TestServiceStopAnswersWhatItReceived(t *testing.T) {
	srv := natstest.Start(t)
	snap, err := discover.Load("../../examples", discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &runCmd{serviceFlags: serviceFlags{Service: true, ServiceConcurrency: 1}}
	stop, err := c.startService(natsFlags{NATS: srv.ClientURL()}, "w-stop", fixedSnapshot{snap}, pipeline.DefaultConfig(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}

	nc := natstest.Connect(t, srv)
	replies := make(chan *nats.Msg, 1000)
	inbox := nats.NewInbox()
	if _, err := nc.ChanSubscribe(inbox, replies); err != nil {
		t.Fatal(err)
	}
	const n = 300
	const svcConn = "rolecall-service w-stop"
	before := outMsgs(t, srv, svcConn)
	for i := range n {
		body := fmt.Sprintf(`{"task_id":"T-%d","role":"architect"}`, i)
		if err := nc.PublishRequest("rolecall.svc.resolve", inbox, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Stop once the server has sent the whole burst to the service's
	// connection, while it is still answering: received, then, means
	// delivered before the drain's unsubscribe.
	deadline := time.Now().Add(10 * time.Second)
	for outMsgs(t, srv, svcConn) < before+n {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not send the service the %d requests in 10s", n)
		}
		time.Sleep(time.Millisecond)
	}
	stop()

	got := 0
	timeout := time.After(10 * time.Second)
	for got < n {
		select {
		case m := <-replies:
			if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
				t.Fatalf("reply %d: error %s %s", got, code, m.Data)
			}
			got++
		case <-timeout:
			t.Fatalf("%d of %d requests answered after stop", got, n)
		}
	}
}

// outMsgs is how many messages the server has sent the connection named
// name.
func outMsgs(t *testing.T, srv *server.Server, name string) int64 {
	t.Helper()
	cz, err := srv.Connz(&server.ConnzOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cz.Conns {
		if c.Name == name {
			return c.OutMsgs
		}
	}
	t.Fatalf("no connection %q", name)
	return 0
}
