package natstest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options adjusts the embedded server before it starts.
type Options func(*server.Options)

// Start runs a JetStream-enabled server on a random loopback port and stops
// it when the test ends.
func Start(tb testing.TB, opts ...Options) *server.Server {
	tb.Helper()
	o := &server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  tb.TempDir(),
		NoSigs:    true,
		NoLog:     true,
	}
	for _, f := range opts {
		f(o)
	}
	s, err := server.NewServer(o)
	if err != nil {
		tb.Fatalf("natstest: new server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		tb.Fatal("natstest: server not ready after 10s")
	}
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// Connect opens a client connection to s, closed when the test ends.
func Connect(tb testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		tb.Fatalf("natstest: connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// Cluster is a set of routed JetStream servers started by StartCluster.
type Cluster struct {
	tb      testing.TB
	Servers []*server.Server
	opts    []server.Options
}

// StartCluster runs n JetStream servers routed into one cluster on
// loopback ports, named n1…nN, and waits until the cluster has a
// JetStream meta leader. Every server stops when the test ends; a test may
// shut one down earlier and Restart it.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	ports := FreePorts(tb, 2*n)
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", ports[n+i])
	}
	c := &Cluster{tb: tb, Servers: make([]*server.Server, n), opts: make([]server.Options, n)}
	for i := range n {
		c.Servers[i] = Start(tb, func(o *server.Options) {
			o.ServerName = fmt.Sprintf("n%d", i+1)
			o.Port = ports[i]
			o.Cluster = server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: ports[n+i]}
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
			c.opts[i] = *o
		})
	}
	c.WaitForMetaLeader()
	return c
}

// Restart starts server i again on its ports and store directory; the
// caller has shut it down.
func (c *Cluster) Restart(i int) *server.Server {
	c.tb.Helper()
	c.Servers[i] = Start(c.tb, func(o *server.Options) { *o = c.opts[i] })
	return c.Servers[i]
}

// WaitForMetaLeader waits until a running server leads the JetStream meta
// group and every running server is current with it.
func (c *Cluster) WaitForMetaLeader() {
	c.tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, current := false, true
		for _, s := range c.Servers {
			if !s.Running() {
				continue
			}
			leader = leader || s.JetStreamIsLeader()
			current = current && s.JetStreamIsCurrent()
		}
		if leader && current {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatal("natstest: cluster has no JetStream meta leader after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitStreamsCurrent waits until every stream has a leader and each of
// its replicas is current: streams created while the cluster was busy
// (several workers creating R3 streams at once) settle before a test times
// something that depends on them.
func (c *Cluster) WaitStreamsCurrent(js jetstream.JetStream) {
	c.tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		settled, why := streamsCurrent(js)
		if settled {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("natstest: streams not current after 60s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func streamsCurrent(js jetstream.JetStream) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	l := js.ListStreams(ctx)
	for info := range l.Info() {
		cl := info.Cluster
		if cl == nil {
			continue
		}
		if cl.Leader == "" {
			return false, info.Config.Name + " has no leader"
		}
		for _, r := range cl.Replicas {
			if !r.Current || r.Offline {
				return false, fmt.Sprintf("%s replica %s is not current", info.Config.Name, r.Name)
			}
		}
	}
	if err := l.Err(); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// FreePorts finds n distinct free loopback ports. Another process may
// take one before it is used; for tests on one machine that risk is
// accepted.
func FreePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, n)
	lns := make([]net.Listener, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("natstest: reserve port: %v", err)
		}
		lns[i] = ln
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// JetStream is the JetStream API on nc, failing the test if it cannot be
// had.
func JetStream(tb testing.TB, nc *nats.Conn) jetstream.JetStream {
	tb.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}
