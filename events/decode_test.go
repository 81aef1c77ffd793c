package events_test

import (
	"encoding/base64"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/hostile"
	"github.com/rolecall/rolecall/resolve"
)

// structuredBody is a valid structured task event with members replaced
// or removed: a nil value in set removes the member, any other value is
// its raw JSON.
func structuredBody(set map[string]*string) []byte {
	members := []struct{ name, raw string }{
		{"specversion", `"1.0"`},
		{"id", `"` + testID + `"`},
		{"source", `"` + testSource + `"`},
		{"type", `"` + events.TypeTaskAssigned + `"`},
		{"datacontenttype", `"application/json"`},
		{"data", minimalTask},
	}
	var b strings.Builder
	b.WriteString("{")
	first := true
	add := func(name, raw string) {
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(`"` + name + `":` + raw)
	}
	for _, m := range members {
		if v, ok := set[m.name]; ok {
			if v != nil {
				add(m.name, *v)
			}
			continue
		}
		add(m.name, m.raw)
	}
	for name, v := range set {
		known := false
		for _, m := range members {
			known = known || m.name == name
		}
		if !known && v != nil {
			add(name, *v)
		}
	}
	b.WriteString("}")
	return []byte(b.String())
}

func structuredHeader() nats.Header {
	return nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}}
}

func binaryHeader(set map[string]*string) nats.Header {
	h := nats.Header{
		"ce-specversion":     {"1.0"},
		"ce-id":              {testID},
		"ce-source":          {testSource},
		"ce-type":            {events.TypeTaskAssigned},
		"ce-datacontenttype": {"application/json"},
	}
	for k, v := range set {
		if v == nil {
			delete(h, k)
		} else {
			h[k] = []string{*v}
		}
	}
	return h
}

func raw(s string) *string { return &s }

func TestDecodeTaskValidBothModes(t *testing.T) {
	want, wantRef, err := events.DecodeTaskData([]byte(fullTask), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			h, body := encode(t, fullTask, m.binary)
			inc, err := events.DecodeTask(h, body, events.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, inc.Task); diff != "" {
				t.Errorf("task (-want +got):\n%s", diff)
			}
			if inc.Ref != wantRef || inc.ID != testID || inc.Source != testSource {
				t.Errorf("ref, id, source = %v, %q, %q", inc.Ref, inc.ID, inc.Source)
			}
			e := inc.Event
			if e.Type() != events.TypeTaskAssigned || e.ID() != testID || e.Source() != testSource ||
				e.SpecVersion() != "1.0" || e.DataContentType() != events.ContentTypeJSON {
				t.Errorf("event attributes = %s", e.String())
			}
			if err := e.Validate(); err != nil {
				t.Errorf("event does not validate: %v", err)
			}
		})
	}
}

// Header names are case-insensitive (NATS ADR-4); content-type may stand
// in for ce-datacontenttype; values are percent-decoded and may be quoted.
func TestDecodeTaskBinaryHeaderForms(t *testing.T) {
	cases := []struct {
		name           string
		header         nats.Header
		wantID, wantCT string
	}{
		{"mixed-case names", nats.Header{
			"Ce-Specversion": {"1.0"}, "CE-ID": {"e1"}, "ce-Source": {"urn:s"}, "Ce-Type": {events.TypeTaskAssigned},
		}, "e1", ""},
		{"content-type instead of ce-datacontenttype", nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {"e1"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned},
			"Content-Type": {"application/json; charset=utf-8"},
		}, "e1", "application/json; charset=utf-8"},
		{"both, same media type spelled differently", nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {"e1"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned},
			"content-type": {"Application/JSON"}, "ce-datacontenttype": {"application/json"},
		}, "e1", "application/json"},
		// JSON is UTF-8 (RFC 8259): the parameter contradicts nothing.
		{"both, one with charset=utf-8", nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {"e1"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned},
			"content-type": {"application/json; charset=utf-8"}, "ce-datacontenttype": {"application/json"},
		}, "e1", "application/json"},
		{"both, the other with charset=UTF-8", nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {"e1"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned},
			"content-type": {"application/json"}, "ce-datacontenttype": {"application/json;charset=UTF-8"},
		}, "e1", "application/json;charset=UTF-8"},
		{"percent-encoded", nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {"evt%20%E2%82%AC%f0%9f%98%80"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned},
		}, "evt €😀", ""},
		{"quoted", nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {`"evt \"1\""`}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned},
		}, `evt "1"`, ""},
		{"raw UTF-8", nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {"évènement"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned},
		}, "évènement", ""},
		// id is any non-empty string without control characters: format
		// and separator characters stay (docs/DECISIONS.md).
		{"format characters in id", nats.Header{
			"ce-specversion": {"1.0"}, "ce-id": {"a%E2%80%AEb%E2%80%A8c"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned},
		}, "a\u202eb\u2028c", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inc, err := events.DecodeTask(tc.header, []byte(minimalTask), events.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if inc.ID != tc.wantID || inc.Event.DataContentType() != tc.wantCT {
				t.Errorf("id %q, datacontenttype %q; want %q, %q", inc.ID, inc.Event.DataContentType(), tc.wantID, tc.wantCT)
			}
		})
	}
}

func TestDecodeTaskStructuredForms(t *testing.T) {
	cases := []struct {
		name   string
		header nats.Header
		body   []byte
	}{
		{"no headers (NATS binding 1.0.2, sdk-go structured writer)", nil, structuredBody(nil)},
		{"content-type with charset", nats.Header{"Content-Type": {"application/cloudevents+json; charset=UTF-8"}}, structuredBody(nil)},
		{"datacontenttype absent", structuredHeader(), structuredBody(map[string]*string{"datacontenttype": nil})},
		{"datacontenttype null", structuredHeader(), structuredBody(map[string]*string{"datacontenttype": raw("null")})},
		{"datacontenttype with charset", structuredHeader(), structuredBody(map[string]*string{"datacontenttype": raw(`"application/json; charset=utf-8"`)})},
		{"data_base64", structuredHeader(), structuredBody(map[string]*string{
			"data": nil, "data_base64": raw(`"` + base64.StdEncoding.EncodeToString([]byte(minimalTask)) + `"`)})},
		{"optional attributes and extensions", structuredHeader(), structuredBody(map[string]*string{
			"time": raw(`"2026-07-09T10:00:00.5Z"`), "subject": raw(`"T-1"`), "dataschema": raw(`"https://rolecall.dev/schema/task.v1.json"`),
			"priority": raw(`3`), "urgent": raw(`true`), "comment": raw(`"x"`), "nothing": raw(`null`)})},
		{"ce- headers ignored in structured mode", nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}, "ce-type": {"other"}}, structuredBody(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inc, err := events.DecodeTask(tc.header, tc.body, events.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if inc.Task.TaskID != "T-1" || inc.ID != testID || inc.Source != testSource {
				t.Errorf("task %q id %q source %q", inc.Task.TaskID, inc.ID, inc.Source)
			}
		})
	}

	inc, err := events.DecodeTask(structuredHeader(), structuredBody(map[string]*string{
		"time": raw(`"2026-07-09T10:00:00.5Z"`), "priority": raw(`3`), "urgent": raw(`true`)}), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := inc.Event.Time(); !got.Equal(time.Date(2026, 7, 9, 10, 0, 0, 5e8, time.UTC)) {
		t.Errorf("time = %v", got)
	}
	ext := inc.Event.Extensions()
	if ext["priority"] != int32(3) || ext["urgent"] != true {
		t.Errorf("extensions = %#v", ext)
	}
}

func TestDecodeTaskEventInvalid(t *testing.T) {
	sh := structuredHeader()
	cases := []struct {
		name            string
		header          nats.Header
		body            []byte
		subject, reason string
	}{
		// Not a CloudEvent at all.
		{"structured: not JSON", sh, []byte(`hello`), "", events.ReasonNotJSON},
		{"structured: empty body", sh, nil, "", events.ReasonNotJSON},
		{"structured: array", sh, []byte(`[]`), "", events.ReasonNotJSON},
		{"structured: truncated", sh, []byte(`{"specversion":"1.0"`), "", events.ReasonNotJSON},
		{"structured: data after object", sh, append(structuredBody(nil), " {}"...), "", events.ReasonNotJSON},
		{"structured: data not JSON", sh, []byte(`{"specversion":"1.0","data":{"a":tru}}`), "", events.ReasonNotJSON},
		{"batch format", nats.Header{"content-type": {"application/cloudevents-batch+json"}}, []byte(`[]`), "content-type", events.ReasonNotCloudEvent},
		{"other event format", nats.Header{"Content-Type": {"application/cloudevents+avro"}}, structuredBody(nil), "content-type", events.ReasonNotCloudEvent},
		{"plain JSON with content-type", nats.Header{"content-type": {"application/json"}}, []byte(minimalTask), "specversion", events.ReasonNotCloudEvent},
		{"two content-types", nats.Header{"content-type": {events.ContentTypeCloudEventsJSON, "application/json"}}, structuredBody(nil), "content-type", events.ReasonDuplicateAttribute},

		// Required attributes (structured).
		{"structured: specversion missing", sh, structuredBody(map[string]*string{"specversion": nil}), "specversion", events.ReasonMissing},
		{"structured: specversion 0.3", sh, structuredBody(map[string]*string{"specversion": raw(`"0.3"`)}), "specversion", events.ReasonUnsupportedSpecVersion},
		{"structured: specversion number", sh, structuredBody(map[string]*string{"specversion": raw(`1.0`)}), "specversion", events.ReasonWrongType},
		{"structured: id missing", sh, structuredBody(map[string]*string{"id": nil}), "id", events.ReasonMissing},
		{"structured: id null", sh, structuredBody(map[string]*string{"id": raw(`null`)}), "id", events.ReasonMissing},
		{"structured: id empty", sh, structuredBody(map[string]*string{"id": raw(`""`)}), "id", events.ReasonInvalidValue},
		{"structured: id number", sh, structuredBody(map[string]*string{"id": raw(`7`)}), "id", events.ReasonWrongType},
		{"structured: id control character", sh, structuredBody(map[string]*string{"id": raw(`"a\u0001"`)}), "id", events.ReasonInvalidValue},
		{"structured: id invalid UTF-8", sh, structuredBody(map[string]*string{"id": raw("\"a\xff\"")}), "id", events.ReasonInvalidValue},
		{"structured: source missing", sh, structuredBody(map[string]*string{"source": nil}), "source", events.ReasonMissing},
		{"structured: source empty", sh, structuredBody(map[string]*string{"source": raw(`""`)}), "source", events.ReasonInvalidValue},
		{"structured: source not a URI-reference", sh, structuredBody(map[string]*string{"source": raw(`"http://[::1"`)}), "source", events.ReasonInvalidValue},
		// A URI-reference holds RFC 3986 characters only (docs/EVENTS.md).
		{"structured: source with a space", sh, structuredBody(map[string]*string{"source": raw(`"urn:my source"`)}), "source", events.ReasonInvalidValue},
		{"structured: source with U+202E", sh, structuredBody(map[string]*string{"source": raw(`"urn:a\u202Eb"`)}), "source", events.ReasonInvalidValue},
		{"structured: source with U+2028", sh, structuredBody(map[string]*string{"source": raw(`"urn:a\u2028b"`)}), "source", events.ReasonInvalidValue},
		{"structured: source non-ASCII", sh, structuredBody(map[string]*string{"source": raw(`"https://example.com/é"`)}), "source", events.ReasonInvalidValue},
		{"structured: source bad percent-encoding", sh, structuredBody(map[string]*string{"source": raw(`"urn:a%2"`)}), "source", events.ReasonInvalidValue},
		{"structured: type missing", sh, structuredBody(map[string]*string{"type": nil}), "type", events.ReasonMissing},
		{"structured: wrong type", sh, structuredBody(map[string]*string{"type": raw(`"` + events.TypeSpecResolved + `"`)}), "type", events.ReasonUnexpectedEventType},
		{"structured: type array", sh, structuredBody(map[string]*string{"type": raw(`["x"]`)}), "type", events.ReasonWrongType},

		// Optional attributes (structured).
		{"structured: datacontenttype text", sh, structuredBody(map[string]*string{"datacontenttype": raw(`"text/plain"`)}), "datacontenttype", events.ReasonUnsupportedContentType},
		{"structured: datacontenttype latin1", sh, structuredBody(map[string]*string{"datacontenttype": raw(`"application/json; charset=latin1"`)}), "datacontenttype", events.ReasonUnsupportedContentType},
		{"structured: datacontenttype +json", sh, structuredBody(map[string]*string{"datacontenttype": raw(`"application/vnd.x+json"`)}), "datacontenttype", events.ReasonUnsupportedContentType},
		{"structured: dataschema relative", sh, structuredBody(map[string]*string{"dataschema": raw(`"schema/task.json"`)}), "dataschema", events.ReasonInvalidValue},
		{"structured: dataschema non-ASCII", sh, structuredBody(map[string]*string{"dataschema": raw(`"https://rolecall.dev/schéma/task.json"`)}), "dataschema", events.ReasonInvalidValue},
		{"structured: dataschema C1 control", sh, structuredBody(map[string]*string{"dataschema": raw(`"https://rolecall.dev/a\u0085"`)}), "dataschema", events.ReasonInvalidValue},
		{"structured: dataschema with a space", sh, structuredBody(map[string]*string{"dataschema": raw(`"https://rolecall.dev/a b"`)}), "dataschema", events.ReasonInvalidValue},
		{"structured: subject empty", sh, structuredBody(map[string]*string{"subject": raw(`""`)}), "subject", events.ReasonInvalidValue},
		{"structured: time not RFC 3339", sh, structuredBody(map[string]*string{"time": raw(`"yesterday"`)}), "time", events.ReasonInvalidValue},
		// time.Parse takes these; RFC 3339 does not.
		{"structured: time one-digit hour", sh, structuredBody(map[string]*string{"time": raw(`"2026-07-09T1:00:00Z"`)}), "time", events.ReasonInvalidValue},
		{"structured: time comma before fraction", sh, structuredBody(map[string]*string{"time": raw(`"2026-07-09T10:00:00,5Z"`)}), "time", events.ReasonInvalidValue},
		{"structured: time offset 24 hours", sh, structuredBody(map[string]*string{"time": raw(`"2026-07-09T10:00:00+24:00"`)}), "time", events.ReasonInvalidValue},
		{"structured: time offset 60 minutes", sh, structuredBody(map[string]*string{"time": raw(`"2026-07-09T10:00:00-05:60"`)}), "time", events.ReasonInvalidValue},

		// Members (structured).
		{"structured: duplicate id", sh, []byte(`{"specversion":"1.0","id":"a","id":"b","source":"s","type":"` + events.TypeTaskAssigned + `","data":{}}`), "id", events.ReasonDuplicateAttribute},
		{"structured: duplicate extension", sh, structuredBody(map[string]*string{"data": raw(minimalTask + `,"x":1,"x":2`)}), "x", events.ReasonDuplicateAttribute},
		{"structured: uppercase member", sh, structuredBody(map[string]*string{"taskId": raw(`"T"`)}), "taskId", events.ReasonInvalidAttributeName},
		{"structured: member with underscore", sh, structuredBody(map[string]*string{"task_id": raw(`"T"`)}), "task_id", events.ReasonInvalidAttributeName},
		{"structured: extension object", sh, structuredBody(map[string]*string{"meta": raw(`{}`)}), "meta", events.ReasonWrongType},
		{"structured: extension fraction", sh, structuredBody(map[string]*string{"priority": raw(`1.5`)}), "priority", events.ReasonWrongType},
		{"structured: extension beyond int32", sh, structuredBody(map[string]*string{"priority": raw(`4294967296`)}), "priority", events.ReasonWrongType},
		{"structured: extension control character", sh, structuredBody(map[string]*string{"note": raw(`"a\nb"`)}), "note", events.ReasonInvalidValue},
		{"structured: data and data_base64", sh, structuredBody(map[string]*string{"data_base64": raw(`"e30="`)}), "data_base64", events.ReasonDuplicateAttribute},
		{"structured: data_base64 not base64", sh, structuredBody(map[string]*string{"data": nil, "data_base64": raw(`"***"`)}), "data_base64", events.ReasonInvalidValue},
		{"structured: data_base64 number", sh, structuredBody(map[string]*string{"data": nil, "data_base64": raw(`1`)}), "data_base64", events.ReasonWrongType},

		// Binary mode.
		{"binary: specversion 0.3", binaryHeader(map[string]*string{"ce-specversion": raw("0.3")}), []byte(minimalTask), "specversion", events.ReasonUnsupportedSpecVersion},
		{"binary: id missing", binaryHeader(map[string]*string{"ce-id": nil}), []byte(minimalTask), "id", events.ReasonMissing},
		{"binary: id empty", binaryHeader(map[string]*string{"ce-id": raw("")}), []byte(minimalTask), "id", events.ReasonInvalidValue},
		{"binary: source missing", binaryHeader(map[string]*string{"ce-source": nil}), []byte(minimalTask), "source", events.ReasonMissing},
		{"binary: percent-encoded space in source", binaryHeader(map[string]*string{"ce-source": raw("urn:a%20b")}), []byte(minimalTask), "source", events.ReasonInvalidValue},
		{"binary: percent-encoded U+202E in source", binaryHeader(map[string]*string{"ce-source": raw("urn:a%E2%80%AEb")}), []byte(minimalTask), "source", events.ReasonInvalidValue},
		{"binary: type missing", binaryHeader(map[string]*string{"ce-type": nil}), []byte(minimalTask), "type", events.ReasonMissing},
		{"binary: wrong type", binaryHeader(map[string]*string{"ce-type": raw(events.TypeSpecFailed)}), []byte(minimalTask), "type", events.ReasonUnexpectedEventType},
		{"binary: datacontenttype xml", binaryHeader(map[string]*string{"ce-datacontenttype": raw("application/xml")}), []byte(minimalTask), "datacontenttype", events.ReasonUnsupportedContentType},
		{"binary: content-type text, no ce-datacontenttype", binaryHeader(map[string]*string{"ce-datacontenttype": nil, "content-type": raw("text/plain")}), []byte(minimalTask), "datacontenttype", events.ReasonUnsupportedContentType},
		{"binary: content-type contradicts ce-datacontenttype", binaryHeader(map[string]*string{"content-type": raw("text/plain")}), []byte(minimalTask), "content-type", events.ReasonConflict},
		{"binary: content-type charset contradicts ce-datacontenttype", binaryHeader(map[string]*string{"content-type": raw("application/json; charset=latin1")}), []byte(minimalTask), "content-type", events.ReasonConflict},
		{"binary: time invalid", binaryHeader(map[string]*string{"ce-time": raw("2026-13-01T00:00:00Z")}), []byte(minimalTask), "time", events.ReasonInvalidValue},
		{"binary: dataschema relative", binaryHeader(map[string]*string{"ce-dataschema": raw("task.json")}), []byte(minimalTask), "dataschema", events.ReasonInvalidValue},
		{"binary: dataschema C1 control", binaryHeader(map[string]*string{"ce-dataschema": raw("https://x/a%C2%85")}), []byte(minimalTask), "dataschema", events.ReasonInvalidValue},
		{"binary: bad percent-encoding", binaryHeader(map[string]*string{"ce-id": raw("a%zz")}), []byte(minimalTask), "ce-id", events.ReasonInvalidValue},
		{"binary: truncated percent-encoding", binaryHeader(map[string]*string{"ce-id": raw("a%4")}), []byte(minimalTask), "ce-id", events.ReasonInvalidValue},
		{"binary: overlong UTF-8", binaryHeader(map[string]*string{"ce-id": raw("a%C0%A0")}), []byte(minimalTask), "ce-id", events.ReasonInvalidValue},
		{"binary: raw invalid UTF-8", binaryHeader(map[string]*string{"ce-id": raw("a\xff")}), []byte(minimalTask), "ce-id", events.ReasonInvalidValue},
		{"binary: unterminated quote", binaryHeader(map[string]*string{"ce-id": raw(`"abc`)}), []byte(minimalTask), "ce-id", events.ReasonInvalidValue},
		{"binary: text after quote", binaryHeader(map[string]*string{"ce-id": raw(`"abc"d`)}), []byte(minimalTask), "ce-id", events.ReasonInvalidValue},
		{"binary: percent-encoded control character", binaryHeader(map[string]*string{"ce-id": raw("a%0Ab")}), []byte(minimalTask), "id", events.ReasonInvalidValue},
		{"binary: invalid attribute name", binaryHeader(map[string]*string{"ce-task_id": raw("T")}), []byte(minimalTask), "ce-task_id", events.ReasonInvalidAttributeName},
		{"binary: ce-data", binaryHeader(map[string]*string{"ce-data": raw("{}")}), []byte(minimalTask), "ce-data", events.ReasonInvalidAttributeName},
		{"binary: repeated header", func() nats.Header {
			h := binaryHeader(nil)
			h["ce-id"] = []string{"a", "b"}
			return h
		}(), []byte(minimalTask), "ce-id", events.ReasonDuplicateAttribute},
		{"binary: one attribute in two spellings", binaryHeader(map[string]*string{"Ce-Id": raw("other")}), []byte(minimalTask), "ce-id", events.ReasonDuplicateAttribute},
		{"binary: ce- headers without specversion", binaryHeader(map[string]*string{"ce-specversion": nil}), []byte(minimalTask), "specversion", events.ReasonNotCloudEvent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inc, err := events.DecodeTask(tc.header, tc.body, events.DecodeOptions{})
			wantDecodeError(t, err, resolve.CodeEventInvalid, tc.subject, tc.reason)
			if !errors.Is(err, &events.DecodeError{Code: resolve.CodeEventInvalid}) {
				t.Error("errors.Is(err, event_invalid) = false")
			}
			if inc.Ref != nil {
				t.Errorf("Ref = %v on error", inc.Ref)
			}
		})
	}
}

// The task_invalid table of task_test.go, carried in both content modes:
// the data is judged the same way whatever carries it.
func TestDecodeTaskTaskInvalidBothModes(t *testing.T) {
	for _, tc := range taskInvalidCases {
		for _, m := range modes {
			t.Run(m.name+"/"+tc.name, func(t *testing.T) {
				var (
					h    nats.Header
					body []byte
				)
				if m.binary {
					h, body = binaryHeader(nil), []byte(tc.data)
				} else {
					var err error
					h, body, err = events.EncodeTask(testSource, testID, []byte(tc.data), "", "", false)
					if err != nil {
						// Not JSON: a structured body cannot carry it
						// (that is the event_invalid not_json case).
						inc, err := events.DecodeTask(structuredHeader(), structuredBody(map[string]*string{"data": raw(tc.data)}), events.DecodeOptions{})
						wantDecodeError(t, err, resolve.CodeEventInvalid, "", events.ReasonNotJSON)
						_ = inc
						return
					}
				}
				inc, err := events.DecodeTask(h, body, events.DecodeOptions{})
				wantDecodeError(t, err, resolve.CodeTaskInvalid, tc.subject, tc.reason)
				if inc.ID != testID || inc.Source != testSource {
					t.Errorf("id %q source %q on task_invalid, want them filled", inc.ID, inc.Source)
				}
			})
		}
	}
}

func TestDecodeTaskDataLimitBothModes(t *testing.T) {
	data := `{"task_id":"T-9","role":"a","overrides":{"extra_prompt":"` + strings.Repeat("x", 200) + `"}}`
	for _, m := range modes {
		h, body := encode(t, data, m.binary)
		inc, err := events.DecodeTask(h, body, events.DecodeOptions{MaxDataBytes: 100})
		wantDecodeError(t, err, resolve.CodeTaskInvalid, "", events.ReasonTooLarge)
		if inc.Task.TaskID != "T-9" {
			t.Errorf("%s: TaskID = %q", m.name, inc.Task.TaskID)
		}
		if _, err := events.DecodeTask(h, body, events.DecodeOptions{MaxDataBytes: len(data)}); err != nil {
			t.Errorf("%s: at the limit: %v", m.name, err)
		}
	}
}

func TestDecodeTaskMissingData(t *testing.T) {
	_, err := events.DecodeTask(structuredHeader(), structuredBody(map[string]*string{"data": nil}), events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeTaskInvalid, "", events.ReasonMissing)
	_, err = events.DecodeTask(binaryHeader(nil), nil, events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeTaskInvalid, "", events.ReasonMissing)
}

func TestDecodeTaskDeepDataStructured(t *testing.T) {
	data := `{"task_id":"T","role":"a","modes":` + strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001) + `}`
	for _, m := range modes {
		// Built by hand: EncodeTask refuses data its own JSON checker rejects.
		h, body := structuredHeader(), structuredBody(map[string]*string{"data": raw(data)})
		if m.binary {
			h, body = binaryHeader(nil), []byte(data)
		}
		_, err := events.DecodeTask(h, body, events.DecodeOptions{MaxDataBytes: 1 << 20})
		var de *events.DecodeError
		if !errors.As(err, &de) || de.Code != resolve.CodeTaskInvalid || de.Subject != "modes[0]" {
			t.Errorf("%s: err = %v (subject %q), want task_invalid at modes[0]", m.name, err, de.Subject)
		}
	}
}

// A failure outcome needs the input's id, source, task id and trace
// context even when the envelope is rejected.
func TestDecodeTaskFillsWhatIsReadable(t *testing.T) {
	body := structuredBody(map[string]*string{
		"type":        raw(`"com.example.other"`),
		"traceparent": raw(`"` + testTP + `"`),
		"data":        raw(`{"task_id":"T-5","role":"architect"}`),
	})
	inc, err := events.DecodeTask(structuredHeader(), body, events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeEventInvalid, "type", events.ReasonUnexpectedEventType)
	if inc.ID != testID || inc.Source != testSource || inc.Task.TaskID != "T-5" || inc.TraceParent != testTP {
		t.Errorf("incoming = id %q source %q task %q traceparent %q", inc.ID, inc.Source, inc.Task.TaskID, inc.TraceParent)
	}
	if inc.Event.Type() != "com.example.other" {
		t.Errorf("event type = %q, want the one read", inc.Event.Type())
	}

	// A bad attribute before id and source does not hide them.
	body = []byte(`{"specversion":"1.0","type":7,"id":"e-2","source":"urn:s","data":{}}`)
	inc, err = events.DecodeTask(structuredHeader(), body, events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeEventInvalid, "type", events.ReasonWrongType)
	if inc.ID != "e-2" || inc.Source != "urn:s" {
		t.Errorf("id %q source %q", inc.ID, inc.Source)
	}

	// An unusable id is reported as unknown.
	inc, _ = events.DecodeTask(binaryHeader(map[string]*string{"ce-id": raw("")}), []byte(minimalTask), events.DecodeOptions{})
	if inc.ID != "" || inc.Source != testSource {
		t.Errorf("id %q source %q, want \"\" and the source", inc.ID, inc.Source)
	}

	// Nothing readable at all.
	inc, _ = events.DecodeTask(nil, []byte("garbage"), events.DecodeOptions{})
	if inc.ID != "" || inc.Source != "" || inc.Task.TaskID != "" || inc.Event.Type() != "" {
		t.Errorf("incoming = %+v, want empty", inc)
	}
}

func TestDecodeTaskTraceContext(t *testing.T) {
	const otherTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	cases := []struct {
		name           string
		header         nats.Header
		body           []byte
		wantTP, wantTS string
	}{
		{"none", structuredHeader(), structuredBody(nil), "", ""},
		{"headers", nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}, "traceparent": {testTP}, "tracestate": {testTS}},
			structuredBody(nil), testTP, testTS},
		{"header names in any case", nats.Header{"Traceparent": {testTP}, "TraceState": {testTS}, "content-type": {events.ContentTypeCloudEventsJSON}},
			structuredBody(nil), testTP, testTS},
		{"structured extension", structuredHeader(),
			structuredBody(map[string]*string{"traceparent": raw(`"` + testTP + `"`), "tracestate": raw(`"` + testTS + `"`)}), testTP, testTS},
		{"binary extension", binaryHeader(map[string]*string{"ce-traceparent": raw(testTP), "ce-tracestate": raw("vendor%3Dopaque")}),
			[]byte(minimalTask), testTP, testTS},
		{"headers win over the extension, as a pair", nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}, "traceparent": {otherTP}},
			structuredBody(map[string]*string{"traceparent": raw(`"` + testTP + `"`), "tracestate": raw(`"` + testTS + `"`)}), otherTP, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inc, err := events.DecodeTask(tc.header, tc.body, events.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if inc.TraceParent != tc.wantTP || inc.TraceState != tc.wantTS {
				t.Errorf("trace = %q, %q; want %q, %q", inc.TraceParent, inc.TraceState, tc.wantTP, tc.wantTS)
			}
		})
	}
}

func TestEncodeTaskRoundTrip(t *testing.T) {
	tasks := []string{minimalTask, fullTask,
		`{"task_id":"T","role":"external:house-bot","modes":[],"overrides":{"tools":[],"yolo":false,"extra_prompt":""}}`}
	ids := []struct{ source, id string }{
		{testSource, testID},
		{"https://planner.example.com/teams/a", "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"/planner", "évènement 1 \"quoted\" 100%"},
	}
	for _, m := range modes {
		for _, data := range tasks {
			for _, who := range ids {
				h, body, err := events.EncodeTask(who.source, who.id, []byte(data), testTP, testTS, m.binary)
				if err != nil {
					t.Fatal(err)
				}
				inc, err := events.DecodeTask(h, body, events.DecodeOptions{})
				if err != nil {
					t.Fatalf("%s %s: %v", m.name, who.id, err)
				}
				want, wantRef, _ := events.DecodeTaskData([]byte(data), events.DecodeOptions{})
				if diff := cmp.Diff(want, inc.Task); diff != "" {
					t.Errorf("%s: task (-want +got):\n%s", m.name, diff)
				}
				if inc.Ref != wantRef || inc.ID != who.id || inc.Source != who.source ||
					inc.TraceParent != testTP || inc.TraceState != testTS {
					t.Errorf("%s: ref %v id %q source %q trace %q %q", m.name, inc.Ref, inc.ID, inc.Source, inc.TraceParent, inc.TraceState)
				}
				ext := inc.Event.Extensions()
				if ext[events.ExtTraceParent] != testTP || ext[events.ExtTraceState] != testTS {
					t.Errorf("%s: trace extension = %v", m.name, ext)
				}
				for k, vs := range h {
					for _, v := range vs {
						if strings.ContainsFunc(v, func(r rune) bool { return r < '!' || r > '~' }) {
							t.Errorf("%s: header %s = %q is not printable ASCII", m.name, k, v)
						}
					}
				}
			}
		}
	}
}

func TestEncodeTaskShape(t *testing.T) {
	h, body := encode(t, minimalTask, false)
	if got := h.Get("content-type"); got != events.ContentTypeCloudEventsJSON {
		t.Errorf("structured content-type = %q", got)
	}
	want := `{"specversion":"1.0","id":"evt-0001","source":"urn:rolecall:test-planner","type":"dev.rolecall.task.assigned.v1","datacontenttype":"application/json","data":{"task_id":"T-1","role":"architect"}}`
	if string(body) != want {
		t.Errorf("structured body =\n%s\nwant\n%s", body, want)
	}

	h, body = encode(t, minimalTask, true)
	wantH := nats.Header{
		"ce-specversion": {"1.0"}, "ce-id": {testID}, "ce-source": {testSource},
		"ce-type": {events.TypeTaskAssigned}, "ce-datacontenttype": {"application/json"},
	}
	if diff := cmp.Diff(wantH, h); diff != "" {
		t.Errorf("binary headers (-want +got):\n%s", diff)
	}
	if string(body) != minimalTask {
		t.Errorf("binary body = %s", body)
	}

	if _, _, err := events.EncodeTask(testSource, testID, []byte(`{"task_id":`), "", "", false); err == nil {
		t.Error("EncodeTask accepted data that is not JSON")
	}
	if _, _, err := events.EncodeTask("", testID, []byte(minimalTask), "", "", true); err == nil {
		t.Error("EncodeTask accepted an empty source")
	}
}

// The first failure in the message is the one reported, whatever kind of
// problem comes later; a syntax error anywhere, though, makes the whole
// body not_json, and member problems come before the attribute checks.
func TestDecodeTaskFirstFailureInMessageOrder(t *testing.T) {
	const head = `"specversion":"1.0","source":"s","type":"` + events.TypeTaskAssigned + `"`
	cases := []struct {
		name, members   string
		subject, reason string
	}{
		{"bad name, then duplicate id", `"Bad":1,"id":"a","id":"b"`, "Bad", events.ReasonInvalidAttributeName},
		{"duplicate id, then bad name", `"id":"a","id":"b","Bad":1`, "id", events.ReasonDuplicateAttribute},
		{"duplicate extension, then wrong type", `"id":"a","x":1,"x":2,"subject":7`, "x", events.ReasonDuplicateAttribute},
		{"wrong type, then duplicate extension", `"id":"a","subject":7,"x":1,"x":2`, "subject", events.ReasonWrongType},
		{"bad extension value, then bad name", `"id":"a","x":{},"Y":1`, "x", events.ReasonWrongType},
		{"data_base64 invalid, then data", `"id":"a","data_base64":"***","data":{}`, "data_base64", events.ReasonInvalidValue},
		{"data_base64 valid, then data", `"id":"a","data_base64":"e30=","data":{}`, "data", events.ReasonDuplicateAttribute},
		{"data, then data_base64 invalid", `"id":"a","data":{},"data_base64":"***"`, "data_base64", events.ReasonDuplicateAttribute},
		{"member problem before a failing check", `"id":"a","time":"yesterday","x":[],"data":{}`, "x", events.ReasonWrongType},
		{"member problems, then a syntax error", `"Bad":1,"id":"a","id":"b",`, "", events.ReasonNotJSON},
		{"extension control character after one too long", `"id":"a","a":"` + strings.Repeat("x", events.MaxAttributeBytes+1) + `","b":"\n","data":{}`, "a", events.ReasonTooLarge},
		{"extension too long after one with a control character", `"id":"a","b":"\n","a":"` + strings.Repeat("x", events.MaxAttributeBytes+1) + `","data":{}`, "b", events.ReasonInvalidValue},
		{"an invalid UTF-8 member name", "\"id\":\"a\",\"b\xff\":1,\"Bad\":2", strconv.Quote("\"b\ufffd\""), events.ReasonInvalidAttributeName},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := events.DecodeTask(structuredHeader(), []byte("{"+head+","+tc.members+"}"), events.DecodeOptions{})
			wantDecodeError(t, err, resolve.CodeEventInvalid, tc.subject, tc.reason)
		})
	}
}

// The message of a not_json failure does not depend on what was decoded
// before (a reused decoder once dropped a member name from a later syntax
// error's JSON pointer; the fuzz target found it).
func TestDecodeTaskNotJSONMessageStable(t *testing.T) {
	good, goodBody := encode(t, fullTask, false)
	bad := []byte(`{"specversion":"1.0","id":"1","source":"n","type":"` + events.TypeTaskAssigned + `","data":{  "modes":["remortem"],` +
		` "overrides":{  "model":"opus-4-1",` + "\n" + `    "effort":"",` + "\n" + `    "extra_prompt":"t short.",` + "\n" + `    "tools":[true` + "\n" + `  }` + "\n" + `}}`)
	for range 3 {
		if _, err := events.DecodeTask(good, goodBody, events.DecodeOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := events.DecodeTask(nil, bad, events.DecodeOptions{})
		wantDecodeError(t, err, resolve.CodeEventInvalid, "", events.ReasonNotJSON)
		if !strings.Contains(err.Error(), `within "/data/overrides/tools"`) {
			t.Fatalf("message %q does not name /data/overrides/tools", err)
		}
	}
}

// A not_json message says where the body stops being JSON, in words of
// its own: it used to carry the decoder's Go package name ("jsontext: ").
func TestDecodeTaskNotJSONMessage(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"specversion":"1.0","id":"1","data":{"tools":[true}}`, `invalid character '}' after array element (expecting ',' or ']') within "/data/tools" after offset 51`},
		{`{"specversion":"1.0","id":"\x"}`, "invalid escape sequence `\\x` in string within \"/id\" after offset 27"},
		{"\ufeff{}", `invalid character '\ufeff' at start of value`},
		{`nul`, `unexpected EOF after offset 3`},
	} {
		_, err := events.DecodeTask(nil, []byte(tc.body), events.DecodeOptions{})
		de := wantDecodeError(t, err, resolve.CodeEventInvalid, "", events.ReasonNotJSON)
		if want := "structured event body is not valid JSON: " + tc.want; de.Message != want {
			t.Errorf("body %q: message %q, want %q", tc.body, de.Message, want)
		}
	}
}

// TestDecodeTaskHostileCorpus decodes the hostile corpus (testdata/hostile,
// which ./reliability also sends to a real worker): each entry gives the
// decode failure its manifest names, with its subject and task id, and
// the entries expected to resolve or to fail later decode.
func TestDecodeTaskHostileCorpus(t *testing.T) {
	corpus := hostile.Load(t, filepath.Join("..", "testdata", "hostile", "events"))
	if len(corpus) < 10 {
		t.Fatalf("corpus has %d entries", len(corpus))
	}
	for _, e := range corpus {
		t.Run(e.Name, func(t *testing.T) {
			h, body := e.Message(t, "reliability")
			inc, err := events.DecodeTask(h, body, events.DecodeOptions{})
			code := resolve.Code(e.Code)
			if e.Expect == "resolved" || code != resolve.CodeEventInvalid && code != resolve.CodeTaskInvalid {
				if err != nil {
					t.Fatalf("%s: %v", e.Why, err)
				}
				return
			}
			var de *events.DecodeError
			if !errors.As(err, &de) || de.Code != code || de.Reason() != e.Reason || e.Subject != nil && de.Subject != *e.Subject {
				t.Fatalf("%s: error %v, want %s/%s", e.Why, err, e.Code, e.Reason)
			}
			if want := ""; e.TaskID != nil && *e.TaskID != inc.Task.TaskID || e.TaskID == nil && inc.Task.TaskID != want {
				t.Errorf("task id %q, want %v", inc.Task.TaskID, e.TaskID)
			}
		})
	}
}

// manyExtensions is a valid structured task event with n extension
// attributes ("x" and their number in base 36, each "name":1), extra
// members appended: about 1.3 MB for 125,000.
func manyExtensions(n int, extra ...string) []byte {
	b := []byte(`{"specversion":"1.0","id":"` + testID + `","source":"` + testSource + `","type":"` + events.TypeTaskAssigned + `","data":` + minimalTask)
	for i := range n {
		b = append(b, `,"x`...)
		b = strconv.AppendInt(b, int64(i), 36)
		b = append(b, `":1`...)
	}
	for _, m := range extra {
		b = append(append(b, ','), m...)
	}
	return append(b, '}')
}

// An event with 125,000 extension attributes gets its typed result (the
// check for repeated names once took 26 s of CPU on it; the benchmark
// BenchmarkDecodeTaskManyExtensions times it).
func TestDecodeTaskManyExtensions(t *testing.T) {
	const n = 125_000
	inc, err := events.DecodeTask(structuredHeader(), manyExtensions(n), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := "x" + strconv.FormatInt(n-1, 36)
	if ext := inc.Event.Extensions(); len(ext) != n || ext[last] != int32(1) || inc.Task.TaskID != "T-1" {
		t.Errorf("%d extensions, %s = %v, task %q", len(ext), last, ext[last], inc.Task.TaskID)
	}
	_, err = events.DecodeTask(structuredHeader(), manyExtensions(n, `"x0":2`), events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeEventInvalid, "x0", events.ReasonDuplicateAttribute)
	_, err = events.DecodeTask(structuredHeader(), manyExtensions(n, `"zzzz":{}`), events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeEventInvalid, "zzzz", events.ReasonWrongType)
	_, err = events.DecodeTask(structuredHeader(), manyExtensions(n, `"zzzz":"a\u0000"`), events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeEventInvalid, "zzzz", events.ReasonInvalidValue)

	h := binaryHeader(nil)
	for i := range n {
		h["ce-x"+strconv.FormatInt(int64(i), 36)] = []string{"1"}
	}
	inc, err = events.DecodeTask(h, []byte(minimalTask), events.DecodeOptions{})
	if err != nil || len(inc.Event.Extensions()) != n {
		t.Fatalf("binary: %v, %d extensions", err, len(inc.Event.Extensions()))
	}
	h["Ce-X0"] = []string{"2"}
	_, err = events.DecodeTask(h, []byte(minimalTask), events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeEventInvalid, "ce-x0", events.ReasonDuplicateAttribute)
}

// TestDecodeTaskURIAttributes: source and dataschema may hold every RFC
// 3986 character, percent-encodings included (kept as sent).
func TestDecodeTaskURIAttributes(t *testing.T) {
	const source = "https://user@example.com:8443/a%20b/c;d=e?f=g&h=%C3%A9#i!$'()*+,~[]"
	const schema = "https://rolecall.dev/schema/task%20v1.json?x=1#frag"
	inc, err := events.DecodeTask(structuredHeader(), structuredBody(map[string]*string{
		"source": raw(`"` + source + `"`), "dataschema": raw(`"` + schema + `"`)}), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if inc.Source != source || inc.Event.DataSchema() != schema {
		t.Errorf("source %q dataschema %q, want %q %q", inc.Source, inc.Event.DataSchema(), source, schema)
	}
}
