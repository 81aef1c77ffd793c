package events_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/hostile"
	"github.com/rolecall/rolecall/resolve"
)

// Differential tests: the fast path (decodeTaskFast, decodeTaskDataFast)
// against the original decoder it falls back to (decodeTaskSlow,
// decodeTaskDataSlow). Whenever the fast path answers, the original must
// accept the message and produce a deeply equal Incoming; DecodeTask must
// always give exactly what the original gives, error values included.

var exportAll = cmp.Exporter(func(reflect.Type) bool { return true })

// compareDecode runs one message through the three decoders and reports
// whether the fast path answered.
func compareDecode(t testing.TB, h nats.Header, body []byte, opts events.DecodeOptions) bool {
	t.Helper()
	slow, slowErr := events.DecodeTaskSlow(h, body, opts)
	got, gotErr := events.DecodeTask(h, body, opts)
	fast, ok := events.DecodeTaskFast(h, body, opts)
	if ok {
		if slowErr != nil {
			t.Fatalf("fast path accepted a message the original rejects (%v)\nheader %q\nbody %q", slowErr, h, body)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast path differs (-original +fast):\n%s\nheader %q\nbody %q", cmp.Diff(slow, fast, exportAll), h, body)
		}
	}
	if !reflect.DeepEqual(got, slow) || !reflect.DeepEqual(gotErr, slowErr) {
		t.Fatalf("DecodeTask differs from the original: err %v, want %v\n(-original +DecodeTask):\n%s\nheader %q\nbody %q",
			gotErr, slowErr, cmp.Diff(slow, got, exportAll), h, body)
	}
	return ok
}

func compareDecodeData(t testing.TB, data []byte, opts events.DecodeOptions) bool {
	t.Helper()
	slow, slowRef, slowErr := events.DecodeTaskDataSlow(data, opts)
	got, gotRef, gotErr := events.DecodeTaskData(data, opts)
	fast, fastRef, ok := events.DecodeTaskDataFast(data, opts)
	if ok {
		if slowErr != nil {
			t.Fatalf("fast path accepted data the original rejects (%v): %q", slowErr, data)
		}
		if !reflect.DeepEqual(fast, slow) || fastRef != slowRef {
			t.Fatalf("fast path differs (-original +fast):\n%s\nref %v, want %v\ndata %q", cmp.Diff(slow, fast), fastRef, slowRef, data)
		}
	}
	if !reflect.DeepEqual(got, slow) || gotRef != slowRef || !reflect.DeepEqual(gotErr, slowErr) {
		t.Fatalf("DecodeTaskData differs from the original: err %v, want %v\n(-original +DecodeTaskData):\n%s\ndata %q",
			gotErr, slowErr, cmp.Diff(slow, got), data)
	}
	return ok
}

// validTasks are task data the fast path must take (wrapped in either
// mode): every member, null for every optional one, empty values where
// they are allowed, escapes, non-ASCII text, whitespace everywhere, and
// more array elements than fit in the decoder's inline storage.
var validTasks = []string{
	minimalTask,
	fullTask,
	`{"task_id":"T","role":"external:house-bot","modes":[],"overrides":{"tools":[],"yolo":false,"extra_prompt":""}}`,
	`{"task_id":"T","role":"a","pack":null,"profile":null,"modes":null,"overrides":null}`,
	`{"task_id":"T","role":"a","overrides":{"model":null,"effort":null,"extra_prompt":null,"tools":null,"permissions":null,
	  "yolo":null,"bypass":null,"fast_mode":null,"lion_system":null}}`,
	`{"task_id":"T","role":"a","overrides":{}}`,
	`{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"allow_all"}}}`,
	`{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"deny_all","allow":null,"deny":{},"escalate":null}}}`,
	`{"role":"architect","task_id":"T-9"}`,
	" \r\n\t{ \"task_id\" : \"T\" , \"role\" : \"a\" , \"modes\" : [ \"x\" , \"y\" ] } \n",
	`{"task_id":"T\u002d1","role":"a","overrides":{"extra_prompt":"line\nnext \"q\" \\ \/ \u00e9 \ud83d\ude00 \t","model":"m\u00e9","tools":["R\u00e9ad"]}}`,
	`{"task_id":"T","role":"a","overrides":{"extra_prompt":"évènement 😀 ","tools":["Bash(ls:*)","mcp__srv__tool"],
	  "permissions":{"mode":"rules","allow":{"B\u0061sh":["git *"],"Read":["**/*.go","src/{a,b}/*"],"mcp(x)":["*"]},"deny":{},"escalate":{"Write":[]}}}}`,
	`{"task_id":"T","role":"a","modes":["m1","m2","m3","m4","m5","m6"],"overrides":{"tools":["t1","t2","t3","t4"],
	  "permissions":{"mode":"rules","allow":{"A":["a","b","c"],"B":["d"]},"deny":{"C":["e","f"]}}}}`,
	`{"task_id":"` + strings.Repeat("x", events.MaxTaskIDLen) + `","role":"` + strings.Repeat("r", 64) + `",
	  "overrides":{"model":"` + strings.Repeat("é", events.MaxValueLen) + `"}}`,
}

// declinedTasks are valid data the fast path may leave to the original
// (rare forms); the result must still be the original's.
var declinedTasks = []string{
	`{"task\u005fid":"T","role":"a"}`,
	`{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"B":null,"C":["x"]}}}}`,
}

func TestFastDecodeTaskData(t *testing.T) {
	for _, data := range validTasks {
		if !compareDecodeData(t, []byte(data), events.DecodeOptions{}) {
			t.Errorf("fast path declined valid data %s", data)
		}
	}
	for _, data := range declinedTasks {
		compareDecodeData(t, []byte(data), events.DecodeOptions{})
	}
	for _, tc := range taskInvalidCases {
		if compareDecodeData(t, []byte(tc.data), events.DecodeOptions{}) {
			t.Errorf("%s: fast path accepted invalid data", tc.name)
		}
	}
	for _, data := range taskDataVariants() {
		compareDecodeData(t, []byte(data), events.DecodeOptions{})
	}
	// The size limit, at and over it.
	data := []byte(fullTask)
	if !compareDecodeData(t, data, events.DecodeOptions{MaxDataBytes: len(data)}) {
		t.Error("fast path declined data at the size limit")
	}
	compareDecodeData(t, data, events.DecodeOptions{MaxDataBytes: len(data) - 1})
}

// taskDataVariants puts every JSON kind, and hostile strings, in every
// member of the task schema.
func taskDataVariants() []string {
	values := []string{`null`, `""`, `" "`, `"a"`, `"A"`, `"x/y"`, `"..."`, `7`, `-1.5e3`, `true`, `false`, `[]`, `[null]`, `["a",null]`,
		`["a","a"]`, `[1]`, `[[]]`, `{}`, `{"a":[]}`, `{"a":null}`, `{"":["x"]}`, `{"a":["["]}`, `{"a":[""]}`, `{"a":[],"a":[]}`,
		`"a\u0001"`, "\"a\xff\"", `"\ud800"`, `"\ud800\u0041"`, `"\u0000"`, `"\x"`, `"\u12"`, `"é"`, "\"a\u0085b\"", "\"\x7f\"",
		`"` + strings.Repeat("m", 257) + `"`, `"` + strings.Repeat("a", 65) + `"`, `"external:x"`, `"external:"`,
		`"allow_all"`, `"rules"`, `"git *"`, `{"mode":"rules"}`, `{"mode":"x"}`, `{"mode":null}`, `{"mode":"rules","ask":{}}`,
		`{"mode":"rules","allow":{"B":["["]}}`, `{"mode":"rules","allow":{"B":"x"}}`, `{"mode":"rules","allow":[]}`}
	base := map[string]string{"task_id": `"T"`, "role": `"a"`}
	var out []string
	object := func(members map[string]string, order []string) string {
		var b strings.Builder
		b.WriteString("{")
		for i, k := range order {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q:%s", k, members[k])
		}
		b.WriteString("}")
		return b.String()
	}
	for _, member := range []string{"task_id", "role", "pack", "profile", "modes", "overrides", "extra"} {
		for _, v := range values {
			m := map[string]string{"task_id": base["task_id"], "role": base["role"], member: v}
			order := []string{"task_id", "role"}
			if member != "task_id" && member != "role" {
				order = append(order, member)
			}
			out = append(out, object(m, order))
		}
	}
	for _, member := range []string{"model", "effort", "extra_prompt", "tools", "permissions", "yolo", "bypass", "fast_mode", "lion_system", "extra"} {
		for _, v := range values {
			out = append(out, `{"task_id":"T","role":"a","overrides":{"`+member+`":`+v+`}}`)
			out = append(out, `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"B":`+v+`}}}}`)
			out = append(out, `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","`+member+`":`+v+`}}}`)
		}
	}
	// Duplicates of each member, structural damage and truncation.
	for _, member := range []string{"task_id", "role", "pack", "modes", "overrides"} {
		out = append(out, `{"task_id":"T","role":"a","`+member+`":null,"`+member+`":null}`)
	}
	for i := range len(fullTask) {
		out = append(out, fullTask[:i], fullTask[:i]+"}", fullTask[:i]+","+fullTask[i:])
	}
	return out
}

// envelopeCase is a message for the differential tests; fast marks those
// the fast path must take.
type envelopeCase struct {
	name   string
	header nats.Header
	body   []byte
	fast   bool
}

func envelopeCases(t testing.TB) []envelopeCase {
	var cases []envelopeCase
	add := func(name string, fast bool, h nats.Header, body []byte) {
		cases = append(cases, envelopeCase{name, h, body, fast})
	}
	for _, data := range validTasks {
		for _, m := range modes {
			for _, trace := range [][2]string{{"", ""}, {testTP, ""}, {testTP, testTS}} {
				h, body, err := events.EncodeTask(testSource, testID, []byte(data), trace[0], trace[1], m.binary)
				if err != nil {
					t.Fatal(err)
				}
				add("EncodeTask/"+m.name, true, h, body)
			}
		}
		add("binary/"+data, true, binaryHeader(nil), []byte(data))
	}
	for _, data := range declinedTasks {
		add("declined data", false, binaryHeader(nil), []byte(data))
		add("declined data", false, structuredHeader(), structuredBody(map[string]*string{"data": raw(data)}))
	}
	for _, tc := range taskInvalidCases {
		add("task_invalid/"+tc.name, false, binaryHeader(nil), []byte(tc.data))
		add("task_invalid/"+tc.name, false, structuredHeader(), structuredBody(map[string]*string{"data": raw(tc.data)}))
	}
	for _, who := range []struct{ source, id string }{
		{"https://planner.example.com/teams/a?x=1#f", "0f8fad5b-d9cb-469f-a165-70867728950e"},
		{"/planner", "évènement 1 \"quoted\" 100%"},
		{"https://user:pw@example.com/p", "id"},
	} {
		for _, m := range modes {
			h, body, err := events.EncodeTask(who.source, who.id, []byte(fullTask), testTP, testTS, m.binary)
			if err != nil {
				t.Fatal(err)
			}
			add("EncodeTask/"+who.source, true, h, body)
		}
	}

	// A source sdk-go would rewrite (EncodeTask refuses to send one).
	for _, src := range []string{"HTTP://Example.COM/%41", "a b", "//host", "?q", "#f", "mailto:x@y", "urn:x:%zz"} {
		q, _ := json.Marshal(src)
		add("source "+src, false, structuredHeader(), structuredBody(map[string]*string{"source": raw(string(q))}))
		add("source "+src, false, binaryHeader(map[string]*string{"ce-source": raw(src)}), []byte(minimalTask))
	}

	// Structured: header forms.
	sb := structuredBody(nil)
	add("no headers", true, nil, sb)
	add("content-type with charset", true, nats.Header{"Content-Type": {"application/cloudevents+json; charset=UTF-8"}}, sb)
	add("content-type upper case", true, nats.Header{"CONTENT-TYPE": {" Application/CloudEvents+JSON "}}, sb)
	add("content-type latin1", false, nats.Header{"content-type": {"application/cloudevents+json; charset=latin1"}}, sb)
	add("batch", false, nats.Header{"content-type": {"application/cloudevents-batch+json"}}, []byte(`[]`))
	add("two content-types", false, nats.Header{"content-type": {events.ContentTypeCloudEventsJSON, events.ContentTypeJSON}}, sb)
	add("content-type in two spellings", false, nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}, "Content-Type": {events.ContentTypeCloudEventsJSON}}, sb)
	add("content-type empty list", false, nats.Header{"content-type": {}}, sb)
	add("plain JSON", false, nats.Header{"content-type": {events.ContentTypeJSON}}, []byte(minimalTask))
	add("ce- headers ignored", true, nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}, "ce-type": {"other"}, "Ce-X_y": {"1", "2"}}, sb)
	add("other headers", true, nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}, "Nats-Msg-Id": {"m"}, "X-Other": {"a", "b"}}, sb)
	add("non-ASCII header name", false, nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}, "X-Ünï": {"a"}}, sb)
	add("Kelvin sign", false, nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"e"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned}, "ce-tas\u212Aid": {"T"}}, []byte(minimalTask))
	add("dotted capital I", false, nats.Header{"ce-spec\u0130ersion": {"1.0"}, "ce-id": {"e"}, "ce-source": {"urn:s"}, "ce-type": {events.TypeTaskAssigned}}, []byte(minimalTask))
	for _, tc := range []struct {
		h    nats.Header
		fast bool
	}{
		{nats.Header{"traceparent": {testTP}, "tracestate": {testTS}}, true},
		{nats.Header{"Traceparent": {" " + testTP + " "}, "TraceState": {}}, true},
		{nats.Header{"traceparent": {testTP, "other"}}, true},
		{nats.Header{"tracestate": {testTS}}, true},
		{nats.Header{"traceparent": {testTP}, "TRACEPARENT": {"other"}}, false},
		{nats.Header{"tracestate": {testTS}, "Tracestate": {"other"}}, false},
	} {
		h := structuredHeader()
		for k, v := range tc.h {
			h[k] = v
		}
		add(fmt.Sprintf("trace headers %q", tc.h), tc.fast, h,
			structuredBody(map[string]*string{"traceparent": raw(`"` + testTP + `"`), "tracestate": raw(`"x=y"`)}))
	}

	// Structured: every attribute with every kind of value.
	long := func(n int) string { return `"` + strings.Repeat("a", n) + `"` }
	values := []string{"", `null`, `""`, `" "`, `"\t"`, `7`, `-3`, `0`, `2147483647`, `2147483648`, `-2147483649`, `1.0`, `1e2`, `01`, `-`, `true`, `false`, `[]`, `{}`, `["x"]`,
		`"a\u0001"`, `"a\u007f"`, "\"a\u0085\"", "\"a\xff\"", `"\ud800"`, `"\u00e9"`, `"é"`, `"a b"`, `"\"q\""`, long(events.MaxAttributeBytes), long(events.MaxAttributeBytes + 1),
		`"1.0"`, `"0.3"`, `"urn:x"`, `"http://[::1"`, `"%zz"`, `"https://rolecall.dev/schema/task.v1.json"`, `"schema.json"`, `"` + events.TypeTaskAssigned + `"`, `"` + events.TypeSpecFailed + `"`,
		`"application/json"`, `"application/json; charset=utf-8"`, `"application/json;charset=UTF-8"`, `"text/plain"`, `"application/json; charset=latin1"`, `"application/json; x=y"`,
		`"2026-07-09T10:00:00Z"`, `"2026-07-09T10:00:00.123456789+02:00"`, `"0001-01-01T00:00:00Z"`, `"2026-13-01T00:00:00Z"`, `"yesterday"`, `"` + testTP + `"`}
	for _, attr := range []string{"specversion", "id", "source", "type", "datacontenttype", "dataschema", "subject", "time", "traceparent", "tracestate", "ext1", "data_base64", "Upper", "a-b", "data"} {
		for _, v := range values {
			set := map[string]*string{attr: raw(v)}
			if v == "" {
				set[attr] = nil
			}
			add("structured/"+attr+"="+v, false, structuredHeader(), structuredBody(set))
		}
	}
	// Members, duplicates and grammar around the data.
	for _, body := range []string{
		`{"specversion":"1.0","id":"a","id":"b","source":"s","type":"` + events.TypeTaskAssigned + `","data":{"task_id":"T","role":"a"}}`,
		`{"specversion":"1.0","id":null,"id":"b","source":"s","type":"` + events.TypeTaskAssigned + `","data":{"task_id":"T","role":"a"}}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","data":{"task_id":"T","role":"a"},"data":{"task_id":"T","role":"a"}}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","x":null,"x":1,"data":{"task_id":"T","role":"a"}}`,
		`{"data":{"task_id":"T","role":"a"},"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `"}`,
		` { "specversion" : "1.0" , "id" : "a" , "source" : "s" , "type" : "` + events.TypeTaskAssigned + `" , "data" : { "task_id" : "T" , "role" : "a" } } ` + "\n",
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","data":{"task_id":"T","role":"a"}} x`,
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","data":{"task_id":"T","role":"a"},}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","data":null}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","data":"{}"}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","data":{"task_id":"T","role":"a","x":1}}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","data_base64":"` + base64.StdEncoding.EncodeToString([]byte(minimalTask)) + `"}`,
		`{"spec\u0076ersion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","data":{"task_id":"T","role":"a"}}`,
		`{"specversion":"1.0","id":"a","source":"s","type":"` + events.TypeTaskAssigned + `","":1,"data":{"task_id":"T","role":"a"}}`,
		`{}`, `[]`, `null`, ``, `{`, `{"specversion"`, `{"specversion":"1.0"`, "\xef\xbb\xbf{}",
	} {
		add("structured body "+body, false, structuredHeader(), []byte(body))
	}
	exts := map[string]*string{}
	for i := range 40 {
		exts[fmt.Sprintf("x%d", i)] = raw(`"v"`)
	}
	add("many extensions", false, structuredHeader(), structuredBody(exts))
	add("extensions of every kind", true, structuredHeader(), structuredBody(map[string]*string{
		"priority": raw(`3`), "big": raw(`70000`), "neg": raw(`-12`), "urgent": raw(`true`), "calm": raw(`false`),
		"comment": raw(`"x\u00e9"`), "nothing": raw(`null`), "time": raw(`"2026-07-09T10:00:00.5+02:00"`),
		"subject": raw(`"T-1"`), "dataschema": raw(`"https://rolecall.dev/schema/task.v1.json"`)}))

	// Binary: every attribute with every kind of header value.
	hvalues := []string{"", " ", "\t", "a", " a ", "a%20b", "%E2%82%AC", "a%zz", "a%4", "a%C0%A0", "a%0Ab", "a\xff", `"quoted \" v"`, `"abc`, `"abc"d`, `""`,
		"évènement", "a\u0085", strings.Repeat("a", events.MaxAttributeBytes), strings.Repeat("a", events.MaxAttributeBytes+1),
		"1.0", "0.3", "urn:x", "http://[::1", "https://rolecall.dev/schema/task.v1.json", "schema.json", events.TypeTaskAssigned, events.TypeSpecFailed,
		"application/json", "application/json; charset=utf-8", "Application/JSON", "text/plain", "2026-07-09T10:00:00Z", "2026-13-01T00:00:00Z", testTP}
	for _, attr := range []string{"specversion", "id", "source", "type", "datacontenttype", "dataschema", "subject", "time", "traceparent", "tracestate", "ext1", "data", "task_id", ""} {
		for _, v := range hvalues {
			add("binary/"+attr+"="+v, false, binaryHeader(map[string]*string{"ce-" + attr: raw(v)}), []byte(minimalTask))
		}
		add("binary/"+attr+" missing", false, binaryHeader(map[string]*string{"ce-" + attr: nil}), []byte(minimalTask))
		h := binaryHeader(nil)
		h["Ce-"+strings.ToUpper(attr)] = []string{"x"}
		add("binary/"+attr+" in two spellings", false, h, []byte(minimalTask))
		h = binaryHeader(nil)
		h["ce-"+attr] = []string{"x", "y"}
		add("binary/"+attr+" twice", false, h, []byte(minimalTask))
	}
	add("binary mixed case", true, nats.Header{"Ce-Specversion": {"1.0"}, "CE-ID": {"e1"}, "ce-Source": {"urn:s"}, "Ce-Type": {events.TypeTaskAssigned},
		"Ce-TraceParent": {testTP}, "CE-EXTRA": {"v"}, "Ce-Subject": {"s"}}, []byte(minimalTask))
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON", "text/plain", "", "application/cloudevents+json"} {
		h := binaryHeader(map[string]*string{"ce-datacontenttype": nil})
		h["content-type"] = []string{ct}
		add("binary content-type "+ct, false, h, []byte(minimalTask))
		h = binaryHeader(nil)
		h["Content-Type"] = []string{ct}
		add("binary content-type and ce-datacontenttype "+ct, false, h, []byte(minimalTask))
	}
	for _, body := range []string{"", " ", minimalTask + " \n", " " + minimalTask, minimalTask + "x", "null", "[]"} {
		add("binary body "+body, false, binaryHeader(nil), []byte(body))
	}
	return cases
}

func TestFastDecodeTask(t *testing.T) {
	cases := envelopeCases(t)
	for _, tc := range cases {
		if ok := compareDecode(t, tc.header, tc.body, events.DecodeOptions{}); tc.fast && !ok {
			t.Errorf("%s: fast path declined a message it should take\nheader %q\nbody %s", tc.name, tc.header, tc.body)
		}
	}
	// The data size limit applies to the data alone, in either mode.
	for _, m := range modes {
		h, body := encode(t, fullTask, m.binary)
		if !compareDecode(t, h, body, events.DecodeOptions{MaxDataBytes: len(fullTask)}) {
			t.Errorf("%s: fast path declined data at the limit", m.name)
		}
		compareDecode(t, h, body, events.DecodeOptions{MaxDataBytes: len(fullTask) - 1})
	}
}

// The decoder is pooled: decoding one message must not leave anything
// behind that changes the next one's result, or the first's.
func TestFastDecodeTaskIndependent(t *testing.T) {
	h1, b1 := encode(t, fullTask, false)
	h2, b2 := encode(t, minimalTask, true)
	first, err := events.DecodeTask(h1, b1, events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := events.DecodeTaskSlow(h1, b1, events.DecodeOptions{})
	for range 3 {
		compareDecode(t, h2, b2, events.DecodeOptions{})
		compareDecode(t, h1, b1, events.DecodeOptions{})
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("a decoded task changed after later decodes:\n%s", cmp.Diff(want, first, exportAll))
	}
	// The caller owns what it got: appending to a slice or writing through
	// a pointer does not reach another field.
	first.Task.Modes = append(first.Task.Modes, "extra")
	first.Task.Override.Tools = append(first.Task.Override.Tools, "extra")
	*first.Task.Pack = "changed"
	if *first.Task.Profile != "house-style" || first.Task.Override.Tools[0] != "Read" ||
		!reflect.DeepEqual(first.Task.Override.Permissions.Allow["Bash"], []string{"git *", "ls"}) {
		t.Errorf("writing to one field changed another: %+v", first.Task)
	}
}

// Decoders run concurrently, sharing the parser pool and the source
// cache (whose 64 slots these sources overrun, so entries are replaced
// while other goroutines read them); run with -race.
func TestFastDecodeTaskConcurrent(t *testing.T) {
	type msg struct {
		h    nats.Header
		body []byte
		want events.Incoming
	}
	var msgs []msg
	for i := range 200 {
		h, body, err := events.EncodeTask(fmt.Sprintf("urn:rolecall:planner-%d", i), fmt.Sprintf("e-%d", i), []byte(validTasks[i%len(validTasks)]), testTP, "", i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		want, err := events.DecodeTaskSlow(h, body, events.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, msg{h, body, want})
	}
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			for i := range 2000 {
				m := msgs[(i*7+g*13)%len(msgs)]
				got, err := events.DecodeTask(m.h, m.body, events.DecodeOptions{})
				if err != nil || !reflect.DeepEqual(got, m.want) {
					errs <- fmt.Sprintf("message %s: err %v, diff:\n%s", m.want.ID, err, cmp.Diff(m.want, got, exportAll))
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if e := <-errs; e != "" {
			t.Fatal(e)
		}
	}
}

// The original decoder once reused one jsontext.Decoder, whose Reset can
// drop a member name from a later syntax error's JSON pointer: this body
// read "within /data//tools" after a good event had gone through the
// same decoder. The fuzz target (which decodes each input twice) found
// it; the message must not depend on what was decoded before. (The good
// event goes through the original decoder on purpose: the fast path
// would take it without a jsontext.Decoder.)
func TestDecodeTaskNotJSONMessageStable(t *testing.T) {
	good, goodBody := encode(t, minimalTask, false)
	bad := []byte(`{"specversion":"1.0","id":"1","source":"n","type":"` + events.TypeTaskAssigned + `","data":{  "modes":["remortem"],` +
		` "overrides":{  "model":"opus-4-1",` + "\n" + `    "effort":"",` + "\n" + `    "extra_prompt":"t short.",` + "\n" + `    "tools":[true` + "\n" + `  }` + "\n" + `}}`)
	for range 3 {
		if _, err := events.DecodeTaskSlow(good, goodBody, events.DecodeOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := events.DecodeTask(nil, bad, events.DecodeOptions{})
		wantDecodeError(t, err, resolve.CodeEventInvalid, "", events.ReasonNotJSON)
		if !strings.Contains(err.Error(), `within "/data/overrides/tools"`) {
			t.Fatalf("message %q does not name /data/overrides/tools", err)
		}
	}
}

// The hostile corpus (testdata/hostile, also run against a real worker by
// ./reliability) through both decoders.
func TestFastDecodeTaskHostile(t *testing.T) {
	corpus := hostile.Load(t, filepath.Join("..", "testdata", "hostile", "events"))
	if len(corpus) < 10 {
		t.Fatalf("corpus has %d entries", len(corpus))
	}
	for _, e := range corpus {
		h, body := e.Message(t, "reliability")
		compareDecode(t, h, body, events.DecodeOptions{})
	}
}

// FuzzDecodeTaskFastVsSlow holds the fast path to the original on
// arbitrary headers and bodies.
func FuzzDecodeTaskFastVsSlow(f *testing.F) {
	blob := func(h nats.Header) string {
		var b strings.Builder
		for k, vs := range h {
			for _, v := range vs {
				b.WriteString(k + ": " + v + "\n")
			}
		}
		return b.String()
	}
	for _, tc := range envelopeCases(f) {
		if len(tc.body) < 4096 {
			f.Add(blob(tc.header), tc.body)
		}
	}
	f.Fuzz(func(t *testing.T, headers string, body []byte) {
		compareDecode(t, parseHeaderBlob(headers), body, events.DecodeOptions{})
		compareDecode(t, nil, body, events.DecodeOptions{})
	})
}

// FuzzDecodeTaskDataFastVsSlow does the same for task data alone.
func FuzzDecodeTaskDataFastVsSlow(f *testing.F) {
	for _, data := range validTasks {
		f.Add([]byte(data))
	}
	for _, data := range declinedTasks {
		f.Add([]byte(data))
	}
	for _, tc := range taskInvalidCases {
		f.Add([]byte(tc.data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		compareDecodeData(t, data, events.DecodeOptions{})
	})
}

// BenchmarkDecodeTaskOriginal is the original decoder (the fallback) on
// the inputs of BenchmarkDecodeTaskStructured, -Binary and -Data, for a
// comparison taken in the same minute on a shared machine.
func BenchmarkDecodeTaskOriginal(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			h, body, err := events.EncodeTask(testSource, testID, []byte(fullTask), testTP, testTS, m.binary)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := events.DecodeTaskSlow(h, body, events.DecodeOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("data", func(b *testing.B) {
		data := []byte(fullTask)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := events.DecodeTaskDataSlow(data, events.DecodeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
