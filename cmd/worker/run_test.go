package main

import (
	"context"
	"encoding/json"

	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rolecall/rolecall/internal/natstest"
)

// freeAddr is a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// brokenRoot is a config root that loads (a worker serves it) while a
// pack's default Modes do not exist: every task that selects the pack
// fails.
func brokenRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeRootFile(t, root, "packs/team.yaml", "roles:\n  analyst:\n    model: m\n    default_modes: [evidential, telepathic]\n")
	return root
}

func writeRootFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// bgWorker is `worker run` in this process, stopped by cancelling its
// context (what SIGINT does).
type bgWorker struct {
	stop   context.CancelFunc
	done   chan int
	stderr *syncBuffer
}

func startWorker(t *testing.T, args ...string) *bgWorker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &bgWorker{stop: cancel, done: make(chan int, 1), stderr: &syncBuffer{}}
	go func() {
		w.done <- runContext(ctx, append([]string{"run"}, args...), strings.NewReader(""), io.Discard, w.stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.done:
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop within 30s")
		}
	})
	return w
}

// waitHTTP polls url until check accepts its body (or 20 s pass).
func waitHTTP(t *testing.T, w *bgWorker, url string, check func(status int, body []byte) bool) []byte {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if check(resp.StatusCode, body) {
				return body
			}
		}
		select {
		case code := <-w.done:
			t.Fatalf("worker exited %d:\n%s", code, w.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered as wanted (last error %v)\n%s", url, err, w.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type readyz struct {
	Ready    bool `json:"ready"`
	Problems []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"problems"`
}

// TestRunStrictRefusesInvalidPacks: with --strict a worker whose config
// root has a problem worker validate would report does not start: it logs
// each problem with file:line and code and exits 1, before it opens a
// store or a connection.
func TestRunStrictRefusesInvalidPacks(t *testing.T) {
	root := brokenRoot(t)
	store := filepath.Join(t.TempDir(), "store")
	var stdout, stderr syncBuffer
	code := runContext(context.Background(), []string{"run", "--root", root, "--strict", "--listen", freeAddr(t), "--store", store}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr.String())
	}
	want := `"problem":"packs/team.yaml:4: pack_default_invalid: pack \"team\" default_modes for role \"analyst\": mode \"telepathic\" is not in the catalog","file":"packs/team.yaml","line":4,"code":"pack_default_invalid"`
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks the problem with file:line and code %s:\n%s", want, stderr.String())
	}
	if !regexp.MustCompile(`(?m)^worker: --strict: the config root .* has 1 problem\(s\)`).MatchString(stderr.String()) {
		t.Errorf("stderr does not say why it refused:\n%s", stderr.String())
	}
	if stdout.String() != "" {
		t.Errorf("stdout %q, want nothing: no server was started", stdout.String())
	}
	if _, err := os.Stat(store); !os.IsNotExist(err) {
		t.Errorf("the store %s exists (%v): the worker went on starting", store, err)
	}
}

// TestRunReportsProblemsAtStartAndAfterReload: without --strict the worker
// starts and serves the root, and its problems are in the log, in
// /readyz (which stays 200) and in rolecall.config.problems; a reload
// that adds a problem is reported the same way.
func TestRunReportsProblemsAtStartAndAfterReload(t *testing.T) {
	root := brokenRoot(t)
	httpAddr := freeAddr(t)
	w := startWorker(t, "--root", root, "--listen", freeAddr(t), "--store", t.TempDir(), "--http", httpAddr, "--reload-interval", "100ms")
	var r readyz
	waitHTTP(t, w, "http://"+httpAddr+"/readyz", func(status int, body []byte) bool {
		return status == http.StatusOK && json.Unmarshal(body, &r) == nil && r.Ready
	})
	if len(r.Problems) != 1 || r.Problems[0].File != "packs/team.yaml" || r.Problems[0].Line != 4 || r.Problems[0].Code != "pack_default_invalid" {
		t.Errorf("/readyz problems %+v, want packs/team.yaml:4 pack_default_invalid", r.Problems)
	}
	waitHTTP(t, w, "http://"+httpAddr+"/metrics", func(status int, body []byte) bool {
		return status == http.StatusOK && strings.Contains(string(body), "\nrolecall_config_problems{")
	})
	metric := regexp.MustCompile(`(?m)^rolecall_config_problems\{[^}]*\} (\d+)$`)
	if m := metric.FindSubmatch(waitHTTP(t, w, "http://"+httpAddr+"/metrics", func(int, []byte) bool { return true })); m == nil || string(m[1]) != "1" {
		t.Errorf("rolecall_config_problems %q, want 1", m)
	}

	// A hot reload brings a second problem.
	writeRootFile(t, root, "packs/ops.yaml", "roles:\n  critic:\n    model: m\n    default_modes: [fast, slow]\n")
	waitHTTP(t, w, "http://"+httpAddr+"/readyz", func(status int, body []byte) bool {
		r = readyz{}
		return status == http.StatusOK && json.Unmarshal(body, &r) == nil && len(r.Problems) == 2
	})
	waitHTTP(t, w, "http://"+httpAddr+"/metrics", func(_ int, body []byte) bool {
		m := metric.FindSubmatch(body)
		return m != nil && string(m[1]) == "2"
	})
	logs := w.stderr.String()
	for _, p := range []string{"packs/team.yaml:4: pack_default_invalid", "packs/ops.yaml:4: pack_default_invalid"} {
		if n := strings.Count(logs, `"problem":"`+p); n != 1 {
			t.Errorf("%d log lines for %s, want 1 (logged when first seen):\n%s", n, p, logs)
		}
	}
}

// TestMetricsAnswerWithinOneSecondWhileBrokerDown: a scrape of a running
// worker's /metrics answers while its broker is stopped, with the
// backlog marked stale. The second is a liveness bound with a wide
// margin: the consumer-info request behind the gauge has a 500 ms
// deadline, and none while disconnected.
func TestMetricsAnswerWithinOneSecondWhileBrokerDown(t *testing.T) {
	srv := natstest.Start(t)
	httpAddr := freeAddr(t)
	w := startWorker(t, "--root", "../../examples", "--nats", srv.ClientURL(), "--http", httpAddr, "--drain-timeout", "2s")
	url := "http://" + httpAddr + "/metrics"
	waitHTTP(t, w, url, func(status int, body []byte) bool {
		return status == http.StatusOK && strings.Contains(string(body), "\nrolecall_consumer_pending_stale{") &&
			regexp.MustCompile(`(?m)^rolecall_consumer_pending_stale\{[^}]*\} 0$`).Match(body)
	})

	srv.Shutdown()
	srv.WaitForShutdown()
	stale := regexp.MustCompile(`(?m)^rolecall_consumer_pending_stale\{[^}]*\} 1$`)
	sawStale := false
	client := &http.Client{Timeout: 5 * time.Second}
	for i := range 6 {
		start := time.Now()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("scrape %d with the broker down: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if took := time.Since(start); took > time.Second {
			t.Errorf("scrape %d took %s with the broker down, want under 1s", i, took)
		}
		if resp.StatusCode != http.StatusOK {
			t.Errorf("scrape %d: %s", i, resp.Status)
		}
		if stale.Match(body) {
			sawStale = true
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !sawStale {
		t.Error("no scrape marked the backlog stale while the broker was down")
	}
}

// TestRunRefusesBadNumbers: a negative count or duration, a drain
// timeout that is not positive, more than 5 replicas, an --http address
// that does not parse and a subject prefix that is not a literal subject
// are usage errors (exit 2) before the worker opens a store or a
// connection; they used to be ignored, or to fail every stop at once (the
// drain timeout), or to fail after the embedded server had started (the
// prefix, --service-concurrency, --replicas, --http).
func TestRunRefusesBadNumbers(t *testing.T) {
	for _, flag := range []string{
		"--drain-timeout=0s", "--drain-timeout=-1s",
		"--concurrency=-1", "--replicas=-1", "--max-deliver=-2",
		"--ack-wait=-1s", "--retry-for=-1s", "--reload-interval=-5s",
		"--prefix=a b", "--prefix=x.>", "--prefix=a..b",
		"--service-concurrency=-1", "--replicas=6", "--http=8080", "--http=:99999", "--http=:no-such-port",
	} {
		t.Run(flag, func(t *testing.T) {
			store := filepath.Join(t.TempDir(), "store")
			var stdout, stderr syncBuffer
			// Bounded: a worker that takes the flag runs until stopped.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			code := runContext(ctx, []string{"run", "--root", t.TempDir(), "--listen", freeAddr(t), "--store", store, flag}, strings.NewReader(""), &stdout, &stderr)
			if code != 2 {
				t.Fatalf("exit %d, want 2\n%s", code, stderr.String())
			}
			name, _, _ := strings.Cut(flag, "=")
			if name == "--prefix" {
				name = "subject prefix"
			}
			if !strings.Contains(stderr.String(), "worker: "+name) {
				t.Errorf("stderr does not name %s:\n%s", name, stderr.String())
			}
			if _, err := os.Stat(store); !os.IsNotExist(err) {
				t.Errorf("the store %s exists (%v): the worker went on starting", store, err)
			}
		})
	}
}

// TestDrainTimeoutBoundsStopWithBrokerDown: a worker stopped while its
// broker is down, with nothing in flight, stops at once and cleanly. The
// flush of the last acks used to wait its own 10 s past the timeout, then
// the rest of the timeout; the pull iterator's drain waited 10 s more.
func TestDrainTimeoutBoundsStopWithBrokerDown(t *testing.T) {
	srv := natstest.Start(t)
	httpAddr := freeAddr(t)
	const drain = 5 * time.Second
	w := startWorker(t, "--root", "../../examples", "--nats", srv.ClientURL(), "--http", httpAddr, "--drain-timeout", drain.String(), "--service=false", "--audit=false")
	waitHTTP(t, w, "http://"+httpAddr+"/readyz", func(status int, _ []byte) bool { return status == http.StatusOK })

	srv.Shutdown()
	srv.WaitForShutdown()
	start := time.Now()
	w.stop()
	select {
	case code := <-w.done:
		w.done <- code // for the cleanup
		// Nothing is in flight: the stop waits for neither the broker
		// nor the drain timeout, and it is a clean one.
		if took := time.Since(start); code != 0 || took > drain/2 {
			t.Errorf("stopped in %s with exit %d, want exit 0 well within --drain-timeout %s\n%s", took.Round(100*time.Millisecond), code, drain, w.stderr.String())
		}
	case <-time.After(drain + 5*time.Second):
		t.Fatalf("worker still running %s after the stop, --drain-timeout %s\n%s", time.Since(start).Round(time.Second), drain, w.stderr.String())
	}
}
