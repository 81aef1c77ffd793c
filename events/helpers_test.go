package events_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

const (
	testSource = "urn:rolecall:test-planner"
	testID     = "evt-0001"
	testTP     = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testTS     = "vendor=opaque"
)

// fullTask names every member of the task schema.
const fullTask = `{
  "task_id": "T-42",
  "role": "architect",
  "pack": "default",
  "profile": "house-style",
  "modes": ["systematic", "premortem"],
  "overrides": {
    "model": "claude-opus-4-1",
    "effort": "high",
    "extra_prompt": "Keep it short.",
    "tools": ["Read", "Bash(git:*)"],
    "permissions": {"mode": "rules", "allow": {"Bash": ["git *", "ls"]}, "deny": {"Write": ["/etc/**"]}, "escalate": {}},
    "yolo": true, "bypass": false, "fast_mode": false, "lion_system": true
  }
}`

const minimalTask = `{"task_id":"T-1","role":"architect"}`

// encode wraps task data in a task event in the given mode.
func encode(t testing.TB, data string, binary bool) (nats.Header, []byte) {
	t.Helper()
	h, body, err := events.EncodeTask(testSource, testID, []byte(data), "", "", binary)
	if err != nil {
		t.Fatalf("EncodeTask: %v", err)
	}
	return h, body
}

var modes = []struct {
	name   string
	binary bool
}{{"structured", false}, {"binary", true}}

// wantDecodeError asserts err is a *DecodeError with code, subject and reason.
func wantDecodeError(t *testing.T, err error, code resolve.Code, subject, reason string) *events.DecodeError {
	t.Helper()
	var de *events.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error = %v (%T), want *DecodeError", err, err)
	}
	if de.Code != code || de.Subject != subject || de.Reason() != reason {
		t.Fatalf("error = {code %q, subject %q, reason %q} (%s), want {%q, %q, %q}",
			de.Code, de.Subject, de.Reason(), de.Message, code, subject, reason)
	}
	if de.Message == "" || de.Details == nil {
		t.Fatalf("error %+v has no message or details", de)
	}
	return de
}

func ptr[T any](v T) *T { return &v }
