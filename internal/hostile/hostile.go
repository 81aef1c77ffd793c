package hostile

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// Event is one entry of manifest.json.
type Event struct {
	Category string `json:"category"`
	Name     string `json:"name"`
	Why      string `json:"why"`
	// Envelope is how the bytes are sent: "structured" wraps Data in a
	// valid structured event, "binary" sends Data as the body of a valid
	// binary-mode event, "raw" sends Body (or File) with exactly Headers.
	Envelope    string              `json:"envelope"`
	Data        *string             `json:"data"`
	Body        *string             `json:"body"`
	File        string              `json:"file"`
	Headers     map[string][]string `json:"headers"`
	DropHeaders []string            `json:"drop_headers"`
	Fill        []struct {
		Token string `json:"token"`
		Unit  string `json:"unit"`
		Count int    `json:"count"`
	} `json:"fill"`
	// Expect is "resolved" for hostile-looking input that is valid;
	// otherwise a failure with Code and Reason (details.reason), Subject
	// when given, and TaskID (null: the task id is unknown).
	Expect  string  `json:"expect"`
	Code    string  `json:"code"`
	Reason  string  `json:"reason"`
	Subject *string `json:"subject"`
	TaskID  *string `json:"task_id"`

	dir string // the manifest's directory, where File is
}

// Load reads dir/manifest.json and checks every entry names what it
// expects.
func Load(tb testing.TB, dir string) []Event {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var corpus []Event
	if err := json.Unmarshal(b, &corpus); err != nil {
		tb.Fatalf("manifest.json: %v", err)
	}
	seen := map[string]bool{}
	for i, e := range corpus {
		if seen[e.Name] || e.Category == "" || (e.Expect != "resolved" && e.Code == "") ||
			(e.Reason == "") != (e.Expect == "resolved" || e.Code == string(resolve.CodeDeliveryExhausted)) {
			tb.Fatalf("manifest entry %q: duplicate name or missing category/code/reason", e.Name)
		}
		seen[e.Name] = true
		corpus[i].dir = dir
	}
	return corpus
}

// ID is the CloudEvents id the structured and binary envelopes carry.
func (e Event) ID() string { return "hostile-" + e.Name }

func (e Event) fill(s string) string {
	for _, f := range e.Fill {
		s = strings.ReplaceAll(s, f.Token, strings.Repeat(f.Unit, f.Count))
	}
	return s
}

// Message builds the NATS message exactly as the entry describes; source
// is the envelopes' CloudEvents source.
func (e Event) Message(tb testing.TB, source string) (nats.Header, []byte) {
	tb.Helper()
	var payload string
	switch {
	case e.File != "":
		b, err := os.ReadFile(filepath.Join(e.dir, e.File))
		if err != nil {
			tb.Fatal(err)
		}
		payload = string(b)
	case e.Data != nil:
		payload = *e.Data
	case e.Body != nil:
		payload = *e.Body
	}
	payload = e.fill(payload)
	hdr := nats.Header{}
	switch e.Envelope {
	case "structured":
		hdr["content-type"] = []string{events.ContentTypeCloudEventsJSON}
		payload = fmt.Sprintf(`{"specversion":"1.0","id":%q,"source":%q,"type":%q,"datacontenttype":"application/json","data":%s}`,
			e.ID(), source, events.TypeTaskAssigned, payload)
	case "binary":
		hdr["ce-specversion"] = []string{"1.0"}
		hdr["ce-id"] = []string{e.ID()}
		hdr["ce-source"] = []string{source}
		hdr["ce-type"] = []string{events.TypeTaskAssigned}
		hdr["content-type"] = []string{events.ContentTypeJSON}
	case "raw":
	default:
		tb.Fatalf("entry %s: envelope %q", e.Name, e.Envelope)
	}
	for k, vs := range e.Headers {
		filled := make([]string, len(vs))
		for i, v := range vs {
			filled[i] = e.fill(v)
		}
		hdr[k] = filled
	}
	for _, k := range e.DropHeaders {
		delete(hdr, k)
	}
	return hdr, []byte(payload)
}
