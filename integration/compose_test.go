package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/moby/moby/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/testcontainers/testcontainers-go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/schematest"

	"github.com/rolecall/rolecall/internal/natstest"
)

// composeCommand finds Docker Compose: the v2 plugin (`docker compose`)
// or the v1 program (`docker-compose`, what Debian packages).
func composeCommand(t *testing.T) []string {
	t.Helper()
	for _, cmd := range [][]string{{"docker", "compose"}, {"docker-compose"}} {
		if err := exec.Command(cmd[0], append(cmd[1:], "version")...).Run(); err == nil {
			return cmd
		}
	}
	if os.Getenv("ROLECALL_REQUIRE_DOCKER") == "1" {
		t.Fatal("ROLECALL_REQUIRE_DOCKER=1 but neither `docker compose` nor `docker-compose` runs")
	}
	t.Skip("no Docker Compose (neither `docker compose` nor `docker-compose`)")
	return nil
}

// composeAdminPassword is the provisioning user's password the test gives
// the compose project.
const composeAdminPassword = "rolecall-it-admin"

// TestComposeUp brings docker-compose.yml up on the locally built images,
// waits until the three workers report healthy (through the image's own
// `worker healthcheck`), submits examples/tasks/architect.json through the
// published port and checks its outcome. Then the fleet profile: the
// file-mode workers stop, the fleet workers start before anything was
// pushed (they stay up and unready, since the `worker` user may not create
// the config buckets), config-push seeds the bundle, and the next task is
// decided from it. Everything is taken down with its volumes.
func TestComposeUp(t *testing.T) {
	imgs := setup(t)
	compose := composeCommand(t)
	port := natstest.FreePorts(t, 1)[0]
	project := composeProject()
	env := append(os.Environ(),
		"ROLECALL_WORKER_IMAGE="+imgs.Worker,
		"ROLECALL_NATS_IMAGE="+imgs.NATS,
		"ROLECALL_NATS_PORT="+strconv.Itoa(port),
		"COMPOSE_PROJECT_NAME="+project,
		"ROLECALL_ADMIN_PASSWORD="+composeAdminPassword,
	)
	// The fleet profile is active in every command, so down removes its
	// containers too; up always names its services.
	run := func(args ...string) (string, error) {
		full := append(append(append([]string{}, compose[1:]...), "-f", repoFile(imgs, "docker-compose.yml"), "-p", project, "--profile", "fleet"), args...)
		cmd := exec.Command(compose[0], full...)
		cmd.Dir = imgs.Root
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("config", "-q"); err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
	start := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := run("logs", "--no-color", "--tail", "40")
			t.Logf("compose logs:\n%s", out)
		}
		if out, err := run("down", "-v", "--remove-orphans", "--timeout", "45"); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	if out, err := run("up", "-d", "nats-1", "nats-2", "nats-3", "worker-1", "worker-2", "worker-3"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}

	ctx := context.Background()
	docker, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	container := func(svc string) string {
		out, err := run("ps", "-q", svc)
		id := strings.TrimSpace(out)
		if err != nil || id == "" {
			t.Fatalf("compose ps %s: %q %v", svc, out, err)
		}
		return id
	}
	restarts := 0
	for _, svc := range []string{"worker-1", "worker-2", "worker-3"} {
		restarts += waitHealthy(t, docker, svc, container(svc), 2*time.Minute)
	}
	// A worker that started before any node listened exits and is
	// restarted by its restart policy; that is allowed, and counted.
	t.Logf("3 workers healthy %s after compose up (%d restarts)", time.Since(start).Round(100*time.Millisecond), restarts)

	// The nodes run the shipped users; the test plays the planner and the
	// auditor at once, so it connects as the provisioning user.
	nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.IgnoreDiscoveredServers(),
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.UserInfo("admin", composeAdminPassword))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	data := submitArchitect(t, nc, imgs)
	t.Logf("figures: scenario=compose resolved outcome %s after compose up", time.Since(start).Round(100*time.Millisecond))
	if got := decisionConfig(t, data); got.Source != "files" {
		t.Fatalf("file-mode workers decided with config source %q", got.Source)
	}

	// The fleet profile, started before the first push.
	if out, err := run("stop", "--timeout", "45", "worker-1", "worker-2", "worker-3"); err != nil {
		t.Fatalf("compose stop: %v\n%s", err, out)
	}
	fleet := []string{"fleet-worker-1", "fleet-worker-2", "fleet-worker-3"}
	if out, err := run(append([]string{"up", "-d"}, fleet...)...); err != nil {
		t.Fatalf("compose up fleet: %v\n%s", err, out)
	}
	fleetStart := time.Now()
	time.Sleep(12 * time.Second) // past the health check's start period
	for _, svc := range fleet {
		res, err := docker.ContainerInspect(ctx, container(svc), client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := res.Container.State
		if !st.Running || res.Container.RestartCount != 0 || st.Health == nil || st.Health.Status == "healthy" {
			t.Fatalf("%s before the first push: running=%v restarts=%d health=%+v; want running, never restarted, not healthy",
				svc, st.Running, res.Container.RestartCount, st.Health)
		}
	}
	if out, err := run("up", "-d", "config-push"); err != nil {
		t.Fatalf("compose up config-push: %v\n%s", err, out)
	}
	for _, svc := range fleet {
		waitHealthy(t, docker, svc, container(svc), 2*time.Minute)
	}
	t.Logf("figures: scenario=compose-fleet 3 fleet workers healthy %s after they started, having waited for the push",
		time.Since(fleetStart).Round(100*time.Millisecond))
	data = submitArchitect(t, nc, imgs)
	if got := decisionConfig(t, data); got.Source != "nats" || got.Revision == nil || *got.Revision == 0 {
		t.Fatalf("fleet workers decided with config %+v, want source nats and a revision", got)
	}
}

// submitArchitect publishes examples/tasks/architect.json under a fresh
// event id and returns the data of its outcome, which must be a resolved
// spec valid against its schema.
func submitArchitect(t *testing.T, nc *nats.Conn, imgs testImages) []byte {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(repoFile(imgs, "examples/tasks/architect.json"))
	if err != nil {
		t.Fatal(err)
	}
	task, _, err := events.DecodeTaskData(data, events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := task.TaskID
	id := fmt.Sprintf("compose-%d", time.Now().UnixNano())
	header, body, err := events.EncodeTask(taskSource, id, data, "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	outcomes := make(chan *nats.Msg, 16)
	sub, err := nc.ChanSubscribe("rolecall.specs.>", outcomes)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(pctx, &nats.Msg{Subject: "rolecall.tasks.architect", Header: header, Data: body}, jetstream.WithMsgID(taskSource+"/"+id)); err != nil {
		t.Fatalf("submit: %v", err)
	}
	wantID := events.OutcomeID(taskSource, id)
	timeout := time.After(time.Minute)
	for {
		select {
		case m := <-outcomes:
			if m.Header.Get(nats.MsgIdHdr) != wantID {
				continue
			}
			ev, err := events.DecodeOutcome(m.Header, m.Data)
			if err != nil {
				t.Fatalf("outcome: %v", err)
			}
			if ev.Type() != events.TypeSpecResolved || ev.Subject() != want {
				t.Fatalf("outcome type %s subject %s, want a resolved spec for %s:\n%s", ev.Type(), ev.Subject(), want, ev.Data())
			}
			if err := schematest.Validate(events.SchemaResolved, ev.Data()); err != nil {
				t.Fatalf("outcome data: %v", err)
			}
			return ev.Data()
		case <-timeout:
			t.Fatalf("no outcome for %s within a minute of submitting it", id)
		}
	}
}

// decisionConfig is the configuration an outcome's decision record names.
func decisionConfig(t *testing.T, data []byte) events.DecisionConfig {
	t.Helper()
	var d events.ResolvedData
	if err := json.Unmarshal(data, &d); err != nil || d.Decision == nil {
		t.Fatalf("outcome data without a decision record: %v", err)
	}
	return d.Decision.Config
}

// waitHealthy waits for Docker to report the container healthy and
// returns how often it was restarted.
func waitHealthy(t *testing.T, docker client.APIClient, name, id string, within time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		res, err := docker.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatalf("inspect %s: %v", name, err)
		}
		st := res.Container.State
		if st.Health != nil && st.Health.Status == "healthy" {
			return res.Container.RestartCount
		}
		if time.Now().After(deadline) {
			var last string
			if st.Health != nil && len(st.Health.Log) > 0 {
				last = st.Health.Log[len(st.Health.Log)-1].Output
			}
			t.Fatalf("%s not healthy after %s: running=%v health=%+v last check %q", name, within, st.Running, st.Health, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
