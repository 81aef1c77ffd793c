package events_test

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/schematest"
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
			if err := schematest.Validate(schema, e.Data()); err != nil {
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

	// Binary data that is not JSON (a raw terminal escape, invalid UTF-8,
	// a cut-short object) is refused here, not by each reader later.
	for _, data := range []string{"\x1b[2J", `{"task_id":"T"`, "{\"a\":\"\xff\"}"} {
		_, err = events.DecodeOutcome(nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-source": {"s"},
			"ce-type": {events.TypeSpecFailed}}, []byte(data))
		wantDecodeError(t, err, resolve.CodeEventInvalid, "data", events.ReasonInvalidValue)
	}
}

func TestValidateSource(t *testing.T) {
	for _, s := range []string{"rolecall", "urn:rolecall:fleet-a", "https://example.com/fleet", "/fleet"} {
		if err := events.ValidateSource(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", "my fleet", "urn:my fleet", "urn:a\u202Eb", "a\nb", "https://x/é"} {
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

// checkOutcome encodes d and, when the encoder accepts it, checks what a
// reader gets back: a valid JSON body that DecodeOutcome reads as the
// event meta describes, carrying exactly d's encoding as its data, which
// decodes to d again (open mappings, whose numbers come back as float64,
// are compared as encoded). It returns the encoder's error.
func checkOutcome[D *events.ResolvedData | *events.FailureData](t *testing.T, meta events.OutcomeMeta, d D) error {
	t.Helper()
	var (
		h    nats.Header
		body []byte
		err  error
	)
	switch d := any(d).(type) {
	case *events.ResolvedData:
		_, h, body, err = events.EncodeResolved("", meta, d)
	case *events.FailureData:
		_, h, body, err = events.EncodeFailed("", meta, d)
	}
	if err != nil {
		return err
	}
	if !jsontext.Value(body).IsValid() {
		t.Fatalf("body is not valid JSON: %.2000q", body)
	}
	e, err := events.DecodeOutcome(h, body)
	if err != nil {
		t.Fatalf("DecodeOutcome: %v\n%.2000s", err, body)
	}
	if e.ID() != meta.ID || !e.Time().Equal(meta.Time) || e.Extensions()[events.ExtCausationID] != nonEmpty(meta.CausationID) {
		t.Errorf("attributes = %s", e.String())
	}
	var (
		sent, got any
		opaque    = cmp.FilterPath(func(p cmp.Path) bool {
			n := p.Last().String()
			// Open mappings, and what the payload leaves out (json:"-").
			return n == ".ArtifactDefaults" || n == ".Details" || n == ".Role" || n == ".ModeDefs" || n == ".Directives"
		}, cmp.Ignore())
	)
	switch d := any(d).(type) {
	case *events.ResolvedData:
		sent = d
		got, err = events.DecodeResolvedData(e)
	case *events.FailureData:
		// As EncodeFailed documents: nil details are {}, and the stage
		// defaults to the code's.
		f := *d
		if f.Details == nil {
			f.Details = map[string]any{}
		}
		if f.Stage == "" {
			f.Stage = f.Code.Stage()
		}
		sent = &f
		got, err = events.DecodeFailureData(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	want, err := events.MarshalData(sent)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e.Data(), want) {
		t.Fatalf("data differs from its encoding:\nsent    %.2000s\ncarried %.2000s", want, e.Data())
	}
	if diff := cmp.Diff(sent, got, opaque); diff != "" {
		t.Fatalf("data read back differs (-sent +read):\n%.4000s", diff)
	}
	return nil
}

func nonEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Strings the escaping rules treat differently, and invalid UTF-8, which
// the encoder must refuse wherever it appears.
var (
	trickyStrings = []string{
		"", "<script>alert('x') && y > z</script>",
		"quote \" backslash \\ slash / tab \t newline \n return \r feed \f back \b",
		"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x20\x7f",
		"ünïcode ✓ 日本語 🎉 \u0080\u009f \u00a0 \ufeff \ufffd \U0010ffff", "line\u2028separator\u2029paragraph",
	}
	invalidStrings = []string{"\xff", "tail \xc3", "surrogate \xed\xa0\x80 half", "overlong \xc0\x80", "too high \xf4\x90\x80\x80"}
)

func nested(depth int) map[string]any {
	m := map[string]any{"leaf": true}
	for range depth {
		m = map[string]any{"n": m}
	}
	return m
}

// TestOutcomeRoundTrip: outcomes with every kind of string in every free
// field, open values of many Go types, absent and empty lists, and deep
// nesting encode to bodies a reader gets the data back from; invalid
// UTF-8, NaN, cycles and values JSON cannot hold are refused.
func TestOutcomeRoundTrip(t *testing.T) {
	base := resolvedFor(t, fullTask, nil)
	with := func(f func(d *events.ResolvedData)) *events.ResolvedData {
		d := *base
		d.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Allow: map[string][]string{"Bash": {"git *"}, "Read": {}, "Write": nil}}
		f(&d)
		return &d
	}
	type custom struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	open := map[string]any{
		"floats": []any{0.0, math.Copysign(0, -1), 1.5, 1e21, 1e-7, math.MaxFloat64, math.SmallestNonzeroFloat64, float32(0.1)},
		"ints":   []any{int64(math.MinInt64), uint64(math.MaxUint64), int8(-8), uint16(60000)},
		"others": []any{custom{A: 1}, &custom{B: "b"}, map[string]int{"b": 2, "a": 1}, [2]bool{true, false}, time.Date(2026, 7, 9, 12, 30, 0, 5, time.UTC)},
		"nils":   []any{[]any(nil), map[string]any(nil), []string(nil), (*int)(nil)},
		"deep":   nested(100),
	}
	cases := []struct {
		name  string
		d     *events.ResolvedData
		fails bool
	}{
		{"casts", base, false},
		{"external", resolvedFor(t, `{"task_id":"T-43","role":"external:house-bot"}`, replacementProfile()), false},
		{"open values", with(func(d *events.ResolvedData) { d.ArtifactDefaults = open }), false},
		{"empty, not nil", with(func(d *events.ResolvedData) {
			d.Identity.Modes, d.Tools, d.PromptOverlays, d.Emits = []string{}, []string{}, []string{}, []string{}
			d.ArtifactDefaults, d.Diagnostics = map[string]any{}, []resolve.Diagnostic{}
		}), false},
		{"nil everywhere", with(func(d *events.ResolvedData) {
			d.Identity.Modes, d.Tools, d.PromptOverlays, d.Emits = nil, nil, nil, nil
			d.ArtifactDefaults, d.Diagnostics, d.Permissions, d.Effort, d.Timeout = nil, nil, nil, nil, nil
		}), false},
		{"NaN", with(func(d *events.ResolvedData) { d.ArtifactDefaults = map[string]any{"x": math.NaN()} }), true},
		{"cycle", with(func(d *events.ResolvedData) {
			m := map[string]any{}
			m["self"] = m
			d.ArtifactDefaults = m
		}), true},
		{"channel", with(func(d *events.ResolvedData) { d.ArtifactDefaults = map[string]any{"c": make(chan int)} }), true},
	}
	for i, s := range append(slices.Clone(trickyStrings), invalidStrings...) {
		invalid := i >= len(trickyStrings)
		cases = append(cases,
			struct {
				name  string
				d     *events.ResolvedData
				fails bool
			}{fmt.Sprintf("string %d in every free field", i), with(func(d *events.ResolvedData) {
				d.TaskID, d.Model, d.PromptBody, d.SystemMessage, d.InputsDigest = s, s, s, s, s
				d.Pack = resolve.PackRef{Name: s, Digest: s}
				d.Identity.Modes, d.Tools, d.PromptOverlays, d.Emits = []string{s}, []string{s, s}, []string{s}, []string{s}
				d.Effort = &s
				d.Diagnostics = []resolve.Diagnostic{{Code: s, Message: s}}
				d.Sources.Model, d.Sources.Prompt = s, s
				d.ArtifactDefaults = map[string]any{s: s, "x" + s: []any{s, map[string]any{s: s}}}
				d.Permissions.Allow = map[string][]string{s: {s}, "x" + s: nil}
			}), invalid},
			struct {
				name  string
				d     *events.ResolvedData
				fails bool
			}{fmt.Sprintf("string %d in the prompt", i), with(func(d *events.ResolvedData) {
				d.PromptBody = strings.Repeat("A line of prose. ", 100) + s
				d.SystemMessage = "You are part of rolecall.\n\n" + d.PromptBody
			}), invalid},
		)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := checkOutcome(t, testMeta("T-42"), tc.d); (err != nil) != tc.fails {
				t.Errorf("error %v, want failure %v", err, tc.fails)
			}
			f := &events.FailureData{TaskID: &tc.d.TaskID, Code: resolve.CodeTaskInvalid, Subject: &tc.d.Model,
				Details: map[string]any{"value": tc.d.Model, "open": tc.d.ArtifactDefaults}, Message: tc.d.PromptBody}
			if err := checkOutcome(t, testMeta("T-42"), f); (err != nil) != tc.fails {
				t.Errorf("failure outcome: error %v, want failure %v", err, tc.fails)
			}
		})
	}
	// Invalid UTF-8 in what the outcome says about itself is refused too.
	for _, meta := range []events.OutcomeMeta{
		{ID: "rc-\xff"}, {ID: "rc-1", TaskID: "T-\xff"}, {ID: "rc-1", CausationID: "\xc3"},
		{ID: "rc-1", DataSchemaBase: "https://x/\xe2\x82"}, {ID: "rc-1", TraceParent: testTP, TraceState: "\xff"},
	} {
		if err := checkOutcome(t, meta, base); err == nil {
			t.Errorf("meta %+v accepted", meta)
		}
	}
}

// FuzzEncodeOutcome feeds strings to the free-text fields of a resolved
// and a failure outcome's data (prompt, preamble, model, a map key and
// value, the task id) and bits to a float: each outcome is refused
// (invalid UTF-8, NaN or infinity) or round-trips (checkOutcome).
func FuzzEncodeOutcome(f *testing.F) {
	f.Add("You are the architect.\n\nDesign <systems> & \"interfaces\".", "You are part of rolecall.\n\n", "claude-opus-4-1", "format", "markdown", "T-42", uint64(0x4008000000000000))
	f.Add(strings.Repeat("A line of prose.\n", 200), "", "", "", "", "", uint64(0x8000000000000000))
	f.Add("ünïcode ✓\u2028\u2029\ufffd", "pre\xe2", "\x00\x1f\x7f", "é", "e\u0301", "T\"1\"", uint64(0x7ff8000000000001))
	f.Add("\xed\xa0\x80", "\\", "<>&", "\xff", "12345678\"", "\t", uint64(1))
	base := resolvedFor(f, fullTask, nil)
	f.Fuzz(func(t *testing.T, prompt, preamble, model, key, value, taskID string, bits uint64) {
		num := math.Float64frombits(bits)
		d := *base
		d.TaskID, d.Model, d.PromptBody, d.SystemMessage = taskID, model, prompt, preamble+prompt
		d.Tools = []string{key, value}
		d.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Allow: map[string][]string{key: {value}, value: nil}}
		d.ArtifactDefaults = map[string]any{key: value, "f": num, "n": []any{value, map[string]any{value: key}}}
		d.Diagnostics = []resolve.Diagnostic{{Code: key, Message: value}}
		// What the outcome says about itself is the worker's (checked
		// ids, no control characters); the data is anything.
		meta := testMeta("T-42")
		// Refused: NaN, infinity, or invalid UTF-8 in a string the data holds.
		refused := func(strs ...string) bool {
			return math.IsNaN(num) || math.IsInf(num, 0) || slices.ContainsFunc(strs, func(s string) bool { return !utf8.ValidString(s) })
		}
		if err := checkOutcome(t, meta, &d); (err != nil) != refused(prompt, preamble, model, key, value, taskID) {
			t.Fatalf("error %v, want refused %v", err, !(err != nil))
		}
		fd := &events.FailureData{TaskID: &taskID, Code: resolve.CodeTaskInvalid, Subject: &key,
			Details: map[string]any{key: value, "prompt": prompt, "f": num}, Message: preamble + prompt}
		if err := checkOutcome(t, meta, fd); (err != nil) != refused(prompt, preamble, key, value, taskID) {
			t.Fatalf("failure outcome: error %v, want refused %v", err, !(err != nil))
		}
	})
}
