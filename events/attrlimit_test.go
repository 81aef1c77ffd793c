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

// An extension name is bounded only by the message: when its value is
// refused, the name is echoed as printable does (quoted, 128 bytes), like
// every other echoed value. It was echoed whole three times (subject,
// details, message), so a name of a few hundred KB made a failure outcome
// too large to publish, and the task ended delivery_exhausted.
func TestLongExtensionNameIsBounded(t *testing.T) {
	name := strings.Repeat("a", 5000)
	want := `"` + strings.Repeat("a", 128) + `…"`
	structured := func(member string) (nats.Header, []byte) {
		return nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}}, []byte(`{"specversion":"1.0","id":"x","source":"s","type":"` +
			events.TypeTaskAssigned + `","data":{"task_id":"T-1","role":"architect"},"` + name + `":` + member + `}`)
	}
	binary := func(value string) (nats.Header, []byte) {
		return nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-source": {"s"}, "ce-type": {events.TypeTaskAssigned},
			"ce-" + name: {value}}, []byte(`{"task_id":"T-1","role":"architect"}`)
	}
	for _, tc := range []struct {
		name   string
		msg    func() (nats.Header, []byte)
		reason string
	}{
		{"structured control character", func() (nats.Header, []byte) { return structured(`"\n"`) }, events.ReasonInvalidValue},
		{"structured too large", func() (nats.Header, []byte) { return structured(`"` + strings.Repeat("x", 2000) + `"`) }, events.ReasonTooLarge},
		{"structured wrong type", func() (nats.Header, []byte) { return structured(`1.5`) }, events.ReasonWrongType},
		{"structured invalid UTF-8", func() (nats.Header, []byte) { return structured(`"\ud800"`) }, events.ReasonInvalidValue},
		{"binary control character", func() (nats.Header, []byte) { return binary("%0A") }, events.ReasonInvalidValue},
		{"binary too large", func() (nats.Header, []byte) { return binary(strings.Repeat("x", 2000)) }, events.ReasonTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, body := tc.msg()
			_, err := events.DecodeTask(h, body, events.DecodeOptions{})
			var de *events.DecodeError
			if !errors.As(err, &de) || de.Code != resolve.CodeEventInvalid || de.Reason() != tc.reason {
				t.Fatalf("err = %v, want event_invalid/%s", err, tc.reason)
			}
			if de.Subject != want || de.Details["attribute"] != want || len(de.Message) > 300 {
				t.Errorf("subject %d bytes, message %d bytes (%.60s…); want the name echoed as %.20s…", len(de.Subject), len(de.Message), de.Message, want)
			}
		})
	}
}
