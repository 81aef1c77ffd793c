package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// An oversized attribute is event_invalid and is never echoed into the
// outcome (which would push the outcome over the server's max payload).
func TestOversizedAttributes(t *testing.T) {
	long := strings.Repeat("a", events.MaxAttributeBytes+1)
	for _, attr := range []string{"id", "source", "subject", "traceparentx"} {
		t.Run(attr, func(t *testing.T) {
			ev := map[string]any{
				"specversion": "1.0", "id": "x", "source": "s", "type": events.TypeTaskAssigned,
				"datacontenttype": "application/json",
				"data":            map[string]any{"task_id": "T-1", "role": "architect"},
			}
			ev[attr] = long
			body, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			inc, err := events.DecodeTask(nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}}, body, events.DecodeOptions{})
			var de *events.DecodeError
			if !errors.As(err, &de) || de.Code != resolve.CodeEventInvalid || de.Reason() != events.ReasonTooLarge {
				t.Fatalf("err = %v, want event_invalid/too_large", err)
			}
			if len(inc.ID) > events.MaxAttributeBytes || len(inc.Source) > events.MaxAttributeBytes {
				t.Errorf("an oversized id or source is echoed: id %d bytes, source %d bytes", len(inc.ID), len(inc.Source))
			}
			if inc.Task.TaskID != "T-1" {
				t.Errorf("task id %q, want T-1 (the failure must still name the task)", inc.Task.TaskID)
			}
		})
	}
}
