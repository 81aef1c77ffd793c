package reliability_test

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// assertNoSecret fails if out holds any secret, whole or as a 16-byte
// piece (a truncated or wrapped print is still a leak).
func assertNoSecret(t testing.TB, where, out string, secrets []string) {
	t.Helper()
	for _, s := range secrets {
		for _, piece := range secretPieces(s) {
			if strings.Contains(out, piece) {
				t.Errorf("%s contains a secret (piece %q of a %d-byte secret)", where, piece, len(s))
				break
			}
		}
	}
}

func secretPieces(s string) []string {
	var pieces []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "-----") {
			continue // PEM armour is public
		}
		if len(line) <= 16 {
			pieces = append(pieces, line)
			continue
		}
		for i := 0; i+16 <= len(line); i += 16 {
			pieces = append(pieces, line[i:i+16])
		}
	}
	return pieces
}

// authMode is one way the worker authenticates to NATS.
type authMode struct {
	name       string
	serverConf string
	scheme     string
	// root is the config root (a rolecall.yaml may carry settings).
	root       string
	workerArgs []string
	workerEnv  []string
	// admin connects the test's own client.
	admin   []nats.Option
	secrets []string
	// wrong are attempts that must fail to connect without printing a
	// secret (their own included).
	wrong []wrongAttempt
}

type wrongAttempt struct {
	name    string
	url     string // "" = the server's URL
	args    []string
	env     []string
	secrets []string
	// want is part of the connection error the worker must report.
	want string
}

func authModes(t *testing.T) []authMode {
	t.Helper()
	var modes []authMode

	// Creds file: operator mode with a memory resolver.
	{
		dir := openDir(t)
		op := newOperator(t, dir)
		workerCreds, workerSeed := op.userCreds(t, dir, "worker")
		adminCreds, _ := op.userCreds(t, dir, "admin")
		other := newOperator(t, openDir(t)) // an account this server does not know
		strangerCreds, strangerSeed := other.userCreds(t, dir, "stranger")
		modes = append(modes, authMode{
			name: "creds", serverConf: op.serverConf, scheme: "nats", root: openDir(t),
			workerArgs: []string{"--creds", workerCreds},
			admin:      []nats.Option{nats.UserCredentials(adminCreds)},
			secrets:    []string{workerSeed, strangerSeed},
			wrong: []wrongAttempt{
				{name: "unknown account", args: []string{"--creds", strangerCreds}, secrets: []string{strangerSeed}, want: "Authorization Violation"},
				{name: "no credentials", want: "Authorization Violation"},
			},
		})
	}
	// Nkey seed file.
	{
		dir := openDir(t)
		workerSeedFile, workerPub, workerSeed := userNKey(t, dir, "worker")
		adminSeedFile, adminPub, _ := userNKey(t, dir, "admin")
		strangerFile, _, strangerSeed := userNKey(t, dir, "stranger")
		adminOpt, err := nats.NkeyOptionFromSeed(adminSeedFile)
		if err != nil {
			t.Fatal(err)
		}
		modes = append(modes, authMode{
			name:       "nkey",
			serverConf: fmt.Sprintf("authorization {\n  users = [\n    {nkey: %s}\n    {nkey: %s}\n  ]\n}\n", workerPub, adminPub),
			scheme:     "nats", root: openDir(t),
			workerArgs: []string{"--nkey", workerSeedFile},
			admin:      []nats.Option{adminOpt},
			secrets:    []string{workerSeed, strangerSeed},
			wrong: []wrongAttempt{
				{name: "unknown nkey", args: []string{"--nkey", strangerFile}, secrets: []string{strangerSeed}, want: "Authorization Violation"},
			},
		})
	}
	// User and password; the worker's password comes from rolecall.yaml,
	// which `worker resolve --explain` also reads.
	{
		const pw, adminPW, wrongPW = "pw-Q7v!x9Lr2#mK4tZ8wB6n", "admin-pw-3kD9sL2qP7xV", "wrong-pw-H5j8Kc2Nq4Rz"
		root := openDir(t)
		writeFile(t, filepath.Join(root, "rolecall.yaml"), "nats:\n  user: rc-worker\n  password: "+quote(pw)+"\n")
		modes = append(modes, authMode{
			name:       "user-password",
			serverConf: fmt.Sprintf("authorization {\n  users = [\n    {user: rc-worker, password: %q}\n    {user: admin, password: %q}\n  ]\n}\n", pw, adminPW),
			scheme:     "nats", root: root,
			admin:   []nats.Option{nats.UserInfo("admin", adminPW)},
			secrets: []string{pw, adminPW, wrongPW},
			wrong: []wrongAttempt{
				{name: "wrong password from the environment", env: []string{"ROLECALL_NATS_PASSWORD=" + wrongPW}, secrets: []string{wrongPW}, want: "Authorization Violation"},
				{name: "wrong password in the URL", url: "nats://rc-worker:" + wrongPW + "@127.0.0.1:%d", secrets: []string{wrongPW}, want: "Authorization Violation"},
			},
		})
	}
	// TLS with client certificates (verify: true).
	{
		dir := openDir(t)
		p := newPKI(t, dir)
		modes = append(modes, authMode{
			name:       "tls-client-cert",
			serverConf: fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  verify: true\n  timeout: 2\n}\n", p.serverCert, p.serverKey, p.ca),
			scheme:     "tls", root: openDir(t),
			workerArgs: []string{"--tls-ca", p.ca, "--tls-cert", p.clientCert, "--tls-key", p.clientKey},
			admin:      []nats.Option{nats.RootCAs(p.ca), nats.ClientCert(p.clientCert, p.clientKey)},
			secrets:    []string{p.clientKeyPEM},
			wrong: []wrongAttempt{
				// TLS 1.3 reports the missing certificate after the handshake, as
				// "certificate required" or as the connection closing: both are TLS errors.
				{name: "no client certificate", args: []string{"--tls-ca", p.ca}, want: "tls"},
			},
		})
	}
	return modes
}

// TestAuthModes: for each authentication method, a nats-server configured
// for it, the real worker connecting with it and resolving tasks, and
// failed attempts that are refused. No secret appears in the worker's
// logs (at debug level), in outcome events, in /readyz or /metrics, or in
// `worker resolve --explain`.
func TestAuthModes(t *testing.T) {
	for _, m := range authModes(t) {
		t.Run(m.name, func(t *testing.T) {
			srv := startNATS(t, m.serverConf)
			srv.scheme = m.scheme
			c := connect(t, srv.url(), m.admin...)
			w := startWorker(t, srv.url(), m.root, workerOpts{args: append([]string{"--log-level", "debug"}, m.workerArgs...), env: m.workerEnv})

			ids := []string{"auth-ok", "auth-unknown-role", "auth-bad-task"}
			c.publishTask(ids[0], `{"task_id":"T-auth","role":"architect"}`, false)
			c.publishTask(ids[1], `{"task_id":"T-auth-2","role":"nobody"}`, true)
			c.publishTask(ids[2], `{"task_id":"T-auth-3","role":"architect","colour":"red"}`, false)
			c.waitSpecs(3, 20*time.Second)
			outs := c.outcomes()
			exactlyOnce(t, ids, outs)
			for _, o := range outs {
				assertNoSecret(t, "outcome "+o.subject, string(o.body), m.secrets)
				switch o.ext(events.ExtCausationID) {
				case ids[0]:
					if o.ev.Type() != events.TypeSpecResolved {
						t.Errorf("good task: %s %s", o.ev.Type(), o.ev.Data())
					}
				case ids[1]:
					if f := o.failure(t); f.Code != resolve.CodeRoleUnknown {
						t.Errorf("unknown role: %s", f.Code)
					}
				case ids[2]:
					if f := o.failure(t); f.Code != resolve.CodeTaskInvalid {
						t.Errorf("bad task: %s", f.Code)
					}
				}
			}
			for _, path := range []string{"/readyz", "/metrics", "/healthz"} {
				assertNoSecret(t, path, httpGet(t, "http://"+w.httpAddr+path), m.secrets)
			}
			if err := w.terminate(20 * time.Second); err != nil {
				t.Error(err)
			}
			assertNoSecret(t, "worker logs", w.logs(), m.secrets)
			if !strings.Contains(w.logs(), `"task resolved"`) {
				t.Error("debug logs are missing: the secret scan looked at nothing")
			}

			// The offline commands read the same root (and its nats: block).
			taskFile := filepath.Join(t.TempDir(), "task.json")
			writeFile(t, taskFile, `{"task_id":"T-explain","role":"architect"}`)
			for _, args := range [][]string{{"resolve", "--explain"}, {"resolve"}, {"validate"}, {"roster"}} {
				args = append(args, "--root", m.root)
				if args[0] == "resolve" {
					args = append(args, taskFile)
				}
				code, p := runWorkerCmd(t, 30*time.Second, nil, args...)
				if code != 0 {
					t.Errorf("worker %s: exit %d: %s", strings.Join(args, " "), code, p.logs())
				}
				assertNoSecret(t, "worker "+args[0], p.logs(), m.secrets)
			}

			for _, wa := range m.wrong {
				url := srv.url()
				if wa.url != "" {
					url = fmt.Sprintf(wa.url, srv.port)
				}
				bad := startWorker(t, url, m.root, workerOpts{name: "worker (" + wa.name + ")", args: wa.args, env: wa.env, noWait: true})
				if err := bad.wait(20 * time.Second); err != nil {
					t.Fatalf("%s: %v", wa.name, err)
				}
				if bad.state.Success() {
					t.Errorf("%s: the worker connected", wa.name)
				}
				if !strings.Contains(bad.logs(), wa.want) {
					t.Errorf("%s: the error does not say %q:\n%s", wa.name, wa.want, bad.logs())
				}
				assertNoSecret(t, "failed attempt "+wa.name, bad.logs(), append(wa.secrets, m.secrets...))
			}
		})
	}
}

func httpGet(t testing.TB, url string) string {
	t.Helper()
	resp, err := httpClient.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// workerPublish and workerSubscribe are the minimal NATS permissions of a
// worker with default names, streams created by an administrator and
// --inbox-prefix _INBOX_rcw (docs/RELIABILITY.md explains each).
var (
	workerPublish = []string{
		"rolecall.specs.>",
		"$JS.API.STREAM.INFO.ROLECALL_TASKS",
		"$JS.API.STREAM.INFO.ROLECALL_SPECS",
		"$JS.API.STREAM.INFO.ROLECALL_DEADLETTER",
		"$JS.API.CONSUMER.INFO.ROLECALL_TASKS.rolecall-workers",
		"$JS.API.CONSUMER.INFO.ROLECALL_DEADLETTER.rolecall-workers-deadletter",
		"$JS.API.CONSUMER.MSG.NEXT.ROLECALL_TASKS.rolecall-workers",
		"$JS.API.CONSUMER.MSG.NEXT.ROLECALL_DEADLETTER.rolecall-workers-deadletter",
		"$JS.ACK.ROLECALL_TASKS.rolecall-workers.>",
		"$JS.ACK.ROLECALL_DEADLETTER.rolecall-workers-deadletter.>",
		"$JS.API.STREAM.MSG.GET.ROLECALL_TASKS",
		// The idempotency store: find the bucket, look a key up, record
		// one.
		"$JS.API.STREAM.INFO.KV_ROLECALL_OUTCOMES",
		"$JS.API.DIRECT.GET.KV_ROLECALL_OUTCOMES.$KV.ROLECALL_OUTCOMES.>",
		"$KV.ROLECALL_OUTCOMES.>",
	}
	workerSubscribe = []string{"_INBOX_rcw.>"}
)

func natsList(subjects []string) string {
	q := make([]string, len(subjects))
	for i, s := range subjects {
		q[i] = quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// TestLeastPrivilege runs the worker as a NATS user holding exactly the
// documented permissions, with the streams and consumers created by an
// administrator (--no-create). Tasks resolve and fail end to end, and the
// dead-letter path (advisory → fetch by sequence → delivery_exhausted)
// works too; the worker hits no permission violation. The same user can
// publish nowhere else: not a task, not a stream deletion, not another
// client's inbox.
func TestLeastPrivilege(t *testing.T) {
	const workerPW, adminPW = "least-privilege-pw-8Hq2", "admin-pw-Zt7m4Kx"
	conf := fmt.Sprintf(`accounts {
  APP {
    jetstream: enabled
    users = [
      {user: admin, password: %q}
      {user: rc-worker, password: %q, permissions: {
        publish: {allow: %s}
        subscribe: {allow: %s}
      }}
    ]
  }
}
`, adminPW, workerPW, natsList(workerPublish), natsList(workerSubscribe))
	srv := startNATS(t, conf)
	c := connect(t, srv.url(), nats.UserInfo("admin", adminPW))

	// The administrator creates what the worker will only look up.
	cfg := pipeline.DefaultConfig()
	cfg.AckWait, cfg.MaxDeliver = time.Second, 2
	ctx, cancel := ctxT(10 * time.Second)
	defer cancel()
	if _, err := pipeline.Ensure(ctx, c.js, cfg); err != nil {
		t.Fatalf("admin: ensure streams: %v", err)
	}
	w := startWorker(t, srv.url(), openDir(t), workerOpts{
		// The smallest set is for a worker with no optional surface: the
		// micro service and the drift check are off (docs/SECURITY.md lists
		// what each adds; TestShippedFleetUsers runs them).
		args: []string{"--no-create", "--service=false", "--audit=false", "--user", "rc-worker", "--inbox-prefix", "_INBOX_rcw", "--ack-wait", "1s", "--max-deliver", "2", "--retry-for", "1s", "--log-level", "debug"},
		env:  []string{"ROLECALL_NATS_PASSWORD=" + workerPW},
	})
	ids := []string{"lp-ok", "lp-fail"}
	c.publishTask(ids[0], `{"task_id":"T-lp","role":"architect"}`, false)
	c.publishTask(ids[1], `{"task_id":"T-lp-2","role":"architect","modes":["telepathic"]}`, true)
	c.waitSpecs(2, 20*time.Second)
	// A scrape makes the worker ask for consumer info (the lag gauge).
	httpGet(t, "http://"+w.httpAddr+"/metrics")

	// Dead-letter path: the outcome stream refuses while a task exhausts
	// its deliveries, then accepts again.
	c.updateSpecs(func(sc *jetstream.StreamConfig) { sc.MaxMsgs, sc.Discard = 2, jetstream.DiscardNew })
	ids = append(ids, "lp-dead")
	c.publishTask(ids[2], `{"task_id":"T-lp-dead","role":"architect"}`, false)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(w.stderr.String(), "dead-letter publish failed") {
		if time.Now().After(deadline) {
			t.Fatalf("the dead-letter path never ran; stderr:\n%s", tail(w.stderr.String(), 3000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.updateSpecs(func(sc *jetstream.StreamConfig) { sc.MaxMsgs = -1 })
	c.waitSpecs(3, 20*time.Second)
	outs := c.outcomes()
	exactlyOnce(t, ids, outs)
	for _, o := range outs {
		if o.ext(events.ExtCausationID) == "lp-dead" {
			if f := o.failure(t); f.Code != resolve.CodeDeliveryExhausted || str(f.TaskID) != `"T-lp-dead"` {
				t.Errorf("dead-letter outcome %s for %s, want delivery_exhausted for T-lp-dead", f.Code, str(f.TaskID))
			}
		}
	}
	if err := w.terminate(20 * time.Second); err != nil {
		t.Error(err)
	}
	if strings.Contains(w.logs(), "Permissions Violation") || strings.Contains(w.logs(), "permissions violation") {
		t.Errorf("the worker hit a permission violation with the documented permissions:\n%s", tail(w.logs(), 4000))
	}
	assertNoSecret(t, "worker logs", w.logs(), []string{workerPW})

	// The same credentials can do nothing else.
	var mu sync.Mutex
	var violations []string
	nc, err := nats.Connect(srv.url(), nats.UserInfo("rc-worker", workerPW), nats.CustomInboxPrefix("_INBOX_rcw"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			violations = append(violations, err.Error())
			mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	forbiddenPub := []string{
		"rolecall.tasks.forged",
		"$JS.API.STREAM.DELETE.ROLECALL_TASKS",
		"$JS.API.STREAM.PURGE.ROLECALL_SPECS",
		"$JS.API.STREAM.MSG.DELETE.ROLECALL_SPECS",
		"$JS.API.STREAM.UPDATE.ROLECALL_SPECS",
		"$JS.API.CONSUMER.CREATE.ROLECALL_TASKS.rogue",
		"$JS.API.CONSUMER.DELETE.ROLECALL_TASKS.rolecall-workers",
		"$JS.API.STREAM.MSG.GET.ROLECALL_SPECS",
		"_INBOX.someone-else",
		"elsewhere",
	}
	for _, subj := range forbiddenPub {
		if err := nc.Publish(subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	forbiddenSub := []string{"rolecall.tasks.>", "rolecall.specs.>", "_INBOX.>", ">"}
	for _, subj := range forbiddenSub {
		if _, err := nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	deadline = time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(violations, "\n")
		mu.Unlock()
		missing := 0
		for _, subj := range forbiddenPub {
			if !strings.Contains(got, fmt.Sprintf("Permissions Violation for Publish to %q", subj)) {
				missing++
			}
		}
		for _, subj := range forbiddenSub {
			if !strings.Contains(got, fmt.Sprintf("Permissions Violation for Subscription to %q", subj)) {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d forbidden operations were not refused; violations seen:\n%s", missing, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And nothing forged reached the streams.
	if info := c.streamInfo(defaults.TasksStream); info.State.Msgs != 3 {
		t.Errorf("ROLECALL_TASKS holds %d messages, want the 3 the planner sent", info.State.Msgs)
	}
	t.Logf("figures: publish_allow=%d subscribe_allow=%d forbidden_publishes_refused=%d forbidden_subscriptions_refused=%d",
		len(workerPublish), len(workerSubscribe), len(forbiddenPub), len(forbiddenSub))
}

// TestOutcomesNameNoHostPaths: outcomes of a real worker whose config root
// is deep in the file system name only root-relative files, for every
// failure a task can cause at run time (discovery failures of the root
// itself are covered by TestHostileFiles through the same FailureFrom).
func TestOutcomesNameNoHostPaths(t *testing.T) {
	srv := startNATS(t, "")
	root := filepath.Join(openDir(t), "deep", "config", "root")
	writeFile(t, filepath.Join(root, "rolecall.yaml"), "default_pack: team\noverlays:\n  critic: ghost\n")
	writeFile(t, filepath.Join(root, "packs", "team.yaml"), "roles:\n  architect:\n    model: m\n    modes_allow: [systematic]\n    default_modes: [systematic]\n  analyst:\n    model: m\n    active: false\n")
	writeFile(t, filepath.Join(root, "agents", "house.md"), "---\ndisposition: overlay\nbase_role: architect\nmodel: house-model\n---\nHouse rules.\n")
	writeFile(t, filepath.Join(root, "agents", "bot.md"), "---\ndisposition: replacement\nenabled: false\n---\nA bot.\n")
	w := startWorker(t, srv.url(), root, workerOpts{args: []string{"--log-level", "warn"}})
	c := connect(t, srv.url())
	tasks := map[string]string{
		"pack-not-found":    `{"task_id":"T-p1","role":"architect","pack":"nope"}`,
		"role-missing":      `{"task_id":"T-p2","role":"tester"}`,
		"role-inactive":     `{"task_id":"T-p3","role":"analyst"}`,
		"mode-disallowed":   `{"task_id":"T-p4","role":"architect","modes":["premortem"]}`,
		"profile-missing":   `{"task_id":"T-p5","role":"architect","profile":"ghost"}`,
		"overlay-missing":   `{"task_id":"T-p6","role":"critic"}`,
		"profile-inactive":  `{"task_id":"T-p7","role":"external:bot"}`,
		"overlay-mismatch":  `{"task_id":"T-p8","role":"critic","pack":"default","profile":"house"}`,
		"resolved-with-ovl": `{"task_id":"T-p9","role":"architect","profile":"house"}`,
		"task-invalid":      `{"task_id":"T-p10","role":"architect","pack":"../../etc"}`,
	}
	var ids []string
	for id, data := range tasks {
		ids = append(ids, id)
		c.publishTask(id, data, len(ids)%2 == 0)
	}
	c.waitSpecs(len(ids), 20*time.Second)
	outs := c.outcomes()
	exactlyOnce(t, ids, outs)
	codes := map[string]bool{}
	for _, o := range outs {
		assertNoHostPath(t, o.body, root)
		if strings.Contains(string(o.body), filepath.Dir(root)) {
			t.Errorf("outcome %s names a parent of the root", o.subject)
		}
		if o.ev.Type() == events.TypeSpecFailed {
			codes[string(o.failure(t).Code)] = true
		}
	}
	if len(codes) < 7 {
		t.Errorf("only %d distinct failure codes were exercised: %v", len(codes), codes)
	}
	if !w.waitReady(5 * time.Second).Ready {
		t.Error("worker not ready after the failures")
	}
	t.Logf("failure codes checked for host paths: %v", keys(codes))
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
