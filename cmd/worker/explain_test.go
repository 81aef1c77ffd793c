package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
)

// TestExplainCommand: worker explain on task files and on recorded
// outcomes, and its exit codes (0 explained, 1 typed failure with JSON
// on stdout, 2 usage).
func TestExplainCommand(t *testing.T) {
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("packs/team.yaml", "roles:\n  tester:\n    model: team-model\n")
	write("task.json", `{"task_id": "T-1", "role": "tester", "pack": "team"}`)
	write("bad.json", `{"task_id": "T-2", "role": "tester", "pack": "nope"}`)
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}

	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	task := `{"task_id": "T-1", "role": "tester", "pack": "team"}`
	same, _ := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "planner", ID: "ev-1", Task: task})
	other, _ := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "planner", ID: "ev-2", Task: task, Digest: "sha256:another"})
	legacy, _ := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "planner", ID: "ev-3", Task: task, NoDecision: true})
	nats := "--nats=" + srv.ClientURL()
	r := "--root=" + root

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string // substrings
		stderr string
	}{
		{name: "no argument", args: []string{"explain", r}, code: 2, stderr: "give a task file"},
		{name: "id and task", args: []string{"explain", r, "--id=x", "--task=s", "y"}, code: 2, stderr: "not both"},
		{name: "id and file", args: []string{"explain", r, "--id=x", "task.json"}, code: 2, stderr: "takes no task file"},
		{name: "task without event id", args: []string{"explain", r, "--task=planner"}, code: 2, stderr: "needs the task event's id"},
		{name: "missing file", args: []string{"explain", r, filepath.Join(root, "none.json")}, code: 2},
		{name: "task file", args: []string{"explain", r, filepath.Join(root, "task.json")}, code: 0,
			stdout: []string{`model = "team-model"  (pack, packs/team.yaml:3)`}},
		{name: "failing task", args: []string{"explain", r, filepath.Join(root, "bad.json")}, code: 1,
			stdout: []string{`"code": "pack_not_found"`}},
		{name: "failing task, json", args: []string{"explain", r, "--json", filepath.Join(root, "bad.json")}, code: 1,
			stdout: []string{`"format": "rolecall.explain.v1"`, `"outcome": "failed"`, `"code": "pack_not_found"`}},
		{name: "recorded, same configuration", args: []string{"explain", r, nats, "--id=" + same}, code: 0,
			stdout: []string{"recorded  outcome " + same, "as recorded: the chain explains the recorded decision", `model = "team-model"`}},
		{name: "recorded by event", args: []string{"explain", r, nats, "--json", "--task=planner", "ev-1"}, code: 0,
			stdout: []string{`"outcome_id": "` + same + `"`, `"same_config": true`}},
		{name: "recorded, other configuration", args: []string{"explain", r, nats, "--id=" + other}, code: 0,
			stdout: []string{"differs from the recorded sha256:another: the chain explains what would be decided now"}},
		{name: "unknown id", args: []string{"explain", r, nats, "--id=rc-unknown"}, code: 1,
			stdout: []string{`"code": "outcome_not_found"`, `"outcome_id": "rc-unknown"`}},
		{name: "unknown event", args: []string{"explain", r, nats, "--task=planner", "ev-none"}, code: 1,
			stdout: []string{`"code": "outcome_not_found"`, `"event_id": "ev-none"`}},
		{name: "no decision record", args: []string{"explain", r, nats, "--id=" + legacy}, code: 1,
			stdout: []string{`"code": "decision_missing"`}},
		{name: "no server", args: []string{"explain", r, "--nats=nats://127.0.0.1:1", "--id=" + same}, code: 1, stderr: "connect to NATS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, stderr.String())
			}
		})
	}

	// The stream gone: a typed failure, not a hang or a panic.
	if err := js.DeleteStream(context.Background(), cfg.SpecsStream); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"explain", r, nats, "--id=" + same}, strings.NewReader(""), &stdout, &stderr); code != 1 || !strings.Contains(stdout.String(), `"code": "outcomes_unavailable"`) {
		t.Fatalf("stream gone: exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
}

// TestUIAddressNeedsToken: an audit view beyond loopback without a token
// is a usage error (exit 2), before the worker starts anything.
func TestUIAddressNeedsToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "audit.example:8081"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"run", "--root", t.TempDir(), "--ui", addr}, strings.NewReader(""), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--ui-token-file") {
			t.Errorf("--ui %s: exit %d, stderr %q", addr, code, stderr.String())
		}
	}
}
