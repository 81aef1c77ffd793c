package events_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/resolve"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

var testTime = time.Date(2026, 7, 9, 12, 30, 0, 123456789, time.UTC)

func testCatalog() *resolve.Catalog {
	c := resolve.Catalog{
		Roles: map[string]resolve.Role{
			"architect": {
				Name: "architect", Description: "Designs systems.",
				Body:             "You are the architect.\n\nDesign <systems> & \"interfaces\".",
				Emits:            []string{"design_doc", "adr"},
				ArtifactDefaults: map[string]any{"format": "markdown", "max_pages": 3},
			},
		},
		Modes: map[string]resolve.Mode{
			"systematic": {Name: "systematic", Description: "Step by step.", Behaviors: "Work step by step."},
			"premortem":  {Name: "premortem", Description: "Assume failure.", Behaviors: "Assume the plan failed; explain why."},
		},
	}.Seal()
	return &c
}

func testPack() *resolve.Pack {
	p := resolve.Pack{Name: "default", Roles: map[string]resolve.PackEntry{
		"architect": {
			Model: ptr("claude-sonnet-4-5"), Effort: ptr("medium"), DefaultModes: []string{"systematic"},
			Authority: []string{"Choose the architecture."}, Boundaries: []string{"Do not write code."},
		},
	}}.Seal()
	return &p
}

// resolvedFor runs the real resolver and materializer, so the schema and
// golden tests see what the worker publishes.
func resolvedFor(t testing.TB, taskJSON string, profile *resolve.ExternalProfile) *events.ResolvedData {
	t.Helper()
	task, ref, err := events.DecodeTaskData([]byte(taskJSON), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := resolve.Inputs{
		Catalog: testCatalog(), Pack: testPack(), PackSelection: resolve.PackFromWorkerDefault, Profile: profile,
		Task:     task.Overrides(),
		Defaults: resolve.RuntimeDefaults{Tools: []string{"Read", "Grep"}, LionSystem: true},
	}
	spec, err := resolve.Resolve(ref, in)
	if err != nil {
		t.Fatal(err)
	}
	m, err := materialize.Materialize(&spec, "You are part of rolecall.")
	if err != nil {
		t.Fatal(err)
	}
	return &events.ResolvedData{TaskID: task.TaskID, ResolvedAgentSpec: spec, SystemMessage: m.SystemMessage, InputsDigest: resolve.InputsDigest(ref, in)}
}

func replacementProfile() *resolve.ExternalProfile {
	return &resolve.ExternalProfile{
		Name: "house-bot", Description: "In-house bot.", Disposition: resolve.DispositionReplacement,
		Model: ptr("local-model"), Yolo: ptr(true), Timeout: ptr(600), ResumeOnTimeout: true,
		Body: "You are house-bot.",
	}
}

func testMeta(taskID string) events.OutcomeMeta {
	return events.OutcomeMeta{
		ID: events.OutcomeID(testSource, testID), Source: "urn:rolecall:fleet-a", TaskID: taskID,
		CausationID: testID, TraceParent: testTP, TraceState: testTS, Time: testTime,
	}
}

type encoded struct {
	subject string
	header  nats.Header
	body    []byte
}

func outcomeCases(t *testing.T) []struct {
	name string
	enc  encoded
} {
	t.Helper()
	res := func(d *events.ResolvedData, meta events.OutcomeMeta) encoded {
		s, h, b, err := events.EncodeResolved("", meta, d)
		if err != nil {
			t.Fatal(err)
		}
		return encoded{s, h, b}
	}
	fail := func(d *events.FailureData, meta events.OutcomeMeta) encoded {
		s, h, b, err := events.EncodeFailed("", meta, d)
		if err != nil {
			t.Fatal(err)
		}
		return encoded{s, h, b}
	}
	bare := events.OutcomeMeta{ID: events.OutcomeIDForSequence("ROLECALL_TASKS", 17)}
	return []struct {
		name string
		enc  encoded
	}{
		{"resolved_casts", res(resolvedFor(t, fullTask, nil), testMeta("T-42"))},
		{"resolved_pack_defaults", res(resolvedFor(t, minimalTask, nil), testMeta(""))},
		{"resolved_external", res(resolvedFor(t, `{"task_id":"T-43","role":"external:house-bot","overrides":{"permissions":{"mode":"deny_all"}}}`, replacementProfile()), testMeta("T-43"))},
		{"failed_resolve", fail(&events.FailureData{
			TaskID: ptr("T-44"), Stage: resolve.StageResolve, Code: resolve.CodeModeConflict, Subject: ptr("slow"),
			Details: map[string]any{"modes": []string{"fast", "slow"}}, Message: `modes "fast" and "slow" conflict`,
		}, testMeta("T-44"))},
		{"failed_task_invalid", fail(&events.FailureData{
			TaskID: ptr("T-45"), Stage: resolve.StageDecode, Code: resolve.CodeTaskInvalid, Subject: ptr("overrides.model"),
			Details: map[string]any{"field": "overrides.model", "reason": "empty"}, Message: "overrides.model is empty",
		}, testMeta("T-45"))},
		{"failed_undecodable", fail(&events.FailureData{
			Code: resolve.CodeEventInvalid, Message: "structured event body is not valid JSON",
		}, bare)},
		{"failed_delivery_exhausted", fail(&events.FailureData{
			TaskID: ptr("T-46"), Stage: resolve.StageDeliver, Code: resolve.CodeDeliveryExhausted,
			Details: map[string]any{"stream": "ROLECALL_TASKS", "stream_seq": 18, "deliveries": 5},
			Message: "task reached max_deliver (5 deliveries) without an outcome",
		}, testMeta("T-46"))},
	}
}

// render shows an encoded outcome for review: subject, sorted headers,
// then the body indented (member order as encoded).
func render(t *testing.T, e encoded) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("subject: " + e.subject + "\n")
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range e.header {
			if !yield(k) {
				return
			}
		}
	}) {
		b.WriteString("header: " + k + ": " + strings.Join(e.header[k], ", ") + "\n")
	}
	b.WriteString("\n")
	v := jsontext.Value(bytes.Clone(e.body))
	if err := v.Indent(); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, e.body)
	}
	b.Write(v)
	b.WriteString("\n")
	return b.Bytes()
}

func TestOutcomeGolden(t *testing.T) {
	for _, tc := range outcomeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			got := render(t, tc.enc)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s (-want +got):\n%s", path, diff)
			}
		})
	}
}

// Every encoded outcome is a valid CloudEvent whose data validates
// against the schema its dataschema names.
func TestOutcomesMatchSchemas(t *testing.T) {
	for _, tc := range outcomeCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			e, err := events.DecodeOutcome(tc.enc.header, tc.enc.body)
			if err != nil {
				t.Fatal(err)
			}
			schema := strings.TrimPrefix(e.DataSchema(), events.DefaultDataSchemaBase)
			want := events.SchemaFailed
			if e.Type() == events.TypeSpecResolved {
				want = events.SchemaResolved
			}
			if schema != want {
				t.Fatalf("dataschema %q, want base + %s", e.DataSchema(), want)
			}
			if err := events.Validate(schema, e.Data()); err != nil {
				t.Errorf("data does not match %s: %v\n%s", schema, err, e.Data())
			}
		})
	}
}

func TestOutcomeAttributesAndHeaders(t *testing.T) {
	d := resolvedFor(t, fullTask, nil)
	subject, h, body, err := events.EncodeResolved("acme", testMeta("T-42"), d)
	if err != nil {
		t.Fatal(err)
	}
	if subject != "acme.specs.resolved.architect" {
		t.Errorf("subject = %q", subject)
	}
	wantH := nats.Header{
		"content-type": {events.ContentTypeCloudEventsJSON},
		"Nats-Msg-Id":  {events.OutcomeID(testSource, testID)},
		"traceparent":  {testTP},
		"tracestate":   {testTS},
	}
	if diff := cmp.Diff(wantH, h); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	e, err := events.DecodeOutcome(h, body)
	if err != nil {
		t.Fatal(err)
	}
	wantExt := map[string]any{"taskid": "T-42", "causationid": testID, "traceparent": testTP, "tracestate": testTS}
	if diff := cmp.Diff(wantExt, e.Extensions()); diff != "" {
		t.Errorf("extensions (-want +got):\n%s", diff)
	}
	if e.ID() != events.OutcomeID(testSource, testID) || e.Source() != "urn:rolecall:fleet-a" ||
		e.Subject() != "T-42" || !e.Time().Equal(testTime) || e.DataContentType() != events.ContentTypeJSON ||
		e.DataSchema() != events.DefaultDataSchemaBase+events.SchemaResolved {
		t.Errorf("attributes = %s", e.String())
	}
	got, err := events.DecodeResolvedData(e)
	if err != nil {
		t.Fatal(err)
	}
	want := d.ResolvedAgentSpec
	// Numbers in free-form mappings come back as float64, as in any JSON.
	want.ArtifactDefaults = map[string]any{"format": "markdown", "max_pages": float64(3)}
	if diff := cmp.Diff(want, got.ResolvedAgentSpec, cmp.FilterPath(func(p cmp.Path) bool {
		// Not part of the payload (json:"-"): kept only for the materializer.
		n := p.Last().String()
		return n == ".Role" || n == ".ModeDefs" || n == ".Directives"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("resolved data round trip (-want +got):\n%s", diff)
	}
	if got.TaskID != d.TaskID || got.SystemMessage != d.SystemMessage || got.InputsDigest != d.InputsDigest {
		t.Errorf("resolved data round trip lost task_id, system_message or inputs_digest")
	}
}

func TestOutcomeDefaultsAndOmissions(t *testing.T) {
	f := &events.FailureData{Code: resolve.CodeEventInvalid, Message: "bad"}
	subject, h, body, err := events.EncodeFailed("", events.OutcomeMeta{ID: "rc-x"}, f)
	if err != nil {
		t.Fatal(err)
	}
	if subject != "rolecall.specs.failed.event_invalid" {
		t.Errorf("subject = %q", subject)
	}
	if _, ok := h["traceparent"]; ok {
		t.Error("traceparent header without a trace context")
	}
	e, err := events.DecodeOutcome(h, body)
	if err != nil {
		t.Fatal(err)
	}
	if e.Source() != events.DefaultSource || e.Subject() != "" || !e.Time().IsZero() || len(e.Extensions()) != 0 {
		t.Errorf("attributes = %s", e.String())
	}
	got, err := events.DecodeFailureData(e)
	if err != nil {
		t.Fatal(err)
	}
	want := &events.FailureData{Stage: resolve.StageDecode, Code: resolve.CodeEventInvalid, Details: map[string]any{}, Message: "bad"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("failure data (-want +got):\n%s", diff)
	}
	if f.Details != nil || f.Stage != "" {
		t.Error("EncodeFailed modified its input")
	}
}

func TestEncodeRejects(t *testing.T) {
	good := resolvedFor(t, minimalTask, nil)
	bad := *good
	bad.Identity.Name = "a.b"
	cases := []struct {
		name string
		err  error
	}{
		{"resolved nil", second(events.EncodeResolved("", testMeta(""), nil))},
		{"resolved no id", second(events.EncodeResolved("", events.OutcomeMeta{}, good))},
		{"resolved bad identity", second(events.EncodeResolved("", testMeta(""), &bad))},
		{"resolved bad source", second(events.EncodeResolved("", events.OutcomeMeta{ID: "rc-1", Source: "my fleet"}, good))},
		{"failed nil", second(events.EncodeFailed("", testMeta(""), nil))},
		{"failed no code", second(events.EncodeFailed("", testMeta(""), &events.FailureData{}))},
		{"failed code with dot", second(events.EncodeFailed("", testMeta(""), &events.FailureData{Code: "a.b"}))},
	}
	for _, tc := range cases {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

func second(_ string, _ nats.Header, _ []byte, err error) error { return err }

func TestSubjects(t *testing.T) {
	cases := []struct{ got, want string }{
		{events.ResolvedSubject("", "architect"), "rolecall.specs.resolved.architect"},
		{events.ResolvedSubject("rolecall", "external:foo"), "rolecall.specs.resolved.external_foo"},
		{events.ResolvedSubject("acme.prod", "external:house-bot"), "acme.prod.specs.resolved.external_house-bot"},
		{events.FailedSubject("", resolve.CodeModeConflict), "rolecall.specs.failed.mode_conflict"},
		{events.FailedSubject("acme", resolve.CodeDeliveryExhausted), "acme.specs.failed.delivery_exhausted"},
		{events.TasksSubject("", "architect"), "rolecall.tasks.architect"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("subject %q, want %q", tc.got, tc.want)
		}
	}
	ext := resolvedFor(t, `{"task_id":"T","role":"external:house-bot"}`, replacementProfile())
	if s, _, _, err := events.EncodeResolved("", testMeta("T"), ext); err != nil || s != "rolecall.specs.resolved.external_house-bot" {
		t.Errorf("external subject = %q, %v", s, err)
	}
}

func TestDecodeOutcomeRejects(t *testing.T) {
	h, body := encode(t, minimalTask, false)
	_, err := events.DecodeOutcome(h, body)
	wantDecodeError(t, err, resolve.CodeEventInvalid, "type", events.ReasonUnexpectedEventType)

	_, err = events.DecodeOutcome(structuredHeader(), []byte(`{"specversion":"1.0","id":"x","source":"s","type":"`+events.TypeSpecFailed+`"}`))
	wantDecodeError(t, err, resolve.CodeEventInvalid, "data", events.ReasonMissing)

	// Binary outcomes (not what the worker writes) decode too.
	e, err := events.DecodeOutcome(nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-source": {"s"},
		"ce-type": {events.TypeSpecFailed}}, []byte(`{}`))
	if err != nil || e.Type() != events.TypeSpecFailed {
		t.Errorf("binary outcome: %v, %v", e, err)
	}
	if _, err := events.DecodeResolvedData(e); err == nil {
		t.Error("DecodeResolvedData accepted a failure event")
	}
}

func TestValidateSource(t *testing.T) {
	for _, s := range []string{"rolecall", "urn:rolecall:fleet-a", "https://example.com/fleet", "/fleet"} {
		if err := events.ValidateSource(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "my fleet", "a\nb", "https://x/é"} {
		if err := events.ValidateSource(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// The structured writer is held to sdk-go's: sdk-go parses every body
// into an event that validates, and its own writer (event.WriteJson)
// renders that event to the same bytes.
func TestStructuredBodiesMatchSDK(t *testing.T) {
	bodies := map[string][]byte{}
	for _, tc := range outcomeCases(t) {
		bodies[tc.name] = tc.enc.body
	}
	for _, data := range []string{minimalTask, fullTask} {
		_, body, err := events.EncodeTask(testSource, testID, []byte(data), testTP, testTS, false)
		if err != nil {
			t.Fatal(err)
		}
		bodies["task "+data[:20]] = body
	}
	for name, body := range bodies {
		var e event.Event
		if err := format.JSON.Unmarshal(body, &e); err != nil {
			t.Fatalf("%s: sdk-go cannot parse: %v", name, err)
		}
		if err := e.Validate(); err != nil {
			t.Errorf("%s: sdk-go rejects: %v", name, err)
		}
		var sdk bytes.Buffer
		if err := event.WriteJson(&e, &sdk); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(sdk.String(), string(body)); diff != "" {
			t.Errorf("%s: differs from sdk-go's rendering (-sdk +ours):\n%s", name, diff)
		}
	}
}
