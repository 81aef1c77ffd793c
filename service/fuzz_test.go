package service_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
	"github.com/rolecall/rolecall/service"
)

// FuzzDecodeRequest: no request body makes a decoder panic; every refusal
// is typed (request_invalid with a reason, or the worker's decode codes
// for a task), and a task request that decodes names a task id and role.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"pack":"research"}`, `{"pack":null}`, `{"pack":7}`, `{"pak":"x"}`, `{"pack":"a","pack":"b"}`,
		`[]`, `"x"`, `{`, `{"pack":"../x"}`, "{\"pack\":\"\xff\"}",
		`{"task_id":"T-1","role":"architect"}`, `{"task_id":"T-1","role":"external:x","overrides":{"model":"m"}}`,
		`{"specversion":"1.0","id":"e","source":"s","type":"dev.rolecall.task.assigned.v1","data":{"task_id":"T","role":"a"}}`,
		`{"specversion":"1.0"}`, `{"a":{"specversion":1}}`,
		`{"outcome_id":"rc-1"}`, `{"source":"s","id":"e"}`, `{"source":"s"}`, `{"outcome_id":"x","id":"y"}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, binary bool) {
		for _, decode := range []func([]byte) error{
			func(b []byte) error { _, err := service.DecodeRoster(b); return err },
			service.DecodeEmpty,
			func(b []byte) error { _, err := service.DecodeRecorded(b); return err },
		} {
			if err := decode(body); err != nil {
				var se *service.Error
				if !errors.As(err, &se) || se.Code != service.CodeRequestInvalid || se.Details["reason"] == "" || se.Status != 400 {
					t.Fatalf("untyped or incomplete refusal %#v of %q", err, body)
				}
			}
		}
		var h nats.Header
		if binary {
			h = nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"e"}, "ce-source": {"s"}, "ce-type": {events.TypeTaskAssigned}}
		}
		tr := service.DecodeTaskRequest(h, body, events.DecodeOptions{})
		if tr.OutcomeID == "" {
			t.Fatalf("no outcome id for %q", body)
		}
		if tr.Err != nil {
			var de *events.DecodeError
			if !errors.As(tr.Err, &de) || (de.Code != resolve.CodeTaskInvalid && de.Code != resolve.CodeEventInvalid) {
				t.Fatalf("refusal %#v of %q is not a decode error", tr.Err, body)
			}
			return
		}
		if tr.Incoming.Task.TaskID == "" || tr.Incoming.Task.Role == "" || tr.Incoming.Ref == nil {
			t.Fatalf("decoded %q without task id, role or ref: %+v", body, tr.Incoming.Task)
		}
	})
}
