package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/audit"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/pipeline"
)

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRunAuditsAllocations: worker run checks allocations by default and
// publishes drift; --audit=false creates no allocations stream.
func TestRunAuditsAllocations(t *testing.T) {
	root := t.TempDir()
	writeRootFile(t, root, "packs/team.yaml", "roles:\n  tester:\n    model: team-model\n")
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	ctx := context.Background()
	cfg := pipeline.DefaultConfig()
	startWorker(t, "--nats="+srv.ClientURL(), "--root="+root)
	waitFor(t, "the allocations stream", func() bool {
		_, err := js.Consumer(ctx, audit.DefaultStream, audit.DefaultConsumer)
		return err == nil
	})
	h, body, err := events.EncodeTask("planner", "ev-1", []byte(`{"task_id": "T-1", "role": "tester", "pack": "team"}`), "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: events.TasksSubject(cfg.Prefix, "x"), Header: h, Data: body}); err != nil {
		t.Fatal(err)
	}
	decision := events.OutcomeID("planner", "ev-1")
	specs, err := js.Stream(ctx, cfg.SpecsStream)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the outcome", func() bool {
		info, err := specs.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	alloc := fmt.Sprintf(`{"specversion": "1.0", "id": "alloc-1", "source": "allocator", "type": %q, "data": {"decision_id": %q, "model": "cheap-model"}}`, audit.TypeAllocated, decision)
	if _, err := js.Publish(ctx, audit.AllocationsSubject(cfg.Prefix, "tester"), []byte(alloc)); err != nil {
		t.Fatal(err)
	}
	var drift *jetstream.RawStreamMsg
	waitFor(t, "the drift event", func() bool {
		drift, err = specs.GetLastMsgForSubject(ctx, "rolecall.specs.drift.model")
		return err == nil
	})
	for _, want := range []string{`"decision_id":"` + decision + `"`, `"allocated":"cheap-model"`, `"decided":"team-model"`} {
		if !strings.Contains(string(drift.Data), want) {
			t.Errorf("drift event lacks %s: %s", want, drift.Data)
		}
	}

	t.Run("off", func(t *testing.T) {
		srv := natstest.Start(t)
		js := natstest.JetStream(t, natstest.Connect(t, srv))
		startWorker(t, "--nats="+srv.ClientURL(), "--root="+root, "--audit=false")
		waitFor(t, "the worker's consumer", func() bool {
			_, err := js.Consumer(ctx, cfg.TasksStream, cfg.Consumer)
			return err == nil
		})
		time.Sleep(500 * time.Millisecond)
		if _, err := js.Stream(ctx, audit.DefaultStream); err == nil {
			t.Errorf("--audit=false created %s", audit.DefaultStream)
		}
	})
}
