package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// checkDecodeError is the fuzz invariant for failures: a typed decode
// error with a decode-stage code, a reason and a bounded message.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	var de *events.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
	}
	if de.Code != resolve.CodeEventInvalid && de.Code != resolve.CodeTaskInvalid {
		t.Fatalf("code %q is not a decode-stage code", de.Code)
	}
	if de.Reason() == "" || de.Message == "" {
		t.Fatalf("error %+v lacks a reason or message", de)
	}
	if len(de.Subject) > 1024 || len(de.Message) > 4096 {
		t.Fatalf("unbounded error: subject %d bytes, message %d bytes", len(de.Subject), len(de.Message))
	}
}

// checkAccepted is the fuzz invariant for successes: the event is a valid
// task event, and re-encoding it (either mode) decodes to the same task.
func checkAccepted(t *testing.T, inc events.Incoming) {
	t.Helper()
	if inc.Task.TaskID == "" || inc.Task.Role == "" || inc.Ref == nil || inc.ID == "" || inc.Source == "" {
		t.Fatalf("accepted an incomplete task: %+v", inc)
	}
	if inc.Event.Type() != events.TypeTaskAssigned {
		t.Fatalf("accepted type %q", inc.Event.Type())
	}
	if err := inc.Event.Validate(); err != nil {
		t.Fatalf("accepted an event sdk-go rejects: %v", err)
	}
	if events.ValidateSource(inc.Source) != nil || strings.TrimSpace(inc.ID) != inc.ID {
		return // readable, but EncodeTask refuses what sdk-go would rewrite
	}
	for _, binary := range []bool{false, true} {
		h, body, err := events.EncodeTask(inc.Source, inc.ID, inc.Event.Data(), "", "", binary)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := events.DecodeTask(h, body, events.DecodeOptions{})
		if err != nil {
			t.Fatalf("re-encoded event rejected: %v", err)
		}
		if diff := cmp.Diff(inc.Task, again.Task); diff != "" {
			t.Fatalf("re-encoded task differs (-first +again):\n%s", diff)
		}
		if again.ID != inc.ID || again.Source != inc.Source {
			t.Fatalf("re-encoded id/source %q %q, want %q %q", again.ID, again.Source, inc.ID, inc.Source)
		}
	}
}

func FuzzDecodeTaskStructured(f *testing.F) {
	for _, data := range []string{minimalTask, fullTask, `[]`, `{"task_id":"T","role":"a","x":1}`} {
		_, body, _ := events.EncodeTask(testSource, testID, []byte(data), testTP, "", false)
		f.Add(body)
	}
	f.Add(structuredBody(map[string]*string{"data": nil, "data_base64": raw(`"e30="`)}))
	f.Add(structuredBody(map[string]*string{"time": raw(`"2026-01-01T00:00:00Z"`), "n": raw(`1`), "b": raw(`true`)}))
	f.Add([]byte(`{"specversion":"1.0","id":"a","id":"b"}`))
	f.Add([]byte(`not json`))
	// Problems of every kind in one body, where the first in the message
	// must be the one reported.
	f.Add([]byte("{\"Bad\":1,\"b\xff\":2,\"x\":{},\"x\":1,\"id\":7,\"data_base64\":\"e30=\",\"data\":{},\"traceparent\":1,\"tracestate\":\"a\\u0001\"}"))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, h := range []nats.Header{structuredHeader(), nil} {
			inc, err := events.DecodeTask(h, body, events.DecodeOptions{})
			if err != nil {
				checkDecodeError(t, err)
				continue
			}
			checkAccepted(t, inc)
		}
	})
}

// parseHeaderBlob turns "name: value" lines into a header (repeated names
// append), so the fuzzer controls names, case, repetition and values.
func parseHeaderBlob(blob string) nats.Header {
	h := nats.Header{}
	for line := range strings.SplitSeq(blob, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		h[k] = append(h[k], strings.TrimSpace(v))
	}
	return h
}

func FuzzDecodeTaskBinary(f *testing.F) {
	base := "ce-specversion: 1.0\nce-id: " + testID + "\nce-source: " + testSource + "\nce-type: " + events.TypeTaskAssigned + "\n"
	f.Add(base+"ce-datacontenttype: application/json", []byte(minimalTask))
	f.Add(base+"content-type: application/json; charset=utf-8\ntraceparent: "+testTP, []byte(fullTask))
	f.Add(base+"Content-Type: text/plain", []byte(minimalTask))
	f.Add(base+"ce-id: %E2%82%AC\nCe-Id: x", []byte(minimalTask))
	f.Add(base+`ce-subject: "quoted \" value"`, []byte(`{"task_id":"T","role":"a","modes":[]}`))
	f.Add("content-type: application/cloudevents+json", []byte(`{"specversion":"1.0"}`))
	// Header names that fold onto ASCII ones only under Unicode case rules
	// (Kelvin sign, dotted capital I), and one attribute in two spellings.
	f.Add("ce-specversion: 1.0\nce-id: e\nce-source: urn:s\nce-type: "+events.TypeTaskAssigned+"\nce-tas\u212Aid: T", []byte(minimalTask))
	f.Add("ce-spec\u0130ersion: 1.0\nce-id: e\nce-source: urn:s\nce-type: "+events.TypeTaskAssigned, []byte(minimalTask))
	f.Add(base+"Ce-Source: urn:other\ntraceparent: "+testTP+"\nTRACEPARENT: x", []byte(minimalTask))
	f.Fuzz(func(t *testing.T, blob string, body []byte) {
		inc, err := events.DecodeTask(parseHeaderBlob(blob), body, events.DecodeOptions{})
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		checkAccepted(t, inc)
	})
}

func FuzzDecodeTaskData(f *testing.F) {
	for _, tc := range taskInvalidCases {
		f.Add([]byte(tc.data))
	}
	for _, data := range validTasks {
		f.Add([]byte(data))
	}
	f.Add([]byte(`{"task_id":"T","role":"a","modes":[],"overrides":{"tools":[],"permissions":{"mode":"rules","allow":{"B":null}}}}`))
	f.Add([]byte(`{"task_id":"T","role":"a","skills":["go-*","[a-c]?x"],"overrides":{"model":"tier:cheap"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		task, ref, err := events.DecodeTaskData(data, events.DecodeOptions{})
		if err != nil {
			checkDecodeError(t, err)
			if ref != nil {
				t.Fatal("ref on error")
			}
			return
		}
		if ref == nil || ref.Token() != task.Role {
			t.Fatalf("ref %v for role %q", ref, task.Role)
		}
		for _, p := range task.Skills {
			if err := resolve.ValidateSkillPattern("skills", p); err != nil {
				t.Fatalf("accepted skill pattern %q: %v", p, err)
			}
		}
		// A decoded task re-encodes (nil as null or omitted) to data that
		// decodes to the same task: absent and empty survive.
		again, err := json.Marshal(task, json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))
		if err != nil {
			t.Fatal(err)
		}
		task2, _, err := events.DecodeTaskData(again, events.DecodeOptions{})
		if err != nil {
			t.Fatalf("re-encoded task rejected: %v\n%s", err, again)
		}
		if diff := cmp.Diff(task, task2); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s\n%s", diff, again)
		}
	})
}
