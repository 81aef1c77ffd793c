package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/rolecall/rolecall/pipeline"
)

// shippedUsers are the users of deploy/nats/accounts.conf, with the
// passwords this test gives them through the environment.
var shippedUsers = []string{"admin", "worker", "planner", "operator", "auditor"}

func shippedPassword(user string) string { return "pw-" + user + "-4fQz9" }

// startShipped runs an embedded nats-server on the shipped accounts file,
// exactly as written (passwords from the environment, as in compose).
func startShipped(t *testing.T) string {
	t.Helper()
	for _, u := range shippedUsers {
		t.Setenv("ROLECALL_"+strings.ToUpper(u)+"_PASSWORD", shippedPassword(u))
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(root, "deploy", "nats", "accounts.conf"))
	if err != nil {
		t.Fatalf("deploy/nats/accounts.conf: %v", err)
	}
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", -1, true, true
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

// userConn is a connection as one shipped user, with its own reply
// prefix, that records the permission violations the server reports.
type userConn struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu         sync.Mutex
	violations []string
}

func connectAs(t *testing.T, url, user string) *userConn {
	t.Helper()
	u := &userConn{}
	nc, err := nats.Connect(url, nats.UserInfo(user, shippedPassword(user)), nats.CustomInboxPrefix("_INBOX_"+user),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			u.mu.Lock()
			u.violations = append(u.violations, err.Error())
			u.mu.Unlock()
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	u.nc = nc
	if u.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u *userConn) violated() string {
	_ = u.nc.Flush()
	time.Sleep(20 * time.Millisecond) // the server's -ERR arrives after the attempt
	u.mu.Lock()
	defer u.mu.Unlock()
	return strings.Join(u.violations, "; ")
}

const shippedBucket = "ROLECALL_CONFIG"

// provision creates, as admin, everything the deployment holds: the
// worker's streams and consumers, the buckets and object store, the
// allocations stream with its audit consumer, and one entry in each.
func provision(t *testing.T, url string) {
	t.Helper()
	a := connectAs(t, url, "admin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(ctx, a.js, cfg); err != nil {
		t.Fatalf("admin: ensure: %v", err)
	}
	for _, b := range []string{"ROLECALL_OUTCOMES", shippedBucket, "ROLECALL_ROSTER"} {
		kv, err := a.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b, History: 10})
		if err != nil {
			t.Fatalf("admin: bucket %s: %v", b, err)
		}
		if _, err := kv.Put(ctx, "seed", []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	kv, _ := a.js.KeyValue(ctx, shippedBucket)
	if _, err := kv.Put(ctx, "current", []byte(`{"revision":1}`)); err != nil {
		t.Fatal(err)
	}
	obj, err := a.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: shippedBucket})
	if err != nil {
		t.Fatalf("admin: object store: %v", err)
	}
	if _, err := obj.PutBytes(ctx, "sha256-bundle-1", []byte("bundle bytes")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.js.CreateStream(ctx, jetstream.StreamConfig{Name: "ROLECALL_ALLOCATIONS", Subjects: []string{"rolecall.allocations.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.js.CreateOrUpdateConsumer(ctx, "ROLECALL_ALLOCATIONS", jetstream.ConsumerConfig{Durable: "rolecall-audit", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ subj, data string }{
		{"rolecall.allocations.architect", `{"decision_id":"d-1","model":"m"}`},
		{"rolecall.allocations.architect", `{"decision_id":"d-2","model":"m"}`},
		{"rolecall.specs.resolved.architect", `{"task_id":"T-1"}`},
		{"rolecall.tasks.seed", `{"task_id":"T-0","role":"architect"}`},
	} {
		if _, err := a.js.Publish(ctx, m.subj, []byte(m.data)); err != nil {
			t.Fatalf("admin: publish %s: %v", m.subj, err)
		}
	}
}

// op is one attempt on the server; nil means the server let it happen.
type op func(ctx context.Context, u *userConn) error

func publish(subject string) op {
	return func(ctx context.Context, u *userConn) error {
		_, err := u.js.Publish(ctx, subject, []byte(`{}`))
		return err
	}
}

func kvGet(bucket, key string) op {
	return func(ctx context.Context, u *userConn) error {
		kv, err := u.js.KeyValue(ctx, bucket)
		if err != nil {
			return err
		}
		_, err = kv.Get(ctx, key)
		return err
	}
}

func kvPut(bucket, key string) op {
	return func(ctx context.Context, u *userConn) error {
		kv, err := u.js.KeyValue(ctx, bucket)
		if err != nil {
			return err
		}
		_, err = kv.Put(ctx, key, []byte(`{"forged":true}`))
		return err
	}
}

// moveCurrent is config push's compare-and-swap of `current`.
func moveCurrent(ctx context.Context, u *userConn) error {
	kv, err := u.js.KeyValue(ctx, shippedBucket)
	if err != nil {
		return err
	}
	e, err := kv.Get(ctx, "current")
	if err != nil {
		return err
	}
	_, err = kv.Update(ctx, "current", []byte(`{"revision":2}`), e.Revision())
	return err
}

// watchCurrent is how a worker with --config-from nats follows `current`.
func watchCurrent(ctx context.Context, u *userConn) error {
	kv, err := u.js.KeyValue(ctx, shippedBucket)
	if err != nil {
		return err
	}
	w, err := kv.Watch(ctx, "current")
	if err != nil {
		return err
	}
	defer w.Stop()
	select {
	case e := <-w.Updates():
		if e == nil {
			return errors.New("the watch delivered no entry")
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func objGet(ctx context.Context, u *userConn) error {
	obj, err := u.js.ObjectStore(ctx, shippedBucket)
	if err != nil {
		return err
	}
	_, err = obj.GetBytes(ctx, "sha256-bundle-1")
	return err
}

func objPut(ctx context.Context, u *userConn) error {
	obj, err := u.js.ObjectStore(ctx, shippedBucket)
	if err != nil {
		return err
	}
	_, err = obj.PutBytes(ctx, "sha256-forged", []byte("forged bundle"))
	return err
}

// readStream reads a stream's first message in order, as tail and the
// audit view do.
func readStream(stream string) op {
	return func(ctx context.Context, u *userConn) error {
		c, err := u.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
		if err != nil {
			return err
		}
		_, err = c.Next(jetstream.FetchMaxWait(time.Second))
		return err
	}
}

func getMsg(stream string, seq uint64) op {
	return func(ctx context.Context, u *userConn) error {
		s, err := u.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		_, err = s.GetMsg(ctx, seq)
		return err
	}
}

// consumeAllocation is the drift consumer's pull and ack.
func consumeAllocation(ctx context.Context, u *userConn) error {
	c, err := u.js.Consumer(ctx, "ROLECALL_ALLOCATIONS", "rolecall-audit")
	if err != nil {
		return err
	}
	m, err := c.Next(jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return err
	}
	return m.DoubleAck(ctx)
}

func consumeTask(ctx context.Context, u *userConn) error {
	c, err := u.js.Consumer(ctx, "ROLECALL_TASKS", "rolecall-workers")
	if err != nil {
		return err
	}
	m, err := c.Next(jetstream.FetchMaxWait(time.Second))
	if err != nil {
		return err
	}
	return m.Nak()
}

func deleteStream(name string) op {
	return func(ctx context.Context, u *userConn) error { return u.js.DeleteStream(ctx, name) }
}

func purgeStream(name string) op {
	return func(ctx context.Context, u *userConn) error {
		s, err := u.js.Stream(ctx, name)
		if err != nil {
			return err
		}
		return s.Purge(ctx)
	}
}

func newConsumer(stream string) op {
	return func(ctx context.Context, u *userConn) error {
		_, err := u.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "rogue"})
		return err
	}
}

// subscribe is a core NATS subscription; a refused one is reported
// asynchronously, so it counts as refused when the server says so.
func subscribe(subject string) op {
	return func(ctx context.Context, u *userConn) error {
		sub, err := u.nc.SubscribeSync(subject)
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
		if v := u.violated(); v != "" {
			return errors.New(v)
		}
		return nil
	}
}

// request calls a micro subject and wants an answer.
func request(subject string) op {
	return func(ctx context.Context, u *userConn) error {
		_, err := u.nc.RequestWithContext(ctx, subject, []byte(`{"task_id":"T-9","role":"architect"}`))
		return err
	}
}

// TestShippedPermissions loads deploy/nats/accounts.conf into an embedded
// nats-server, provisions everything as admin, and tries each documented
// operation as each user: what docs/SECURITY.md allows must work, and what
// it does not must be refused by the server with a permission violation.
// The micro service is a real nats.go micro service run by the worker
// user, so discovery ($SRV.PING/INFO/STATS) and an endpoint are called
// for real; the bundle and drift surfaces are exercised with the raw
// bucket and stream operations their commands perform.
func TestShippedPermissions(t *testing.T) {
	url := startShipped(t)
	provision(t, url)

	// The worker serves the micro service as its own user.
	w := connectAs(t, url, "worker")
	svc, err := micro.AddService(w.nc, micro.Config{Name: "rolecall", Version: "0.0.0-dev", QueueGroup: "rolecall"})
	if err != nil {
		t.Fatalf("worker: add the micro service: %v (violations: %s)", err, w.violated())
	}
	defer svc.Stop()
	if err := svc.AddGroup("rolecall.svc").AddEndpoint("resolve", micro.HandlerFunc(func(r micro.Request) { _ = r.Respond([]byte(`{}`)) })); err != nil {
		t.Fatal(err)
	}
	if v := w.violated(); v != "" {
		t.Fatalf("serving the micro service as worker: %s", v)
	}

	type check struct {
		user, what string
		allowed    bool
		op         op
	}
	checks := []check{
		// the config compose runs parses and holds every user
		{"admin", "load deploy/nats/cluster-auth.conf", true, func(context.Context, *userConn) error {
			root, err := moduleRoot()
			if err != nil {
				return err
			}
			o, err := server.ProcessConfigFile(filepath.Join(root, "deploy", "nats", "cluster-auth.conf"))
			if err != nil {
				return err
			}
			if len(o.Users) != len(shippedUsers) || o.Cluster.Name == "" {
				return fmt.Errorf("cluster-auth.conf: %d users, cluster %q", len(o.Users), o.Cluster.Name)
			}
			return nil
		}},
		// worker
		{"worker", "pull a task", true, consumeTask},
		{"worker", "publish an outcome", true, publish("rolecall.specs.resolved.architect")},
		{"worker", "publish a drift event", true, publish("rolecall.specs.drift.model")},
		{"worker", "record an outcome id", true, kvPut("ROLECALL_OUTCOMES", "o-1")},
		{"worker", "look an outcome id up", true, kvGet("ROLECALL_OUTCOMES", "seed")},
		{"worker", "read config current", true, kvGet(shippedBucket, "current")},
		{"worker", "watch config current", true, watchCurrent},
		{"worker", "fetch a bundle", true, objGet},
		{"worker", "write a roster", true, kvPut("ROLECALL_ROSTER", "default")},
		{"worker", "pull and ack an allocation", true, consumeAllocation},
		{"worker", "read a decision by sequence", true, getMsg("ROLECALL_SPECS", 1)},
		{"worker", "move current", false, moveCurrent},
		{"worker", "watch other clients' replies", false, subscribe("_INBOX.>")},
		{"worker", "put current", false, kvPut(shippedBucket, "current")},
		{"worker", "write a bundle", false, objPut},
		{"worker", "publish a task", false, publish("rolecall.tasks.forged")},
		{"worker", "publish an allocation", false, publish("rolecall.allocations.architect")},
		{"worker", "delete the tasks stream", false, deleteStream("ROLECALL_TASKS")},
		{"worker", "purge the outcomes", false, purgeStream("ROLECALL_SPECS")},
		{"worker", "create a consumer on the tasks", false, newConsumer("ROLECALL_TASKS")},
		// planner
		{"planner", "publish a task", true, publish("rolecall.tasks.planned")},
		{"planner", "call rolecall.svc.resolve", true, request("rolecall.svc.resolve")},
		{"planner", "ping the service", true, request("$SRV.PING.rolecall")},
		{"planner", "service info", true, request("$SRV.INFO.rolecall")},
		{"planner", "service stats", true, request("$SRV.STATS.rolecall")},
		{"planner", "read outcomes", true, readStream("ROLECALL_SPECS")},
		{"planner", "read a roster", true, kvGet("ROLECALL_ROSTER", "seed")},
		{"planner", "watch outcomes as published", true, subscribe("rolecall.specs.>")},
		{"planner", "watch tasks as published", false, subscribe("rolecall.tasks.>")},
		{"planner", "publish an outcome", false, publish("rolecall.specs.resolved.architect")},
		{"planner", "publish a drift event", false, publish("rolecall.specs.drift.model")},
		{"planner", "read config current", false, kvGet(shippedBucket, "current")},
		{"planner", "move current", false, moveCurrent},
		{"planner", "write a bundle", false, objPut},
		{"planner", "write a roster", false, kvPut("ROLECALL_ROSTER", "default")},
		{"planner", "pull a task", false, consumeTask},
		{"planner", "delete the tasks stream", false, deleteStream("ROLECALL_TASKS")},
		// operator
		{"operator", "read config current", true, kvGet(shippedBucket, "current")},
		{"operator", "move current", true, moveCurrent},
		{"operator", "watch config current", true, watchCurrent},
		{"operator", "write a bundle", true, objPut},
		{"operator", "fetch a bundle", true, objGet},
		{"operator", "publish a task", false, publish("rolecall.tasks.forged")},
		{"operator", "publish an outcome", false, publish("rolecall.specs.resolved.architect")},
		{"operator", "write a roster", false, kvPut("ROLECALL_ROSTER", "default")},
		{"operator", "delete the config bucket", false, deleteStream("KV_" + shippedBucket)},
		{"operator", "call rolecall.svc.resolve", false, request("rolecall.svc.resolve")},
		// auditor
		{"auditor", "read outcomes", true, readStream("ROLECALL_SPECS")},
		{"auditor", "read a task by sequence", true, getMsg("ROLECALL_TASKS", 1)},
		{"auditor", "read allocations", true, readStream("ROLECALL_ALLOCATIONS")},
		{"auditor", "read the dead-letter stream info", true, func(ctx context.Context, u *userConn) error {
			_, err := u.js.Stream(ctx, "ROLECALL_DEADLETTER")
			return err
		}},
		{"auditor", "read config current", true, kvGet(shippedBucket, "current")},
		{"auditor", "fetch a bundle", true, objGet},
		{"auditor", "read a roster", true, kvGet("ROLECALL_ROSTER", "seed")},
		{"auditor", "look an outcome id up", true, kvGet("ROLECALL_OUTCOMES", "seed")},
		{"auditor", "publish a task", false, publish("rolecall.tasks.forged")},
		{"auditor", "publish an outcome", false, publish("rolecall.specs.resolved.architect")},
		{"auditor", "move current", false, moveCurrent},
		{"auditor", "write a bundle", false, objPut},
		{"auditor", "write a roster", false, kvPut("ROLECALL_ROSTER", "default")},
		{"auditor", "record an outcome id", false, kvPut("ROLECALL_OUTCOMES", "o-2")},
		{"auditor", "pull a task", false, consumeTask},
		{"auditor", "pull an allocation", false, consumeAllocation},
		{"auditor", "take over the audit consumer", false, func(ctx context.Context, u *userConn) error {
			_, err := u.js.CreateOrUpdateConsumer(ctx, "ROLECALL_ALLOCATIONS", jetstream.ConsumerConfig{Durable: "rolecall-audit", AckPolicy: jetstream.AckExplicitPolicy, Description: "taken over"})
			return err
		}},
		{"auditor", "call rolecall.svc.resolve", false, request("rolecall.svc.resolve")},
		{"auditor", "purge the outcomes", false, purgeStream("ROLECALL_SPECS")},
		{"auditor", "delete the tasks stream", false, deleteStream("ROLECALL_TASKS")},
	}
	allowed, refused := 0, 0
	for _, c := range checks {
		u := connectAs(t, url, c.user)
		// A refused request gets no reply: a short wait keeps the
		// refusals from taking minutes in all.
		wait := time.Second
		if c.allowed {
			wait = 5 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		err := c.op(ctx, u)
		cancel()
		v := u.violated()
		switch {
		case c.allowed && (err != nil || v != ""):
			t.Errorf("%s must be able to %s: err %v, violations %q", c.user, c.what, err, v)
		case !c.allowed && err == nil:
			t.Errorf("%s must not be able to %s, and could", c.user, c.what)
		case !c.allowed && !strings.Contains(v, "Permissions Violation"):
			t.Errorf("%s: %s failed, but not by a permission violation: %v", c.user, c.what, err)
		case c.allowed:
			allowed++
		default:
			refused++
		}
		u.nc.Close()
	}
	t.Logf("figures: checks=%d allowed=%d refused=%d", len(checks), allowed, refused)
}

// TestShippedWorkerUser runs the real worker as the shipped `worker` user
// on an empty server: it creates its own streams, consumers and buckets
// (the default, as in docker compose), resolves a task a planner
// publishes, and hits no permission violation on the way.
func TestShippedWorkerUser(t *testing.T) {
	url := startShipped(t)
	w := startWorker(t, url, openDir(t), workerOpts{
		args: []string{"--user", "worker", "--inbox-prefix", "_INBOX_worker", "--log-level", "debug"},
		env:  []string{"ROLECALL_NATS_PASSWORD=" + shippedPassword("worker")},
	})
	planner := connect(t, url, nats.UserInfo("planner", shippedPassword("planner")), nats.CustomInboxPrefix("_INBOX_planner"))
	planner.publishTask("sw-ok", `{"task_id":"T-sw","role":"architect"}`, false)
	planner.publishTask("sw-fail", `{"task_id":"T-sw-2","role":"architect","modes":["telepathic"]}`, true)
	planner.waitSpecs(2, 20*time.Second)
	exactlyOnce(t, []string{"sw-ok", "sw-fail"}, planner.outcomes())
	if err := w.terminate(20 * time.Second); err != nil {
		t.Error(err)
	}
	if strings.Contains(strings.ToLower(w.logs()), "permissions violation") {
		t.Errorf("the worker hit a permission violation as the shipped worker user:\n%s", tail(w.logs(), 4000))
	}
}

// TestShippedFleetUsers runs the fleet's surfaces with the shipped users
// on one server: `worker config push` as operator seeds the bundle; the
// real worker, as worker, takes its configuration from it
// (--config-from nats), serves the micro service and runs the drift
// consumer; a planner publishes a task and calls the service; an
// allocation that differs from the decision yields one drift event. No
// component hits a permission violation.
func TestShippedFleetUsers(t *testing.T) {
	url := startShipped(t)
	root := openDir(t)
	writeFile(t, filepath.Join(root, "packs", "team.yaml"), "roles:\n  architect:\n    model: bundle-model\n")
	code, push := runWorkerCmd(t, 30*time.Second, nil, "config", "push", "--root", root, "--nats", url,
		"--user", "operator", "--password", shippedPassword("operator"), "--inbox-prefix", "_INBOX_operator",
		"--actor", "test", "--message", "seed")
	if code != 0 || strings.Contains(strings.ToLower(push.stderr.String()), "violation") {
		t.Fatalf("config push as operator: exit %d\n%s%s", code, push.stdout.String(), push.stderr.String())
	}
	// The worker's and the auditor's credentials cannot push; the
	// auditor's can read the history.
	writeFile(t, filepath.Join(root, "packs", "team.yaml"), "roles:\n  architect:\n    model: forged-model\n")
	for _, u := range []string{"worker", "auditor"} {
		code, p := runWorkerCmd(t, 30*time.Second, nil, "config", "push", "--root", root, "--nats", url,
			"--user", u, "--password", shippedPassword(u), "--inbox-prefix", "_INBOX_"+u, "--actor", "test", "--message", "forged")
		if code == 0 {
			t.Errorf("config push as %s succeeded:\n%s", u, p.stdout.String())
		}
	}
	writeFile(t, filepath.Join(root, "packs", "team.yaml"), "roles:\n  architect:\n    model: bundle-model\n")
	if code, p := runWorkerCmd(t, 30*time.Second, nil, "config", "log", "--nats", url,
		"--user", "auditor", "--password", shippedPassword("auditor"), "--inbox-prefix", "_INBOX_auditor"); code != 0 || !strings.Contains(p.stdout.String(), "seed") {
		t.Errorf("config log as auditor: exit %d\n%s%s", code, p.stdout.String(), p.stderr.String())
	}
	w := startWorker(t, url, openDir(t), workerOpts{
		args: []string{"--user", "worker", "--inbox-prefix", "_INBOX_worker", "--config-from", "nats", "--log-level", "debug"},
		env:  []string{"ROLECALL_NATS_PASSWORD=" + shippedPassword("worker")},
	})

	planner := connectAs(t, url, "planner")
	for _, subj := range []string{"$SRV.PING.rolecall", "$SRV.INFO.rolecall", "$SRV.STATS.rolecall", "rolecall.svc.resolve"} {
		m, err := planner.nc.Request(subj, []byte(`{"task_id":"T-pre","role":"architect","pack":"team"}`), 5*time.Second)
		if err != nil {
			t.Fatalf("planner: %s: %v (violations %q)", subj, err, planner.violated())
		}
		if e := m.Header.Get("Nats-Service-Error"); e != "" {
			t.Errorf("planner: %s answered the error %s: %s", subj, e, m.Data)
		}
	}
	c := connect(t, url, nats.UserInfo("planner", shippedPassword("planner")), nats.CustomInboxPrefix("_INBOX_planner"))
	c.publishTask("fleet-1", `{"task_id":"T-fleet","role":"architect","pack":"team"}`, false)
	c.waitSpecs(1, 20*time.Second)
	outs := c.outcomes()
	if !strings.Contains(string(outs[0].body), "bundle-model") {
		t.Fatalf("the outcome was not made from the pushed bundle: %s", outs[0].body)
	}

	// An allocator (admin here: allocators are not among the shipped
	// users) reports another model than decided.
	admin := connectAs(t, url, "admin")
	alloc := fmt.Appendf(nil, `{"specversion": "1.0", "id": "alloc-1", "source": "allocator-1", "type": "dev.rolecall.agentspec.allocated.v1", "datacontenttype": "application/json", "data": {"decision_id": %q, "provider": "p", "model": "other-model", "effort": null}}`, outs[0].ev.ID())
	if _, err := admin.js.PublishMsg(context.Background(), &nats.Msg{Subject: "rolecall.allocations.architect", Data: alloc, Header: nats.Header{"content-type": {"application/cloudevents+json"}}}); err != nil {
		t.Fatal(err)
	}
	c.waitSpecs(2, 20*time.Second)
	specs, err := admin.js.Stream(context.Background(), "ROLECALL_SPECS")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := specs.GetLastMsgForSubject(context.Background(), "rolecall.specs.drift.>"); err != nil {
		t.Errorf("no drift event: %v", err)
	} else if !strings.Contains(string(m.Data), "other-model") {
		t.Errorf("drift event %s does not name the allocated model", m.Data)
	}
	if err := w.terminate(20 * time.Second); err != nil {
		t.Error(err)
	}
	if strings.Contains(strings.ToLower(w.logs()), "permissions violation") {
		t.Errorf("the worker hit a permission violation:\n%s", tail(w.logs(), 4000))
	}
	if v := planner.violated(); v != "" {
		t.Errorf("the planner hit a permission violation: %s", v)
	}
}
