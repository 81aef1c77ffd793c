package service_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/service"
)

// The permissions docs/SERVICE.md lists: the service's connection, and a
// planner that calls it.
var (
	servicePerms = &server.Permissions{
		Publish: &server.SubjectPermission{Allow: []string{
			"$JS.API.STREAM.INFO.KV_ROLECALL_OUTCOMES", "$JS.API.STREAM.INFO.ROLECALL_SPECS",
			"$JS.API.DIRECT.GET.KV_ROLECALL_OUTCOMES.>", "$JS.API.STREAM.MSG.GET.KV_ROLECALL_OUTCOMES",
			"$JS.API.STREAM.MSG.GET.ROLECALL_SPECS",
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{"rolecall.svc.>", "$SRV.>", "_INBOX.>"}},
		Response:  &server.ResponsePermission{MaxMsgs: 1},
	}
	plannerPerms = &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: []string{"rolecall.svc.>", "$SRV.>"}},
		Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
	}
)

// TestLeastPrivilege: with only the documented permissions the service
// registers, answers every endpoint (explain of a recorded outcome too)
// and is listed; a planner with its documented permissions can call it
// and cannot publish a task or an outcome.
func TestLeastPrivilege(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "admin", Password: "a"},
			{Username: "service", Password: "s", Permissions: servicePerms},
			{Username: "planner", Password: "p", Permissions: plannerPerms},
		}
	})
	errs := make(chan error, 16)
	onErr := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	admin := natstest.Connect(t, srv, nats.UserInfo("admin", "a"))
	svcNC := natstest.Connect(t, srv, nats.UserInfo("service", "s"), onErr)
	planner := natstest.Connect(t, srv, nats.UserInfo("planner", "p"), onErr)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(ctx, ajs, cfg); err != nil {
		t.Fatal(err)
	}
	src, err := discover.NewSource(examples, discover.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	task := string(readFile(t, filepath.Join(examples, "tasks", "architect.json")))
	id, _ := outcometest.Store(t, ajs, cfg, src.Snapshot(), outcometest.Outcome{Source: "urn:planner", ID: "ev-1", Task: task})

	js, err := jetstream.New(svcNC)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := service.Start(svcNC, src, service.Options{JetStream: js, Instance: "lp"})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()

	for _, c := range []struct{ subject, body string }{
		{"$SRV.PING.rolecall", ""}, {"$SRV.INFO.rolecall", ""}, {"$SRV.STATS.rolecall", ""},
		{"rolecall.svc.resolve", task}, {"rolecall.svc.explain", task}, {"rolecall.svc.explain", `{"outcome_id":"` + id + `"}`},
		{"rolecall.svc.roster", ""}, {"rolecall.svc.validate", ""}, {"rolecall.svc.config", ""},
	} {
		m, err := planner.Request(c.subject, []byte(c.body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", c.subject, err)
		}
		wantOK(t, c.subject+" "+c.body, m, nil)
	}
	// A planner may not publish tasks or outcomes.
	for _, subject := range []string{"rolecall.tasks.x", "rolecall.specs.resolved.architect"} {
		if err := planner.Publish(subject, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		_ = planner.Flush()
		select {
		case err := <-errs:
			if err == nil || !isPermission(err) {
				t.Errorf("publish on %s: %v, want a permissions violation", subject, err)
			}
		case <-time.After(2 * time.Second):
			t.Errorf("publish on %s: no permissions violation", subject)
		}
	}
	select {
	case err := <-errs:
		t.Fatalf("unexpected async error: %v", err)
	default:
	}
}

func isPermission(err error) bool {
	return errors.Is(err, nats.ErrPermissionViolation) || strings.Contains(strings.ToLower(err.Error()), "permissions violation")
}
