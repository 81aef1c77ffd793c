package events_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// The hand-written outcome encoder must write the reflection encoder's
// bytes, and fail where it fails. These tests compare the two (the
// reflection path is kept, unexported, as the reference) on a table, on
// generated values and in FuzzAppendMatchesReflection. They also check that
// the hand-written encoder did the work itself (FastOnly forms) wherever the
// reference succeeds, so the comparison cannot pass by deferring.

type appendFunc[D any] func(dst []byte, prefix string, meta events.OutcomeMeta, data D) (string, nats.Header, []byte, error)

type encoders[D any] struct {
	public, reference, fastOnly appendFunc[D]
}

var (
	resolvedEncoders = encoders[*events.ResolvedData]{events.AppendResolved, events.AppendResolvedReflect, events.AppendResolvedFastOnly}
	failedEncoders   = encoders[*events.FailureData]{events.AppendFailed, events.AppendFailedReflect, events.AppendFailedFastOnly}
)

// mayDefer marks values the fast encoder is allowed to hand over although
// the reference encodes them (nesting deeper than it follows, a large
// sub-value of an unlisted type).
type mayDefer bool

// tb is what checkSame needs of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// checkSame fails t unless the public encoder and the reference give the
// same subject, headers, body (into nil and into a dirty buffer) and
// error, and the fast encoder alone succeeds wherever the reference does.
func checkSame[D any](t tb, enc encoders[D], prefix string, meta events.OutcomeMeta, d D, deferOK mayDefer) (refErr error) {
	t.Helper()
	wantSubj, wantH, want, wantErr := enc.reference(nil, prefix, meta, d)
	dirty := bytes.Repeat([]byte{'x'}, len(want)+64)
	for _, dst := range [][]byte{nil, dirty} {
		subj, h, got, err := enc.public(dst, prefix, meta, d)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("error %v, reference %v", err, wantErr)
		}
		if subj != wantSubj {
			t.Errorf("subject %q, reference %q", subj, wantSubj)
		}
		if diff := cmp.Diff(wantH, h); diff != "" {
			t.Errorf("headers (-reference +fast):\n%s", diff)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("body differs from the reference at byte %d:\nfast: %s\nref:  %s", firstDiff(got, want), clip(got, want), clip(want, got))
		}
	}
	_, _, fast, err := enc.fastOnly(nil, prefix, meta, d)
	switch {
	case errors.Is(err, events.ErrFastDeferred):
		if wantErr == nil && !deferOK {
			t.Errorf("the fast encoder deferred a value the reference encodes")
		}
	case err != nil:
		if wantErr == nil || err.Error() != wantErr.Error() {
			t.Errorf("fast-only error %v, reference %v", err, wantErr)
		}
	case wantErr != nil:
		// The public form would have published what the reference refuses.
		t.Errorf("the fast encoder accepted what the reference refuses (%v):\n%s", wantErr, fast)
	case !bytes.Equal(fast, want):
		t.Errorf("fast-only body differs from the reference at byte %d", firstDiff(fast, want))
	}
	return wantErr
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// clip shows a's bytes around the first difference from b.
func clip(a, b []byte) string {
	i := firstDiff(a, b)
	lo, hi := max(0, i-60), min(len(a), i+60)
	return fmt.Sprintf("…%q…", a[lo:hi])
}

// checkResolvedAPI checks what the encoders share outside the body
// against independent expectations: the role-token check is
// resolve.ParseRoleToken's and the subject is ResolvedSubject's.
func checkResolvedAPI(t *testing.T, prefix string, meta events.OutcomeMeta, d *events.ResolvedData) {
	t.Helper()
	token := d.Identity.Name
	if d.Identity.Kind == resolve.IdentityExternal {
		token = resolve.ExternalPrefix + token
	}
	_, perr := resolve.ParseRoleToken(token)
	subj, h, _, err := events.AppendResolved(nil, prefix, meta, d)
	switch {
	case perr != nil:
		if err == nil || !strings.HasSuffix(err.Error(), perr.Error()) || !strings.Contains(err.Error(), fmt.Sprintf("%q", token)) {
			t.Errorf("token %q: error %v, want one ending in %v", token, err, perr)
		}
		return
	case err != nil:
		if strings.Contains(err.Error(), "is not a role token") {
			t.Errorf("token %q: error %v, but ParseRoleToken accepts it", token, err)
		}
		return // otherwise the body's error, compared by checkSame
	}
	if want := events.ResolvedSubject(prefix, token); subj != want {
		t.Errorf("subject %q, want %q", subj, want)
	}
	wantH := nats.Header{"content-type": {events.ContentTypeCloudEventsJSON}, "Nats-Msg-Id": {meta.ID}}
	if meta.TraceParent != "" {
		wantH["traceparent"] = []string{meta.TraceParent}
		if meta.TraceState != "" {
			wantH["tracestate"] = []string{meta.TraceState}
		}
	}
	if diff := cmp.Diff(wantH, h); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

// Strings the escaping rules treat differently.
var trickyStrings = []string{
	"",
	"plain ascii text, long enough to take the eight-byte path",
	"<script>alert('x') && y > z</script>",
	"quote \" backslash \\ slash / tab \t newline \n return \r feed \f back \b",
	"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x20\x7f",
	"ünïcode ✓ 日本語 🎉 \u0080\u009f \u00a0 \ufeff \ufffd \U0010ffff",
	"line\u2028separator\u2029paragraph",
	"e\u0301 é Z a ` ~",
	"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\\\\\\\\\\\\\\\\",
	"1234567\n1234567\"12345678\\1234567é1234567\x1f",
}

// Invalid UTF-8, which both encoders must refuse.
var invalidStrings = []string{
	"\xff",
	"tail \xc3",
	"surrogate \xed\xa0\x80 half",
	"overlong \xc0\x80",
	"too high \xf4\x90\x80\x80",
	"12345678\x80",
	strings.Repeat("a", 100) + "\xfe" + strings.Repeat("b", 100),
}

func longPrompt(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(trickyStrings[i%len(trickyStrings)])
		b.WriteString("\n\nA line of prose that needs no escaping at all, of a usual length.")
	}
	return b.String()
}

// metas are outcome metadata; those named "invalid …" make every
// outcome fail.
func metas() map[string]events.OutcomeMeta {
	return map[string]events.OutcomeMeta{
		"full":       testMeta("T-42"),
		"bare":       {ID: "rc-1"},
		"odd source": {ID: "rc-8", Source: "urn:rolecall:fleet-ü"},
		"odd": {
			ID: "rc-\"quoted\"-ünï-<&>", Source: "urn:rolecall:fleet-a", TaskID: "T\u2028\"1\"",
			CausationID: "c\\1", TraceParent: testTP, TraceState: "k=v,\"w\"=x",
			Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 5*3600)), DataSchemaBase: "https://example.com/ß/",
		},
		"state without parent": {ID: "rc-2", TraceState: "orphan", Time: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		"far future":           {ID: "rc-3", Time: time.Date(12345, 6, 7, 8, 9, 10, 11, time.UTC)},
		"invalid task id":      {ID: "rc-4", TaskID: "T-\xff"},
		"invalid id":           {ID: "rc-\xff"},
		"invalid causation":    {ID: "rc-5", CausationID: "\xc3"},
		"invalid schema base":  {ID: "rc-6", DataSchemaBase: "https://x/\xe2\x82"},
		"invalid trace state":  {ID: "rc-7", TraceParent: testTP, TraceState: "\xff"},
		"invalid source":       {ID: "rc-9", Source: "my fleet"},
	}
}

// openValues holds the types open-typed fields carry (decoded JSON, the
// resolver's details) and some others that go to the reflection encoder.
func openValues() map[string]any {
	type custom struct {
		A int    `json:"a"`
		B string `json:"b,omitempty"`
	}
	return map[string]any{
		"nil": nil, "true": true, "false": false, "string": "x<y>\n",
		"floats": []any{0.0, math.Copysign(0, -1), 1.0, -1.5, 0.1, 1e20, 1e21, 123456789012345678901.0, 1e-6, 1e-7,
			-2.5e-10, 5e300, math.MaxFloat64, math.SmallestNonzeroFloat64, 1 / 3.0, 100, 1e6, 12345678.9},
		"ints":    []any{0, -1, int64(math.MinInt64), int64(math.MaxInt64), int32(-7), uint64(math.MaxUint64), uint32(4000000000), uint(9)},
		"nested":  map[string]any{"z": map[string]any{}, "a": []any{}, "m": map[string]any{"k": []any{map[string]any{"x": 1.5}}}},
		"nils":    []any{[]any(nil), map[string]any(nil), []string(nil), map[string]string(nil), (*int)(nil)},
		"strings": []string{"a", "", "\"b\""},
		"empty":   []string{},
		"others": []any{float32(0.1), int8(-8), int16(300), uint8(200), uint16(60000), custom{A: 1},
			&custom{B: "b"}, map[string]int{"b": 2, "a": 1}, []int{3, 1}, resolve.Code("mode_conflict"), [2]bool{true, false},
			time.Date(2026, 7, 9, 12, 30, 0, 5, time.UTC), json5{}},
		"keys":    manyKeys(40),
		"unicode": map[string]any{"é": 1, "e\u0301": 2, "Z": 3, "a": 4, "": 5, " ": 6, "\u2028": 7, "日": 8, "\U0001F389": 9},
	}
}

// json5 marshals itself.
type json5 struct{}

func (json5) MarshalJSON() ([]byte, error) { return []byte(`{"b":1, "a":[ 2 ]}`), nil }

func manyKeys(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("k%02d-%c", (i*7)%n, 'a'+i%26)] = i
	}
	return m
}

func nested(depth int) map[string]any {
	m := map[string]any{"leaf": true}
	for range depth {
		m = map[string]any{"n": m}
	}
	return m
}

func fullResolved(t testing.TB) *events.ResolvedData {
	d := *resolvedFor(t, fullTask, nil)
	d.Identity.Modes = []string{"systematic", "premortem", "\"odd\""}
	d.Effort = ptr("high")
	d.Timeout = ptr(-600)
	d.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionRules,
		Allow:    map[string][]string{"Bash": {"git *", "ls"}, "Read": {}, "Write": nil, "é": {"\u2028"}},
		Deny:     map[string][]string{},
		Escalate: manyLists(20),
	}
	d.Diagnostics = []resolve.Diagnostic{{Code: resolve.DiagnosticLegacyProfileReplacement, Message: "legacy <profile>"}, {}}
	d.ArtifactDefaults = openValues()
	d.Sources.Identity = "casts:\"architect\""
	return &d
}

func manyLists(n int) map[string][]string {
	m := map[string][]string{}
	for i := range n {
		m[fmt.Sprintf("tool-%d", (i*13)%n)] = []string{fmt.Sprint(i)}
	}
	return m
}

// outcomeCase is a table entry: fails says the reference refuses it.
type outcomeCase[D any] struct {
	name    string
	d       D
	fails   bool
	deferOK mayDefer
}

func resolvedCases(t *testing.T) []outcomeCase[*events.ResolvedData] {
	type rc = outcomeCase[*events.ResolvedData]
	with := func(f func(d *events.ResolvedData)) *events.ResolvedData {
		d := fullResolved(t)
		f(d)
		return d
	}
	cases := []rc{
		{"casts", resolvedFor(t, fullTask, nil), false, false},
		{"pack defaults", resolvedFor(t, minimalTask, nil), false, false},
		{"external", resolvedFor(t, `{"task_id":"T-43","role":"external:house-bot","overrides":{"permissions":{"mode":"deny_all"}}}`, replacementProfile()), false, false},
		{"every field", fullResolved(t), false, false},
		{"zero", &events.ResolvedData{}, true, false},
		{"zero with a name", &events.ResolvedData{ResolvedAgentSpec: resolve.ResolvedAgentSpec{Identity: resolve.Identity{Name: "a"}}}, false, false},
		{"empty, not nil", with(func(d *events.ResolvedData) {
			d.Identity.Modes, d.Tools, d.PromptOverlays, d.Emits = []string{}, []string{}, []string{}, []string{}
			d.ArtifactDefaults, d.Diagnostics = map[string]any{}, []resolve.Diagnostic{}
			d.Permissions = &resolve.PermissionPolicy{Allow: map[string][]string{}, Deny: map[string][]string{}, Escalate: map[string][]string{}}
		}), false, false},
		{"nil everywhere", with(func(d *events.ResolvedData) {
			d.Identity.Modes, d.Tools, d.PromptOverlays, d.Emits = nil, nil, nil, nil
			d.ArtifactDefaults, d.Diagnostics, d.Permissions, d.Effort, d.Timeout = nil, nil, nil, nil, nil
		}), false, false},
		{"nil rule maps", with(func(d *events.ResolvedData) {
			d.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionDenyAll}
		}), false, false},
		{"external kind, prefixed name", with(func(d *events.ResolvedData) {
			d.Identity.Kind, d.Identity.Name = resolve.IdentityExternal, "external:x"
		}), true, false},
		{"external kind", with(func(d *events.ResolvedData) { d.Identity.Kind, d.Identity.Name = resolve.IdentityExternal, "house-bot" }), false, false},
		{"casts kind, external name", with(func(d *events.ResolvedData) { d.Identity.Name = "external:house-bot" }), false, false},
		{"casts kind, bad name", with(func(d *events.ResolvedData) { d.Identity.Name = "Bad Name" }), true, false},
		{"external, bad name", with(func(d *events.ResolvedData) { d.Identity.Kind, d.Identity.Name = resolve.IdentityExternal, "" }), true, false},
		{"big prompt, system message = preamble + prompt", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(100 << 10)
			d.SystemMessage = "You are part of rolecall.\n\n" + d.PromptBody
		}), false, false},
		{"system message = prompt", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(4 << 10)
			d.SystemMessage = d.PromptBody
		}), false, false},
		{"system message = prompt, copied", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(4 << 10)
			d.SystemMessage = strings.Clone(d.PromptBody)
		}), false, false},
		{"system message = prompt + suffix", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(4 << 10)
			d.SystemMessage = d.PromptBody + "\n\nsuffix"
		}), false, false},
		{"tail", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(4 << 10)
			d.SystemMessage = "You are part of rolecall.\n\n" + d.PromptBody
			d.PromptTail = "Fix ticket \"T-7\" <now>.\n- then ünïcode ✓\u2028"
		}), false, false},
		{"tail, short prompt", with(func(d *events.ResolvedData) {
			d.PromptBody = "short"
			d.SystemMessage = "pre\n\n" + d.PromptBody
			d.PromptTail = "x"
		}), false, false},
		{"tail, system message = prompt + suffix", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(300)
			d.SystemMessage = d.PromptBody + "\n\nsuffix"
			d.PromptTail = "Fix ticket 7."
		}), false, false},
		{"invalid tail", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(300)
			d.SystemMessage = d.PromptBody
			d.PromptTail = "\x82 ticket"
		}), true, false},
		{"short prompt suffix", with(func(d *events.ResolvedData) {
			d.PromptBody = "short \"prompt\""
			d.SystemMessage = "pre\n\n" + d.PromptBody
		}), false, false},
		{"multi-byte rune before the prompt", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(200)
			d.SystemMessage = "préambule ✓" + d.PromptBody
		}), false, false},
		{"invalid preamble", with(func(d *events.ResolvedData) {
			d.PromptBody = longPrompt(200)
			d.SystemMessage = "pre\xe2\x82" + d.PromptBody
		}), true, false},
		{"invalid prompt, valid system message", with(func(d *events.ResolvedData) {
			d.PromptBody = "\x82\xac" + longPrompt(200)
			d.SystemMessage = "\xe2" + d.PromptBody // "€" + the rest: valid
		}), true, false},
		{"NaN", with(func(d *events.ResolvedData) { d.ArtifactDefaults = map[string]any{"x": math.NaN()} }), true, false},
		{"Inf", with(func(d *events.ResolvedData) { d.ArtifactDefaults = map[string]any{"x": []any{math.Inf(-1)}} }), true, false},
		{"deep", with(func(d *events.ResolvedData) { d.ArtifactDefaults = nested(100) }), false, true},
		{"deep, under the limit", with(func(d *events.ResolvedData) { d.ArtifactDefaults = nested(60) }), false, false},
		{"deep array", with(func(d *events.ResolvedData) {
			var v any = "leaf"
			for range 100 {
				v = []any{v}
			}
			d.ArtifactDefaults = map[string]any{"a": v}
		}), false, true},
		{"large sub-value", with(func(d *events.ResolvedData) { d.ArtifactDefaults = map[string]any{"a": make([]int, 5000)} }), false, true},
		{"cycle", with(func(d *events.ResolvedData) {
			m := map[string]any{}
			m["self"] = m
			d.ArtifactDefaults = m
		}), true, false},
		{"unencodable sub-value", with(func(d *events.ResolvedData) { d.ArtifactDefaults = map[string]any{"c": make(chan int)} }), true, false},
		{"duration", with(func(d *events.ResolvedData) { d.ArtifactDefaults = map[string]any{"c": time.Second} }), true, false},
		{"invalid sub-value string", with(func(d *events.ResolvedData) {
			d.ArtifactDefaults = map[string]any{"c": map[string]int{"\xff": 1}}
		}), true, false},
	}
	for i, s := range append(trickyStrings, invalidStrings...) {
		invalid := i >= len(trickyStrings)
		cases = append(cases,
			rc{fmt.Sprintf("string %d in every free field", i), with(func(d *events.ResolvedData) {
				d.TaskID, d.Model, d.PromptBody, d.SystemMessage, d.InputsDigest = s, s, s, s, s
				d.Pack = resolve.PackRef{Name: s, Digest: s}
				d.Identity.Modes, d.Tools, d.PromptOverlays, d.Emits = []string{s}, []string{s, s}, []string{s}, []string{s}
				d.Effort = &s
				d.PromptDisposition, d.Identity.Kind = resolve.PromptDisposition(s), resolve.IdentityKind(s)
				d.Diagnostics = []resolve.Diagnostic{{Code: s, Message: s}}
				d.Sources = resolve.Sources{Identity: s, Pack: s, Model: s, Effort: s, Modes: s, Tools: s, Permissions: s, Yolo: s,
					Bypass: s, FastMode: s, LionSystem: s, Prompt: s, ArtifactDefaults: s, Timeout: s, Active: s}
				d.Permissions.Mode = resolve.PermissionMode(s)
			}), invalid, false},
			rc{fmt.Sprintf("string %d as key and value", i), with(func(d *events.ResolvedData) {
				d.ArtifactDefaults = map[string]any{s: s, "x" + s: []any{s, map[string]any{s: s}}, "y": []string{s}}
				d.Permissions.Allow = map[string][]string{s: {s}, "x" + s: nil}
			}), invalid, false},
			rc{fmt.Sprintf("string %d alone in the prompt", i), with(func(d *events.ResolvedData) {
				d.PromptBody = longPrompt(300) + s
				d.SystemMessage = "pre\n\n" + d.PromptBody
			}), invalid, false},
			rc{fmt.Sprintf("string %d alone in the preamble", i), with(func(d *events.ResolvedData) {
				d.PromptBody = longPrompt(300)
				d.SystemMessage = s + d.PromptBody
			}), invalid, false},
		)
	}
	return cases
}

func failedCases() []outcomeCase[*events.FailureData] {
	type fc = outcomeCase[*events.FailureData]
	cases := []fc{
		{"resolve", &events.FailureData{TaskID: ptr("T-44"), Stage: resolve.StageResolve, Code: resolve.CodeModeConflict,
			Subject: ptr("slow"), Details: map[string]any{"modes": []string{"fast", "slow"}}, Message: "conflict"}, false, false},
		{"bare", &events.FailureData{Code: resolve.CodeEventInvalid, Message: "bad"}, false, false},
		{"empty details", &events.FailureData{Code: resolve.CodeEventInvalid, Details: map[string]any{}}, false, false},
		{"delivery", &events.FailureData{TaskID: ptr("T-46"), Stage: resolve.StageDeliver, Code: resolve.CodeDeliveryExhausted,
			Details: map[string]any{"stream": "ROLECALL_TASKS", "stream_seq": uint64(18), "deliveries": 5, "max_payload": int64(1 << 20)}}, false, false},
		{"open values", &events.FailureData{Code: resolve.CodeTaskInvalid, Details: openValues(), Message: "m"}, false, false},
		{"no code", &events.FailureData{}, true, false},
		{"bad code", &events.FailureData{Code: "A.b"}, true, false},
		{"unknown code", &events.FailureData{Code: "some_new_code"}, false, false},
		{"deep details", &events.FailureData{Code: resolve.CodeTaskInvalid, Details: nested(70)}, false, true},
		{"NaN detail", &events.FailureData{Code: resolve.CodeTaskInvalid, Details: map[string]any{"x": math.NaN()}}, true, false},
	}
	for i, s := range append(trickyStrings, invalidStrings...) {
		cases = append(cases, fc{fmt.Sprintf("string %d", i), &events.FailureData{
			TaskID: &s, Stage: resolve.Stage(s), Code: resolve.CodeTaskInvalid, Subject: &s,
			Details: map[string]any{s: s, "reason": s}, Message: s,
		}, i >= len(trickyStrings), false})
	}
	return cases
}

func TestFastEncoderMatchesReflection(t *testing.T) {
	ms := metas()
	wantFail := func(t *testing.T, fails bool, meta string, err error) {
		if fails = fails || strings.HasPrefix(meta, "invalid"); (err != nil) != fails {
			t.Errorf("reference error %v, want failure %v", err, fails)
		}
	}
	for _, c := range resolvedCases(t) {
		t.Run("resolved/"+c.name, func(t *testing.T) {
			for mn, m := range ms {
				for _, prefix := range []string{"", "acme.prod"} {
					t.Run(mn+"/"+prefix, func(t *testing.T) {
						wantFail(t, c.fails, mn, checkSame(t, resolvedEncoders, prefix, m, c.d, c.deferOK))
						checkResolvedAPI(t, prefix, m, c.d)
					})
				}
			}
		})
	}
	for _, c := range failedCases() {
		t.Run("failed/"+c.name, func(t *testing.T) {
			for mn, m := range ms {
				t.Run(mn, func(t *testing.T) { wantFail(t, c.fails, mn, checkSame(t, failedEncoders, "", m, c.d, c.deferOK)) })
			}
		})
	}
}

// TestPromptTailIsComplete: an outcome whose prompt's last block is kept
// apart (PromptTail) encodes as Complete's result, which folds it in, and
// Complete leaves its receiver alone.
func TestPromptTailIsComplete(t *testing.T) {
	tails := 0
	for _, c := range resolvedCases(t) {
		if c.d.PromptTail == "" {
			if c.d.Complete() != c.d {
				t.Errorf("%s: Complete copied data without a tail", c.name)
			}
			continue
		}
		tails++
		t.Run(c.name, func(t *testing.T) {
			before := *c.d
			full := c.d.Complete()
			if diff := cmp.Diff(before, *c.d); diff != "" {
				t.Fatalf("Complete changed its receiver (-before +after):\n%s", diff)
			}
			if want := before.PromptBody + "\n\n" + before.PromptTail; full.PromptBody != want || full.PromptTail != "" ||
				full.SystemMessage != before.SystemMessage+"\n\n"+before.PromptTail {
				t.Fatalf("Complete gave body %q, message %q, tail %q", full.PromptBody, full.SystemMessage, full.PromptTail)
			}
			meta := testMeta("T-1")
			_, _, got, err := events.AppendResolved(nil, "", meta, c.d)
			_, _, want, wantErr := events.AppendResolved(nil, "", meta, full)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("error %v, Complete's %v", err, wantErr)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("body differs from Complete's at byte %d:\ntail: %s\nfull: %s", firstDiff(got, want), clip(got, want), clip(want, got))
			}
		})
	}
	if tails < 3 {
		t.Fatalf("only %d cases keep a tail", tails)
	}
}

// TestFastEncoderDefers: deferring is what keeps the table's "deep" and
// "large" cases equal, so check that it happens (and nowhere else above).
func TestFastEncoderDefers(t *testing.T) {
	for _, c := range resolvedCases(t) {
		_, _, _, refErr := events.AppendResolvedReflect(nil, "", testMeta(""), c.d)
		_, _, _, err := events.AppendResolvedFastOnly(nil, "", testMeta(""), c.d)
		if got := errors.Is(err, events.ErrFastDeferred) && refErr == nil; got != bool(c.deferOK) {
			t.Errorf("%s: deferred an encodable value = %v, want %v", c.name, got, c.deferOK)
		}
	}
}

// TestQuoteMatchesLibrary: every byte alone and between runs of plain text
// (at each offset within the 8-byte words), and runes across the planes.
func TestQuoteMatchesLibrary(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, werr := jsontext.AppendQuote(nil, s)
		got, ok := events.QuoteFast(s)
		if ok != (werr == nil) || ok && !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s (ok %v), library %s (%v)", s, got, ok, want, werr)
		}
	}
	for c := range 256 {
		for pad := range 17 {
			p := strings.Repeat("a", pad)
			check(p + string(rune(c)))
			check(p + string([]byte{byte(c)}) + p)
			check(string([]byte{byte(c), byte(c)}) + p + "\"")
		}
	}
	for r := rune(0); r <= utf8Max; r += 97 {
		check("abcdefg" + string(r) + "hijklmnopq")
	}
	for _, r := range []rune{0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfffd, 0xfffe, 0xffff, 0x10000, 0x10ffff, 0x2028, 0x2029} {
		check(string(r))
		check("12345678" + string(r) + "12345678")
	}
	for _, s := range append(trickyStrings, invalidStrings...) {
		check(s)
		check(strings.Repeat(s, 9))
	}
}

const utf8Max = 0x10ffff

// TestOpenValuesMatchLibrary: open-typed values, floats in particular, as
// MarshalData writes them.
func TestOpenValuesMatchLibrary(t *testing.T) {
	check := func(t *rapid.T, v any) {
		want, werr := events.MarshalData(v)
		got, ok := events.EncodeValueFast(v)
		if werr == nil && !ok || ok && werr != nil || ok && !bytes.Equal(got, want) {
			t.Fatalf("%#v: got %s (ok %v), library %s (%v)", v, got, ok, want, werr)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		bits := rapid.Uint64().Draw(t, "bits")
		check(t, math.Float64frombits(bits))
		f := rapid.Float64().Draw(t, "f")
		check(t, f)
		check(t, []any{-f, f / 1e10, f * 1e10, math.Trunc(f), float64(int64(f))})
		check(t, rapid.Int64().Draw(t, "i"))
		check(t, drawOpen(t, "v", 3))
	})
}

// TestFastEncoderProperty compares the encoders on generated outcomes.
func TestFastEncoderProperty(t *testing.T) {
	var runs, encoded int
	rapid.Check(t, func(rt *rapid.T) {
		meta := drawMeta(rt)
		prefix := rapid.SampledFrom([]string{"", "acme"}).Draw(rt, "prefix")
		var err error
		if rapid.Bool().Draw(rt, "failed") {
			err = checkSame(rt, failedEncoders, prefix, meta, drawFailure(rt), false)
		} else {
			err = checkSame(rt, resolvedEncoders, prefix, meta, drawResolved(rt), false)
		}
		runs++
		if err == nil {
			encoded++
		}
	})
	// Invalid inputs are drawn rarely so that most outcomes are compared
	// byte for byte, not just error for error.
	if encoded*2 < runs {
		t.Errorf("only %d of %d generated outcomes were encodable", encoded, runs)
	}
}

// rare is true for about one draw in n (rapid favours the small and the
// extreme values of a range, so the rare one is in the middle).
func rare(t *rapid.T, label string, n int) bool {
	return rapid.IntRange(0, n).Draw(t, label) == n/2+1
}

// drawString leans to plain text but mixes in every kind of character;
// invalid UTF-8 is rare, so that most outcomes get all the way through.
func drawString(t *rapid.T, label string) string {
	if rare(t, label+".invalid", 150) {
		if rapid.Bool().Draw(t, label+".bytes") {
			return string(rapid.SliceOf(rapid.Byte()).Draw(t, label))
		}
		return rapid.SampledFrom(invalidStrings).Draw(t, label)
	}
	switch k := rapid.IntRange(0, 99).Draw(t, label+".kind"); {
	case k < 25:
		return rapid.SampledFrom([]string{"", "architect", "claude-opus-4-1", "T-42", "casts", "task", "Read", "sha256:84fe"}).Draw(t, label)
	case k < 45:
		return rapid.SampledFrom(trickyStrings).Draw(t, label)
	case k < 65:
		return rapid.String().Draw(t, label)
	case k < 80:
		special := []rune{'"', '\\', '\n', '\t', 0, 0x1f, 0x7f, '<', '>', '&', 0x2028, 0x2029, 0xfffd, 'é', '日', 0x1f389, 'a', ' '}
		return rapid.StringOf(rapid.SampledFrom(special)).Draw(t, label)
	case k < 90:
		return strings.Repeat(rapid.SampledFrom(trickyStrings).Draw(t, label+".unit"), rapid.IntRange(1, 200).Draw(t, label+".n"))
	default:
		return longPrompt(rapid.IntRange(0, 5000).Draw(t, label+".len"))
	}
}

func drawStrings(t *rapid.T, label string) []string {
	switch rapid.IntRange(0, 3).Draw(t, label+".shape") {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	n := rapid.IntRange(1, 4).Draw(t, label+".n")
	out := make([]string, n)
	for i := range out {
		out[i] = drawString(t, fmt.Sprintf("%s[%d]", label, i))
	}
	return out
}

func drawStringPtr(t *rapid.T, label string) *string {
	if rapid.Bool().Draw(t, label+".set") {
		return ptr(drawString(t, label))
	}
	return nil
}

// drawOpen draws a value of the kinds open-typed fields hold.
func drawOpen(t *rapid.T, label string, depth int) any {
	kinds := 12
	if depth <= 0 {
		kinds = 8
	}
	switch rapid.IntRange(0, kinds).Draw(t, label+".kind") {
	case 0:
		return nil
	case 1:
		return rapid.Bool().Draw(t, label)
	case 2:
		return drawString(t, label)
	case 3:
		return rapid.Float64().Draw(t, label)
	case 4:
		return float64(rapid.IntRange(-1000, 1000).Draw(t, label))
	case 5:
		return rapid.Int().Draw(t, label)
	case 6:
		return rapid.Uint64().Draw(t, label)
	case 7:
		return rapid.SampledFrom([]any{int64(-3), int32(4), uint32(5), uint(6), float32(0.25), int8(-1),
			resolve.Stage("decode"), []int{1}, map[string]int{"b": 1, "a": 2}, []string(nil), []string{}, []any(nil),
			struct{ X []byte }{[]byte("x")},
			map[string]any(nil), (*string)(nil)}).Draw(t, label)
	case 8:
		return drawStrings(t, label)
	case 9, 10:
		if rapid.IntRange(0, 5).Draw(t, label+".nil") == 0 {
			return []any(nil)
		}
		n := rapid.IntRange(0, 4).Draw(t, label+".n")
		out := make([]any, n)
		for i := range out {
			out[i] = drawOpen(t, fmt.Sprintf("%s[%d]", label, i), depth-1)
		}
		return out
	default:
		return drawObject(t, label, depth-1)
	}
}

func drawObject(t *rapid.T, label string, depth int) map[string]any {
	switch rapid.IntRange(0, 5).Draw(t, label+".shape") {
	case 0:
		return nil
	case 1:
		return map[string]any{}
	}
	n := rapid.IntRange(1, 4).Draw(t, label+".n")
	if rapid.IntRange(0, 4).Draw(t, label+".many") == 4 {
		n = rapid.IntRange(5, 30).Draw(t, label+".n")
	}
	m := make(map[string]any, n)
	for i := range n {
		m[drawString(t, fmt.Sprintf("%s.key%d", label, i))] = drawOpen(t, fmt.Sprintf("%s.val%d", label, i), depth)
	}
	return m
}

func drawLists(t *rapid.T, label string) map[string][]string {
	switch rapid.IntRange(0, 3).Draw(t, label+".shape") {
	case 0:
		return nil
	case 1:
		return map[string][]string{}
	}
	n := rapid.IntRange(1, 20).Draw(t, label+".n")
	m := make(map[string][]string, n)
	for i := range n {
		m[drawString(t, fmt.Sprintf("%s.key%d", label, i))] = drawStrings(t, fmt.Sprintf("%s.val%d", label, i))
	}
	return m
}

func drawResolved(t *rapid.T) *events.ResolvedData {
	d := &events.ResolvedData{}
	s := &d.ResolvedAgentSpec
	d.TaskID = drawString(t, "task_id")
	s.Identity.Kind = rapid.SampledFrom([]resolve.IdentityKind{resolve.IdentityCasts, resolve.IdentityExternal, "", "other"}).Draw(t, "kind")
	s.Identity.Name = rapid.StringMatching(`(external:)?[a-z0-9][a-z0-9_-]{0,10}`).Draw(t, "name")
	if rare(t, "name.odd", 20) {
		s.Identity.Name = drawString(t, "name")
	}
	s.Identity.Modes = drawStrings(t, "modes")
	s.Pack = resolve.PackRef{Name: drawString(t, "pack.name"), Digest: drawString(t, "pack.digest")}
	s.Active, s.Yolo, s.Bypass, s.FastMode, s.LionSystem = rapid.Bool().Draw(t, "active"), rapid.Bool().Draw(t, "yolo"),
		rapid.Bool().Draw(t, "bypass"), rapid.Bool().Draw(t, "fast_mode"), rapid.Bool().Draw(t, "lion_system")
	s.Model = drawString(t, "model")
	s.Effort = drawStringPtr(t, "effort")
	s.Tools = drawStrings(t, "tools")
	if rapid.Bool().Draw(t, "permissions.set") {
		s.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionMode(drawString(t, "permissions.mode")),
			Allow: drawLists(t, "allow"), Deny: drawLists(t, "deny"), Escalate: drawLists(t, "escalate")}
	}
	s.PromptDisposition = resolve.PromptDisposition(drawString(t, "disposition"))
	s.PromptBody = drawString(t, "prompt_body")
	s.PromptOverlays = drawStrings(t, "overlays")
	s.GrantRoleEmission = rapid.Bool().Draw(t, "grant")
	s.Emits = drawStrings(t, "emits")
	s.ArtifactDefaults = drawObject(t, "artifact_defaults", 3)
	if rapid.Bool().Draw(t, "timeout.set") {
		s.Timeout = ptr(rapid.Int().Draw(t, "timeout"))
	}
	s.ResumeOnTimeout = rapid.Bool().Draw(t, "resume")
	src := reflect.ValueOf(&s.Sources).Elem()
	for i := range src.NumField() {
		src.Field(i).SetString(drawString(t, "sources."+src.Type().Field(i).Name))
	}
	if rapid.Bool().Draw(t, "diagnostics.set") {
		s.Diagnostics = []resolve.Diagnostic{}
		for i := range rapid.IntRange(0, 3).Draw(t, "diagnostics.n") {
			s.Diagnostics = append(s.Diagnostics, resolve.Diagnostic{Code: drawString(t, fmt.Sprint("diag.code", i)), Message: drawString(t, fmt.Sprint("diag.msg", i))})
		}
	}
	switch rapid.IntRange(0, 3).Draw(t, "system_message.shape") {
	case 0:
		d.SystemMessage = s.PromptBody
	case 1:
		d.SystemMessage = drawString(t, "preamble") + s.PromptBody
	case 2:
		d.SystemMessage = s.PromptBody + drawString(t, "suffix")
	default:
		d.SystemMessage = drawString(t, "system_message")
	}
	d.InputsDigest = drawString(t, "inputs_digest")
	if rapid.Bool().Draw(t, "tail.set") {
		d.PromptTail = drawString(t, "tail")
	}
	return d
}

func drawFailure(t *rapid.T) *events.FailureData {
	return &events.FailureData{
		TaskID:  drawStringPtr(t, "task_id"),
		Stage:   resolve.Stage(rapid.SampledFrom([]string{"", "decode", "resolve", "odd \"stage\""}).Draw(t, "stage")),
		Code:    drawCode(t),
		Subject: drawStringPtr(t, "subject"),
		Details: drawObject(t, "details", 3),
		Message: drawString(t, "message"),
	}
}

func drawCode(t *rapid.T) resolve.Code {
	if rare(t, "code.bad", 20) {
		return resolve.Code(rapid.SampledFrom([]string{"", "Bad", "a.b"}).Draw(t, "code"))
	}
	return resolve.Code(rapid.SampledFrom([]string{"task_invalid", "mode_conflict", "new_code"}).Draw(t, "code"))
}

func drawMeta(t *rapid.T) events.OutcomeMeta {
	m := events.OutcomeMeta{ID: "rc-" + rapid.StringMatching(`[0-9a-f]{1,32}`).Draw(t, "id")}
	if rare(t, "id.odd", 20) {
		m.ID = drawString(t, "id")
	}
	m.Source = rapid.SampledFrom([]string{"", "rolecall", "urn:rolecall:fleet-a", "https://example.com/fleet"}).Draw(t, "source")
	if rare(t, "source.bad", 20) {
		m.Source = "my fleet"
	}
	m.TaskID, m.CausationID = drawString(t, "meta.task_id"), drawString(t, "causation")
	m.TraceParent, m.TraceState = rapid.SampledFrom([]string{"", testTP}).Draw(t, "tp"), drawString(t, "ts")
	if rapid.Bool().Draw(t, "time.set") {
		m.Time = time.Unix(rapid.Int64Range(-1<<40, 1<<40).Draw(t, "time.s"), rapid.Int64Range(0, 1e9-1).Draw(t, "time.ns"))
	}
	m.DataSchemaBase = rapid.SampledFrom([]string{"", "https://example.com/s/", "ü\"/"}).Draw(t, "schema")
	return m
}

// TestOutcomeTypesAreKnown lists the fields the hand-written encoder
// writes. A field added to an outcome type fails here first: write it in
// fastenc.go, then add it to this list.
func TestOutcomeTypesAreKnown(t *testing.T) {
	want := map[string]string{
		"ResolvedData":               "TaskID string json:task_id; ResolvedAgentSpec resolve.ResolvedAgentSpec; SystemMessage string json:system_message; InputsDigest string json:inputs_digest; PromptTail string json:-",
		"ResolvedAgentSpec":          "Identity resolve.Identity json:identity; Pack resolve.PackRef json:pack; Active bool json:active; Model string json:model; Effort *string json:effort; Tools []string json:tools; Permissions *resolve.PermissionPolicy json:permissions; Yolo bool json:yolo; Bypass bool json:bypass; FastMode bool json:fast_mode; LionSystem bool json:lion_system; PromptDisposition resolve.PromptDisposition json:prompt_disposition; PromptBody string json:prompt_body; PromptOverlays []string json:prompt_overlays; GrantRoleEmission bool json:grant_role_emissions; Emits []string json:emits; ArtifactDefaults map[string]interface {} json:artifact_defaults; Timeout *int json:timeout; ResumeOnTimeout bool json:resume_on_timeout; Sources resolve.Sources json:sources; Diagnostics []resolve.Diagnostic json:diagnostics; Role *resolve.Role json:-; ModeDefs []resolve.Mode json:-; Directives resolve.Directives json:-",
		"Identity":                   "Kind resolve.IdentityKind json:kind; Name string json:name; Modes []string json:modes",
		"PackRef":                    "Name string json:name; Digest string json:digest",
		"PermissionPolicy":           "Mode resolve.PermissionMode json:mode; Allow map[string][]string json:allow; Deny map[string][]string json:deny; Escalate map[string][]string json:escalate",
		"Sources":                    "Identity string json:identity; Pack string json:pack; Model string json:model; Effort string json:effort; Modes string json:modes; Tools string json:tools; Permissions string json:permissions; Yolo string json:yolo; Bypass string json:bypass; FastMode string json:fast_mode; LionSystem string json:lion_system; Prompt string json:prompt; ArtifactDefaults string json:artifact_defaults; Timeout string json:timeout; Active string json:active",
		"Diagnostic":                 "Code string json:code; Message string json:message",
		"FailureData":                "TaskID *string json:task_id; Stage resolve.Stage json:stage; Code resolve.Code json:code; Subject *string json:subject; Details map[string]interface {} json:details; Message string json:message",
		"kinds of the named strings": "string string string string string string",
	}
	describe := func(v any) string {
		rt := reflect.TypeOf(v)
		var parts []string
		for i := range rt.NumField() {
			f := rt.Field(i)
			p := f.Name + " " + f.Type.String()
			if j, ok := f.Tag.Lookup("json"); ok {
				p += " json:" + j
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "; ")
	}
	got := map[string]string{
		"ResolvedData":      describe(events.ResolvedData{}),
		"ResolvedAgentSpec": describe(resolve.ResolvedAgentSpec{}),
		"Identity":          describe(resolve.Identity{}),
		"PackRef":           describe(resolve.PackRef{}),
		"PermissionPolicy":  describe(resolve.PermissionPolicy{}),
		"Sources":           describe(resolve.Sources{}),
		"Diagnostic":        describe(resolve.Diagnostic{}),
		"FailureData":       describe(events.FailureData{}),
		"kinds of the named strings": strings.Join([]string{
			reflect.TypeFor[resolve.IdentityKind]().Kind().String(), reflect.TypeFor[resolve.PromptDisposition]().Kind().String(),
			reflect.TypeFor[resolve.PermissionMode]().Kind().String(), reflect.TypeFor[resolve.Stage]().Kind().String(),
			reflect.TypeFor[resolve.Code]().Kind().String(), reflect.TypeFor[string]().Kind().String(),
		}, " "),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcome types changed; update fastenc.go and this list (-listed +now):\n%s", diff)
	}
	// Named types with methods could marshal themselves; none may.
	for _, v := range []any{resolve.IdentityKind(""), resolve.PromptDisposition(""), resolve.PermissionMode(""), resolve.Stage(""), resolve.Code(""),
		resolve.Identity{}, resolve.PackRef{}, resolve.PermissionPolicy{}, resolve.Sources{}, resolve.Diagnostic{}, resolve.ResolvedAgentSpec{}} {
		for _, rt := range []reflect.Type{reflect.TypeOf(v), reflect.PointerTo(reflect.TypeOf(v))} {
			for _, m := range []string{"MarshalJSON", "MarshalJSONTo", "MarshalText", "AppendText"} {
				if _, ok := rt.MethodByName(m); ok {
					t.Errorf("%s has %s, which the hand-written encoder does not call", rt, m)
				}
			}
		}
	}
}

// FuzzAppendResolvedMatchesReflection feeds strings to the free-text
// fields (prompt, preamble, model, a map key and value, the task id) and
// bits to a float, and compares the encoders on a resolved outcome and
// on a failure outcome built from them.
func FuzzAppendResolvedMatchesReflection(f *testing.F) {
	f.Add("You are the architect.\n\nDesign <systems> & \"interfaces\".", "You are part of rolecall.\n\n", "claude-opus-4-1", "format", "markdown", "T-42", uint64(0x4008000000000000))
	f.Add(longPrompt(3000), "", "", "", "", "", uint64(0x8000000000000000))
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
		meta := testMeta(taskID)
		meta.CausationID = value
		checkSame(t, resolvedEncoders, "", meta, &d, false)
		// The same with the last block kept apart, which must encode as
		// the whole (the reference folds it in).
		d.PromptTail = value
		if checkSame(t, resolvedEncoders, "", meta, &d, false) == nil {
			_, _, got, _ := events.AppendResolved(nil, "", meta, &d)
			_, _, want, _ := events.AppendResolved(nil, "", meta, d.Complete())
			if !bytes.Equal(got, want) {
				t.Fatalf("body with a tail differs from Complete's at byte %d", firstDiff(got, want))
			}
		}
		fd := &events.FailureData{TaskID: &taskID, Code: resolve.CodeTaskInvalid, Subject: &key,
			Details: map[string]any{key: value, "prompt": prompt, "f": num}, Message: preamble + prompt}
		checkSame(t, failedEncoders, "", meta, fd, false)
	})
}
