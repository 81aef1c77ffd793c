package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	mobynet "github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rolecall/rolecall/internal/natstest"
)

// Settings every worker container runs with. ack_wait is short so that a
// task held by a dead or cut-off worker comes back within the test's
// time; the duplicate window (10 min default) still far exceeds
// ack_wait × max_deliver + backoff.
const (
	ackWait     = 5 * time.Second
	concurrency = 8
	nodeCount   = 3
)

// cluster is one test's world: a network, three NATS nodes, the workers,
// and the test's own client connected through the published ports.
type cluster struct {
	t      *testing.T
	imgs   testImages
	docker *testcontainers.DockerClient
	net    *testcontainers.DockerNetwork
	nodes  []*node
	// workers in start order; a replaced worker stays in the list.
	workers []*worker
	nextID  int

	nc *nats.Conn
	js jetstream.JetStream
}

type node struct {
	name string
	c    *testcontainers.DockerContainer
	port int // client port on 127.0.0.1
}

type worker struct {
	name     string
	c        *testcontainers.DockerContainer
	httpPort int // /readyz, /metrics on 127.0.0.1
	// stopped is set when the test stopped or killed it on purpose.
	stopped bool
}

func (n *node) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// newCluster starts the network and the three NATS nodes. The nodes use
// deploy/nats/cluster.conf, the file docker-compose.yml uses.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	imgs := setup(t)
	ctx := context.Background()
	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { docker.Close() })
	c := &cluster{t: t, imgs: imgs, docker: docker}
	c.net = c.newNetwork(ctx)

	ports := natstest.FreePorts(t, nodeCount)
	c.nodes = make([]*node, nodeCount)
	var wg sync.WaitGroup
	errs := make([]error, nodeCount)
	for i := range nodeCount {
		c.nodes[i] = &node{name: fmt.Sprintf("nats-%d", i+1), port: ports[i]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startNode(ctx, c.nodes[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("start NATS node: %v", err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.nodes {
				c.dumpLogs(n.name, n.c)
			}
		}
	})

	c.nc, c.js = c.connect(c.urls()...)
	return c
}

// newNetwork creates the test network with an explicit subnet, because
// only then does Docker let a container rejoin with the address it had
// (the partition test needs that: a healed partition keeps the worker's
// TCP connections). The subnet is one Docker itself just chose as free.
func (c *cluster) newNetwork(ctx context.Context) *testcontainers.DockerNetwork {
	t := c.t
	probe, err := network.New(ctx, network.WithLabels(ownerLabels()))
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	res, err := c.docker.NetworkInspect(ctx, probe.ID, client.NetworkInspectOptions{})
	if rerr := probe.Remove(ctx); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		t.Fatalf("network: %v", err)
	}
	if len(res.Network.IPAM.Config) == 0 {
		t.Fatal("network: Docker assigned no subnet")
	}
	subnet := res.Network.IPAM.Config[0].Subnet
	nw, err := network.New(ctx, network.WithLabels(ownerLabels()), network.WithIPAM(&mobynet.IPAM{Config: []mobynet.IPAMConfig{{Subnet: subnet}}}))
	testcontainers.CleanupNetwork(t, nw)
	if err != nil {
		t.Fatalf("network %s: %v", subnet, err)
	}
	return nw
}

func (c *cluster) startNode(ctx context.Context, n *node) error {
	conf, err := os.ReadFile(repoFile(c.imgs, "deploy/nats/cluster.conf"))
	if err != nil {
		return err
	}
	req := testcontainers.ContainerRequest{
		Image:          c.imgs.NATS,
		Labels:         ownerLabels(),
		Cmd:            []string{"--config", "/etc/nats/cluster.conf", "--name", n.name},
		Hostname:       n.name,
		Networks:       []string{c.net.Name},
		NetworkAliases: map[string][]string{c.net.Name: {n.name}},
		ExposedPorts:   []string{"4222/tcp"},
		HostConfigModifier: bindLoopback(map[string]int{
			"4222/tcp": n.port,
		}),
		Files: []testcontainers.ContainerFile{{
			Reader: strings.NewReader(string(conf)), ContainerFilePath: "/etc/nats/cluster.conf", FileMode: 0o644,
		}},
		WaitingFor: wait.ForLog("Server is ready").WithStartupTimeout(60 * time.Second),
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	testcontainers.CleanupContainer(c.t, ctr)
	if err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	n.c = ctr.(*testcontainers.DockerContainer)
	return nil
}

// bindLoopback publishes container ports on fixed host ports of 127.0.0.1
// only: nothing is reachable from other hosts, and a restarted container
// comes back on the same port.
func bindLoopback(ports map[string]int) func(*container.HostConfig) {
	return func(hc *container.HostConfig) {
		hc.PortBindings = mobynet.PortMap{}
		for spec, host := range ports {
			hc.PortBindings[mobynet.MustParsePort(spec)] = []mobynet.PortBinding{{
				HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(host),
			}}
		}
	}
}

func (c *cluster) urls() []string {
	var u []string
	for _, n := range c.nodes {
		u = append(u, n.url())
	}
	return u
}

// connect opens a client connection through the published ports only;
// it never uses addresses the servers gossip (they are container
// addresses, and the cluster does not advertise them anyway).
func (c *cluster) connect(urls ...string) (*nats.Conn, jetstream.JetStream) {
	c.t.Helper()
	nc, err := nats.Connect(strings.Join(urls, ","),
		nats.Name("rolecall-integration"),
		nats.IgnoreDiscoveredServers(),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		nats.RetryOnFailedConnect(true),
	)
	if err != nil {
		c.t.Fatalf("connect %v: %v", urls, err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return nc, js
}

// workerURLs is what every worker is given: all three nodes, by the
// names they have on the test network.
func (c *cluster) workerURLs() string {
	var u []string
	for _, n := range c.nodes {
		u = append(u, "nats://"+n.name+":4222")
	}
	return strings.Join(u, ",")
}

// startWorkers starts n workers at once and waits until each is ready.
// They start together on purpose: concurrent stream and consumer creation
// must be safe, also against a cluster that is still electing its
// JetStream meta leader.
func (c *cluster) startWorkers(n int) []*worker {
	c.t.Helper()
	ws := make([]*worker, n)
	errs := make([]error, n)
	ports := natstest.FreePorts(c.t, n)
	var wg sync.WaitGroup
	for i := range n {
		c.nextID++
		ws[i] = &worker{name: fmt.Sprintf("worker-%d", c.nextID), httpPort: ports[i]}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.startWorker(context.Background(), ws[i])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.t.Fatalf("start worker: %v", err)
		}
	}
	c.workers = append(c.workers, ws...)
	return ws
}

func (c *cluster) startWorker(ctx context.Context, w *worker) error {
	files, err := configRootFiles(repoFile(c.imgs, "integration/testdata/config"), "/config")
	if err != nil {
		return err
	}
	req := testcontainers.ContainerRequest{
		Image:  c.imgs.Worker,
		Labels: ownerLabels(),
		Cmd: []string{
			"--nats", c.workerURLs(),
			"--replicas", "3",
			"--ack-wait", ackWait.String(),
			"--concurrency", strconv.Itoa(concurrency),
			"--instance", w.name,
		},
		Env:                map[string]string{"ROLECALL_LOG_LEVEL": "info"},
		Hostname:           w.name,
		Networks:           []string{c.net.Name},
		NetworkAliases:     map[string][]string{c.net.Name: {w.name}},
		ExposedPorts:       []string{"8080/tcp"},
		HostConfigModifier: bindLoopback(map[string]int{"8080/tcp": w.httpPort}),
		Files:              files,
		WaitingFor:         wait.ForHTTP("/readyz").WithPort("8080/tcp").WithStartupTimeout(90 * time.Second),
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	testcontainers.CleanupContainer(c.t, ctr)
	if ctr != nil {
		w.c = ctr.(*testcontainers.DockerContainer)
		c.t.Cleanup(func() {
			if c.t.Failed() || os.Getenv("ROLECALL_IT_LOGS") == "1" {
				c.dumpLogs(w.name, w.c)
			}
		})
	}
	if err != nil {
		return fmt.Errorf("%s: %w", w.name, err)
	}
	return nil
}

// configRootFiles copies a config root into the container file by file,
// with modes the non-root worker can read.
func configRootFiles(dir, target string) ([]testcontainers.ContainerFile, error) {
	var files []testcontainers.ContainerFile
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files = append(files, testcontainers.ContainerFile{
			HostFilePath: path, ContainerFilePath: target + "/" + filepath.ToSlash(rel), FileMode: 0o644,
		})
		return nil
	})
	return files, err
}

func (c *cluster) dumpLogs(name string, ctr *testcontainers.DockerContainer) {
	if ctr == nil {
		return
	}
	r, err := ctr.Logs(context.Background())
	if err != nil {
		c.t.Logf("%s logs: %v", name, err)
		return
	}
	defer r.Close()
	b, _ := io.ReadAll(r)
	c.t.Logf("--- last log lines of %s ---\n%s", name, tail(string(b), 30))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---- faults ----

// signal sends sig to a container's main process (the worker itself: a
// scratch image has no init or shell in between).
func (c *cluster) signal(ctx context.Context, ctr *testcontainers.DockerContainer, sig string) {
	c.t.Helper()
	if _, err := c.docker.ContainerKill(ctx, ctr.GetContainerID(), client.ContainerKillOptions{Signal: sig}); err != nil {
		c.t.Fatalf("kill -%s %s: %v", sig, ctr.GetContainerID()[:12], err)
	}
}

// waitExit waits for a container to stop and returns its exit code.
func (c *cluster) waitExit(ctx context.Context, ctr *testcontainers.DockerContainer, within time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := ctr.State(ctx)
		if err != nil {
			c.t.Fatalf("state: %v", err)
		}
		if !st.Running {
			return st.ExitCode
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("container %s still running after %s", ctr.GetContainerID()[:12], within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restart starts a stopped container again, with the wait strategy it
// was created with (ready log line, or /readyz).
func (c *cluster) restart(ctx context.Context, ctr *testcontainers.DockerContainer) {
	c.t.Helper()
	if err := ctr.Start(ctx); err != nil {
		c.t.Fatalf("restart %s: %v", ctr.GetContainerID()[:12], err)
	}
}

// disconnect cuts a container off the test network and returns what
// reconnect needs to give it its address back.
func (c *cluster) disconnect(ctx context.Context, w *worker) netip.Addr {
	c.t.Helper()
	res, err := c.docker.ContainerInspect(ctx, w.c.GetContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	ep := res.Container.NetworkSettings.Networks[c.net.Name]
	if ep == nil {
		c.t.Fatalf("%s is not on %s", w.name, c.net.Name)
	}
	if _, err := c.docker.NetworkDisconnect(ctx, c.net.ID, client.NetworkDisconnectOptions{Container: w.c.GetContainerID()}); err != nil {
		c.t.Fatalf("disconnect %s: %v", w.name, err)
	}
	return ep.IPAddress
}

// reconnect puts the container back with the same address, as a healed
// partition would: its TCP connections resume.
func (c *cluster) reconnect(ctx context.Context, w *worker, ip netip.Addr) {
	c.t.Helper()
	_, err := c.docker.NetworkConnect(ctx, c.net.ID, client.NetworkConnectOptions{
		Container: w.c.GetContainerID(),
		EndpointConfig: &mobynet.EndpointSettings{
			Aliases:    []string{w.name},
			IPAMConfig: &mobynet.EndpointIPAMConfig{IPv4Address: ip},
		},
	})
	if err != nil {
		c.t.Fatalf("reconnect %s: %v", w.name, err)
	}
}

// streamLeader names the node that leads a stream's RAFT group.
func (c *cluster) streamLeader(ctx context.Context, stream string) *node {
	c.t.Helper()
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		c.t.Fatalf("stream %s: %v", stream, err)
	}
	info := s.CachedInfo()
	if info.Cluster == nil {
		c.t.Fatalf("stream %s has no cluster info", stream)
	}
	for _, n := range c.nodes {
		if n.name == info.Cluster.Leader {
			return n
		}
	}
	c.t.Fatalf("stream %s leader %q is none of the nodes", stream, info.Cluster.Leader)
	return nil
}

// ---- observation ----

// running reports which of the workers the test did not stop are not
// running (each should be: a fault elsewhere must not make a worker exit).
func (c *cluster) checkWorkersRunning(ctx context.Context) {
	c.t.Helper()
	for _, w := range c.workers {
		if w.stopped {
			continue
		}
		res, err := c.docker.ContainerInspect(ctx, w.c.GetContainerID(), client.ContainerInspectOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
		st := res.Container.State
		if !st.Running || res.Container.RestartCount != 0 {
			c.t.Errorf("%s: running=%v exit=%d restarts=%d, want running without a restart", w.name, st.Running, st.ExitCode, res.Container.RestartCount)
		}
	}
}

// metric sums the samples of a Prometheus counter on a worker's /metrics
// whose labels contain every given label pair (e.g. `outcome="retry"`).
func (w *worker) metric(name string, labels ...string) (float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", w.httpPort))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(line, l) {
				continue lines
			}
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// shares reads how many tasks each running worker answered (its
// rolecall_tasks_total, retries excluded).
func (c *cluster) shares() map[string]int {
	c.t.Helper()
	out := map[string]int{}
	for _, w := range c.workers {
		if w.stopped {
			continue
		}
		all, err := w.metric("rolecall_tasks_total")
		retry, err2 := w.metric("rolecall_tasks_total", `outcome="retry"`)
		if err != nil || err2 != nil {
			c.t.Errorf("%s metrics: %v %v", w.name, err, err2)
			continue
		}
		out[w.name] = int(all - retry)
	}
	return out
}

// ready reports a worker's /readyz status code.
func (w *worker) ready() (int, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", w.httpPort))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
