package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/google/go-cmp/cmp"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

func TestDecodeTaskDataFull(t *testing.T) {
	task, ref, err := events.DecodeTaskData([]byte(fullTask), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := events.Task{
		TaskID:  "T-42",
		Role:    "architect",
		Pack:    ptr("default"),
		Profile: ptr("house-style"),
		Modes:   []string{"systematic", "premortem"},
		Override: &events.Overrides{
			Model:       ptr("claude-opus-4-1"),
			Effort:      ptr("high"),
			ExtraPrompt: ptr("Keep it short."),
			Tools:       []string{"Read", "Bash(git:*)"},
			Permissions: &resolve.PermissionPolicy{
				Mode:     resolve.PermissionRules,
				Allow:    map[string][]string{"Bash": {"git *", "ls"}},
				Deny:     map[string][]string{"Write": {"/etc/**"}},
				Escalate: map[string][]string{},
			},
			Yolo: ptr(true), Bypass: ptr(false), FastMode: ptr(false), LionSystem: ptr(true),
		},
	}
	if diff := cmp.Diff(want, task); diff != "" {
		t.Errorf("task (-want +got):\n%s", diff)
	}
	if ref != resolve.RoleRef(resolve.RoleName("architect")) {
		t.Errorf("ref = %#v, want RoleName(architect)", ref)
	}
}

func TestDecodeTaskDataExternalRef(t *testing.T) {
	_, ref, err := events.DecodeTaskData([]byte(`{"task_id":"T","role":"external:house-bot"}`), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref != resolve.RoleRef(resolve.ExternalRef{Name: "house-bot"}) {
		t.Errorf("ref = %#v, want ExternalRef{house-bot}", ref)
	}
}

// taskInvalidCases is the task_invalid table: every rule of the task
// schema with the subject (JSON path) and reason it must produce. It is
// shared with the event tests, which run it through both content modes.
var taskInvalidCases = []struct {
	name, data, subject, reason string
}{
	// The data as a whole.
	{"array", `[1]`, "", events.ReasonNotObject},
	{"string", `"T-1"`, "", events.ReasonNotObject},
	{"null", `null`, "", events.ReasonNotObject},
	{"number", `42`, "", events.ReasonNotObject},
	{"not JSON", `this is not JSON`, "", events.ReasonSyntax},
	{"array cut short", `[1,`, "", events.ReasonSyntax},
	{"string cut short", `"T-1`, "", events.ReasonSyntax},
	{"trailing garbage", `{"task_id":"T","role":"a"} x`, "", events.ReasonSyntax},
	{"trailing comma", `{"task_id":"T","role":"a",}`, "", events.ReasonSyntax},

	// Required members.
	{"task_id missing", `{"role":"architect"}`, "task_id", events.ReasonRequired},
	{"task_id null", `{"task_id":null,"role":"architect"}`, "task_id", events.ReasonRequired},
	{"task_id empty", `{"task_id":"","role":"architect"}`, "task_id", events.ReasonEmpty},
	{"role missing", `{"task_id":"T"}`, "role", events.ReasonRequired},
	{"role null", `{"task_id":"T","role":null}`, "role", events.ReasonRequired},
	{"role empty", `{"task_id":"T","role":""}`, "role", events.ReasonEmpty},

	// task_id grammar: 1–128 printable ASCII, no spaces.
	{"task_id space", `{"task_id":"T 1","role":"a"}`, "task_id", events.ReasonInvalidValue},
	{"task_id control", `{"task_id":"T\n","role":"a"}`, "task_id", events.ReasonInvalidValue},
	{"task_id non-ascii", `{"task_id":"Té","role":"a"}`, "task_id", events.ReasonInvalidValue},
	{"task_id too long", `{"task_id":"` + strings.Repeat("x", 129) + `","role":"a"}`, "task_id", events.ReasonInvalidValue},

	// Names: role token, pack, profile, each mode (resolve.ValidateName).
	{"role slash", `{"task_id":"T","role":"a/b"}`, "role", events.ReasonInvalidName},
	{"role dotdot", `{"task_id":"T","role":".."}`, "role", events.ReasonInvalidName},
	{"role uppercase", `{"task_id":"T","role":"Architect"}`, "role", events.ReasonInvalidName},
	{"role external empty", `{"task_id":"T","role":"external:"}`, "role", events.ReasonInvalidName},
	{"role external bad", `{"task_id":"T","role":"external:a\\b"}`, "role", events.ReasonInvalidName},
	{"role other prefix", `{"task_id":"T","role":"internal:a"}`, "role", events.ReasonInvalidName},
	{"role too long", `{"task_id":"T","role":"` + strings.Repeat("a", 65) + `"}`, "role", events.ReasonInvalidName},
	{"pack empty", `{"task_id":"T","role":"a","pack":""}`, "pack", events.ReasonEmpty},
	{"pack path", `{"task_id":"T","role":"a","pack":"../x"}`, "pack", events.ReasonInvalidName},
	{"profile empty", `{"task_id":"T","role":"a","profile":""}`, "profile", events.ReasonEmpty},
	{"profile control", `{"task_id":"T","role":"a","profile":"p\u0000"}`, "profile", events.ReasonInvalidName},
	{"mode empty", `{"task_id":"T","role":"a","modes":["fast",""]}`, "modes[1]", events.ReasonEmpty},
	{"mode null element", `{"task_id":"T","role":"a","modes":["fast",null]}`, "modes[1]", events.ReasonEmpty},
	{"mode invalid", `{"task_id":"T","role":"a","modes":["fast","Slow"]}`, "modes[1]", events.ReasonInvalidName},

	// Skill patterns (resolve.ValidateSkillPattern), checked after modes.
	{"skill pattern empty", `{"task_id":"T","role":"a","skills":["go-*",""]}`, "skills[1]", events.ReasonEmpty},
	{"skill pattern null element", `{"task_id":"T","role":"a","skills":[null]}`, "skills[0]", events.ReasonEmpty},
	{"skill pattern bad glob", `{"task_id":"T","role":"a","skills":["review","go-["]}`, "skills[1]", events.ReasonInvalidGlob},
	{"skill pattern trailing backslash", `{"task_id":"T","role":"a","skills":["go\\"]}`, "skills[0]", events.ReasonInvalidGlob},
	{"skill pattern control", `{"task_id":"T","role":"a","skills":["go\u0007"]}`, "skills[0]", events.ReasonInvalidValue},
	{"skill pattern C1 control", `{"task_id":"T","role":"a","skills":["go\u0085"]}`, "skills[0]", events.ReasonInvalidValue},
	{"skill pattern too long", `{"task_id":"T","role":"a","skills":["` + strings.Repeat("a", 129) + `"]}`, "skills[0]", events.ReasonInvalidValue},
	{"modes before skills", `{"task_id":"T","role":"a","skills":[""],"modes":["Bad"]}`, "modes[0]", events.ReasonInvalidName},

	// Free values: model, effort, tools.
	{"model empty", `{"task_id":"T","role":"a","overrides":{"model":""}}`, "overrides.model", events.ReasonEmpty},
	{"effort empty", `{"task_id":"T","role":"a","overrides":{"effort":""}}`, "overrides.effort", events.ReasonEmpty},
	{"model control", `{"task_id":"T","role":"a","overrides":{"model":"m\u0007"}}`, "overrides.model", events.ReasonInvalidValue},
	{"model too long", `{"task_id":"T","role":"a","overrides":{"model":"` + strings.Repeat("m", 257) + `"}}`, "overrides.model", events.ReasonInvalidValue},
	{"tool empty", `{"task_id":"T","role":"a","overrides":{"tools":["Read",""]}}`, "overrides.tools[1]", events.ReasonEmpty},
	{"tool control", `{"task_id":"T","role":"a","overrides":{"tools":["Re\tad"]}}`, "overrides.tools[0]", events.ReasonInvalidValue},
	// Format characters (Unicode Cf): bidirectional controls ("Trojan
	// Source") and zero-width characters, escaped or written raw.
	{"model right-to-left override", `{"task_id":"T","role":"a","overrides":{"model":"claude\u202eopus"}}`, "overrides.model", events.ReasonInvalidValue},
	{"model raw right-to-left override", "{\"task_id\":\"T\",\"role\":\"a\",\"overrides\":{\"model\":\"gpt\u202e4\"}}", "overrides.model", events.ReasonInvalidValue},
	{"effort zero-width space", `{"task_id":"T","role":"a","overrides":{"effort":"hi\u200bgh"}}`, "overrides.effort", events.ReasonInvalidValue},
	{"tool bidi isolate", `{"task_id":"T","role":"a","overrides":{"tools":["Read","Bash\u2066"]}}`, "overrides.tools[1]", events.ReasonInvalidValue},
	{"tool byte order mark", `{"task_id":"T","role":"a","overrides":{"tools":["\ufeffRead"]}}`, "overrides.tools[0]", events.ReasonInvalidValue},
	{"permission tool right-to-left override", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","deny":{"Bash\u202e":["*"]}}}}`, `overrides.permissions.deny["Bash\u202e"]`, events.ReasonInvalidValue},
	{"permission pattern right-to-left override", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","deny":{"Bash":["rm \u202e*"]}}}}`, "overrides.permissions.deny.Bash[0]", events.ReasonInvalidValue},
	{"skill pattern right-to-left override", `{"task_id":"T","role":"a","skills":["go-\u202e*"]}`, "skills[0]", events.ReasonInvalidValue},

	// Permissions.
	{"permissions mode missing", `{"task_id":"T","role":"a","overrides":{"permissions":{}}}`, "overrides.permissions.mode", events.ReasonRequired},
	{"permissions mode bad", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"some"}}}`, "overrides.permissions.mode", events.ReasonInvalidValue},
	{"permissions bad glob", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"Bash":["git *","[a-"]}}}}`, "overrides.permissions.allow.Bash[1]", events.ReasonInvalidGlob},
	{"permissions bad glob in deny", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","deny":{"Read":["{a,b"]}}}}`, "overrides.permissions.deny.Read[0]", events.ReasonInvalidGlob},
	{"permissions empty pattern", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","escalate":{"Bash":[""]}}}}`, "overrides.permissions.escalate.Bash[0]", events.ReasonEmpty},
	{"permissions empty tool", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"":["x"]}}}}`, `overrides.permissions.allow[""]`, events.ReasonEmpty},
	{"permissions odd tool key", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"mcp(x)":["["]}}}}`, `overrides.permissions.allow["mcp(x)"][0]`, events.ReasonInvalidGlob},

	// Unknown members anywhere.
	{"unknown top-level", `{"task_id":"T","role":"a","priority":1}`, "priority", events.ReasonUnknownField},
	{"unknown case variant", `{"task_id":"T","role":"a","Task_ID":"U"}`, "Task_ID", events.ReasonUnknownField},
	{"unknown in overrides", `{"task_id":"T","role":"a","overrides":{"temperature":0.2}}`, "overrides.temperature", events.ReasonUnknownField},
	{"unknown in permissions", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","ask":{}}}}`, "overrides.permissions.ask", events.ReasonUnknownField},
	{"unknown odd name", `{"task_id":"T","role":"a","a.b":1}`, `["a.b"]`, events.ReasonUnknownField},

	// Wrong JSON types.
	{"task_id number", `{"task_id":42,"role":"a"}`, "task_id", events.ReasonWrongType},
	{"modes string", `{"task_id":"T","role":"a","modes":"fast"}`, "modes", events.ReasonWrongType},
	{"mode number", `{"task_id":"T","role":"a","modes":["fast",1]}`, "modes[1]", events.ReasonWrongType},
	{"skills string", `{"task_id":"T","role":"a","skills":"go-*"}`, "skills", events.ReasonWrongType},
	{"skill pattern number", `{"task_id":"T","role":"a","skills":[1]}`, "skills[0]", events.ReasonWrongType},
	{"overrides array", `{"task_id":"T","role":"a","overrides":[]}`, "overrides", events.ReasonWrongType},
	{"yolo string", `{"task_id":"T","role":"a","overrides":{"yolo":"true"}}`, "overrides.yolo", events.ReasonWrongType},
	{"lion_system number", `{"task_id":"T","role":"a","overrides":{"lion_system":1}}`, "overrides.lion_system", events.ReasonWrongType},
	{"extra_prompt object", `{"task_id":"T","role":"a","overrides":{"extra_prompt":{}}}`, "overrides.extra_prompt", events.ReasonWrongType},
	{"tools object", `{"task_id":"T","role":"a","overrides":{"tools":{"Read":true}}}`, "overrides.tools", events.ReasonWrongType},
	{"permissions rule string", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"Bash":"git *"}}}}`, "overrides.permissions.allow.Bash", events.ReasonWrongType},
	{"permissions pattern number", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"Bash":[1]}}}}`, "overrides.permissions.allow.Bash[0]", events.ReasonWrongType},

	// Duplicate names, at any level.
	{"duplicate top-level", `{"task_id":"T","role":"a","task_id":"U"}`, "task_id", events.ReasonDuplicateKey},
	{"duplicate in overrides", `{"task_id":"T","role":"a","overrides":{"model":"m","model":"n"}}`, "overrides.model", events.ReasonDuplicateKey},
	{"duplicate tool key", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"Bash":[],"Bash":[]}}}}`, "overrides.permissions.allow.Bash", events.ReasonDuplicateKey},

	// Invalid UTF-8.
	{"invalid utf-8", "{\"task_id\":\"T\",\"role\":\"a\",\"overrides\":{\"extra_prompt\":\"\xff\"}}", "overrides.extra_prompt", events.ReasonInvalidUTF8},
	// An escaped lone surrogate is no character, so no UTF-8 either: as
	// invalid UTF-8 (it was reported as a syntax error of the whole data).
	{"lone high surrogate", `{"task_id":"T","role":"a","overrides":{"extra_prompt":"x\ud800"}}`, "overrides.extra_prompt", events.ReasonInvalidUTF8},
	{"lone low surrogate", `{"task_id":"\udc00","role":"a"}`, "task_id", events.ReasonInvalidUTF8},
	{"high surrogate before a non-surrogate", `{"task_id":"T","role":"a","modes":["a\ud800\u0041"]}`, "modes[0]", events.ReasonInvalidUTF8},
	{"lone surrogate in a tool key", `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"\udfff":[]}}}}`, "overrides.permissions.allow", events.ReasonInvalidUTF8},
}

func TestDecodeTaskDataInvalid(t *testing.T) {
	for _, tc := range taskInvalidCases {
		t.Run(tc.name, func(t *testing.T) {
			_, ref, err := events.DecodeTaskData([]byte(tc.data), events.DecodeOptions{})
			wantDecodeError(t, err, resolve.CodeTaskInvalid, tc.subject, tc.reason)
			if ref != nil {
				t.Errorf("ref = %v on error, want nil", ref)
			}
			if !errors.Is(err, &events.DecodeError{Code: resolve.CodeTaskInvalid}) {
				t.Errorf("errors.Is(err, task_invalid) = false")
			}
			if errors.Is(err, &events.DecodeError{Code: resolve.CodeEventInvalid}) {
				t.Errorf("errors.Is(err, event_invalid) = true")
			}
		})
	}
}

func TestDecodeTaskDataSizeLimit(t *testing.T) {
	pad := strings.Repeat(" ", 100)
	data := []byte(`{"task_id":"T-big","role":"a"` + pad + `}`)
	if _, _, err := events.DecodeTaskData(data, events.DecodeOptions{MaxDataBytes: len(data)}); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	task, _, err := events.DecodeTaskData(data, events.DecodeOptions{MaxDataBytes: len(data) - 1})
	wantDecodeError(t, err, resolve.CodeTaskInvalid, "", events.ReasonTooLarge)
	if task.TaskID != "T-big" {
		t.Errorf("TaskID on too_large = %q, want T-big (read from the prefix)", task.TaskID)
	}

	big := []byte(`{"task_id":"T","role":"a","overrides":{"extra_prompt":"` + strings.Repeat("x", events.DefaultMaxDataBytes) + `"}}`)
	_, _, err = events.DecodeTaskData(big, events.DecodeOptions{})
	wantDecodeError(t, err, resolve.CodeTaskInvalid, "", events.ReasonTooLarge)
}

// Nesting far beyond the schema is rejected with a typed error and a short
// subject, whether the deep value sits in a known or an unknown member.
func TestDecodeTaskDataDeepNesting(t *testing.T) {
	deep := func(prefix string, n int) []byte {
		return []byte(prefix + strings.Repeat("[", n) + strings.Repeat("]", n) + "}")
	}
	cases := []struct {
		name, prefix, subject string
		reasons               []string
	}{
		{"unknown member", `{"task_id":"T","role":"a","x":`, "x", []string{events.ReasonUnknownField}},
		{"modes", `{"task_id":"T","role":"a","modes":`, "modes[0]", []string{events.ReasonTooDeep, events.ReasonWrongType}},
		{"tools", `{"task_id":"T","role":"a","overrides":{"tools":`, "overrides.tools[0]", []string{events.ReasonTooDeep, events.ReasonWrongType}},
		{"task_id", `{"task_id":`, "task_id", []string{events.ReasonTooDeep, events.ReasonWrongType}},
	}
	for _, tc := range cases {
		for _, n := range []int{10_000, 10_001, 100_000} {
			_, _, err := events.DecodeTaskData(deep(tc.prefix, n), events.DecodeOptions{MaxDataBytes: 1 << 20})
			var de *events.DecodeError
			if !errors.As(err, &de) || de.Code != resolve.CodeTaskInvalid {
				t.Fatalf("%s depth %d: err = %v, want task_invalid", tc.name, n, err)
			}
			if de.Subject != tc.subject {
				t.Errorf("%s depth %d: subject = %q, want %q", tc.name, n, de.Subject, tc.subject)
			}
			ok := false
			for _, r := range tc.reasons {
				ok = ok || de.Reason() == r
			}
			if !ok {
				t.Errorf("%s depth %d: reason = %q, want one of %v", tc.name, n, de.Reason(), tc.reasons)
			}
		}
	}
}

// absent, null and empty must stay distinct through decoding.
func TestDecodeTaskDataAbsentVsEmpty(t *testing.T) {
	type view struct {
		Modes, Tools       []string
		ModesNil, ToolsNil bool
		Overrides          bool
		Yolo, ExtraPrompt  *string
	}
	see := func(task events.Task) view {
		v := view{Modes: task.Modes, ModesNil: task.Modes == nil, ToolsNil: true}
		if o := task.Override; o != nil {
			v.Overrides = true
			v.Tools, v.ToolsNil = o.Tools, o.Tools == nil
			if o.Yolo != nil {
				v.Yolo = ptr(map[bool]string{true: "true", false: "false"}[*o.Yolo])
			}
			v.ExtraPrompt = o.ExtraPrompt
		}
		return v
	}
	cases := []struct {
		name, members string
		want          view
	}{
		{"modes absent", ``, view{ModesNil: true, ToolsNil: true}},
		{"modes null", `"modes":null`, view{ModesNil: true, ToolsNil: true}},
		{"modes empty", `"modes":[]`, view{Modes: []string{}, ToolsNil: true}},
		{"tools absent", `"overrides":{}`, view{ModesNil: true, ToolsNil: true, Overrides: true}},
		{"tools null", `"overrides":{"tools":null}`, view{ModesNil: true, ToolsNil: true, Overrides: true}},
		{"tools empty", `"overrides":{"tools":[]}`, view{ModesNil: true, Tools: []string{}, Overrides: true}},
		{"overrides null", `"overrides":null`, view{ModesNil: true, ToolsNil: true}},
		{"yolo false", `"overrides":{"yolo":false}`, view{ModesNil: true, ToolsNil: true, Overrides: true, Yolo: ptr("false")}},
		{"yolo null", `"overrides":{"yolo":null}`, view{ModesNil: true, ToolsNil: true, Overrides: true}},
		{"extra_prompt empty is legal", `"overrides":{"extra_prompt":""}`, view{ModesNil: true, ToolsNil: true, Overrides: true, ExtraPrompt: ptr("")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := `{"task_id":"T","role":"a"`
			if tc.members != "" {
				data += "," + tc.members
			}
			data += "}"
			task, _, err := events.DecodeTaskData([]byte(data), events.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, see(task)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeTaskDataNullEverywhereIsAbsent(t *testing.T) {
	data := `{"task_id":"T","role":"a","pack":null,"profile":null,"modes":null,
	  "overrides":{"model":null,"effort":null,"extra_prompt":null,"tools":null,"permissions":null,
	  "yolo":null,"bypass":null,"fast_mode":null,"lion_system":null}}`
	task, _, err := events.DecodeTaskData([]byte(data), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := events.Task{TaskID: "T", Role: "a", Override: &events.Overrides{}}
	if diff := cmp.Diff(want, task); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	// A null pattern list in a permission map is an absent entry; an
	// empty list stays.
	data = `{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"Bash":null,"Read":[]},"deny":null}}}`
	task, _, err = events.DecodeTaskData([]byte(data), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantPolicy := &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Allow: map[string][]string{"Read": {}}}
	if diff := cmp.Diff(wantPolicy, task.Override.Permissions); diff != "" {
		t.Errorf("policy (-want +got):\n%s", diff)
	}
}

func TestTaskOverrides(t *testing.T) {
	task, _, err := events.DecodeTaskData([]byte(fullTask), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := task.Override
	want := resolve.TaskOverrides{
		Model: o.Model, Effort: o.Effort, Modes: task.Modes, ExtraPrompt: o.ExtraPrompt,
		Tools: o.Tools, Permissions: o.Permissions,
		Yolo: o.Yolo, Bypass: o.Bypass, FastMode: o.FastMode, LionSystem: o.LionSystem,
	}
	if diff := cmp.Diff(want, task.Overrides()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name, data string
		want       resolve.TaskOverrides
	}{
		{"absent", minimalTask, resolve.TaskOverrides{}},
		{"empty modes and tools", `{"task_id":"T","role":"a","modes":[],"overrides":{"tools":[]}}`,
			resolve.TaskOverrides{Modes: []string{}, Tools: []string{}}},
		{"skills", `{"task_id":"T","role":"a","skills":["go-*","review"],"overrides":{"model":"tier:cheap"}}`,
			resolve.TaskOverrides{Skills: []string{"go-*", "review"}, Model: ptr("tier:cheap")}},
		{"skills empty", `{"task_id":"T","role":"a","skills":[]}`, resolve.TaskOverrides{Skills: []string{}}},
		{"skills null", `{"task_id":"T","role":"a","skills":null}`, resolve.TaskOverrides{}},
	} {
		task, _, err := events.DecodeTaskData([]byte(tc.data), events.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, task.Overrides()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// A failure should still name its task when the data says which one.
func TestDecodeTaskDataKeepsTaskIDOnError(t *testing.T) {
	cases := []struct{ data, want string }{
		{`{"task_id":"T-7","role":"a","bogus":1}`, "T-7"},
		{`{"bogus":1,"task_id":"T-7","role":"a"}`, "T-7"},
		{`{"task_id":"T-7","role":"A"}`, "T-7"},
		{`{"task_id":"T 7","role":"a"}`, ""},
		{`{"task_id":"T-7","task_id":"T-8","role":"a"}`, ""},
		{`{"task_id":7,"role":"a"}`, ""},
		{`[]`, ""},
	}
	for _, tc := range cases {
		task, _, err := events.DecodeTaskData([]byte(tc.data), events.DecodeOptions{})
		if err == nil {
			t.Fatalf("%s: no error", tc.data)
		}
		if task.TaskID != tc.want {
			t.Errorf("%s: TaskID = %q, want %q", tc.data, task.TaskID, tc.want)
		}
	}
}

// validTasks are valid task data in the forms a planner may send: every
// member, null for every optional one, empty values where they are
// allowed, escapes (in values and in member names), non-ASCII text,
// whitespace everywhere, null inside a permission map, and values at
// their length limits.
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
	`{"task\u005fid":"T\u002d1","role":"a","overrides":{"extra_prompt":"line\nnext \"q\" \\ \/ \u00e9 \ud83d\ude00 \t","model":"m\u00e9","tools":["R\u00e9ad"]}}`,
	`{"task_id":"T","role":"a","overrides":{"extra_prompt":"évènement 😀 ","tools":["Bash(ls:*)","mcp__srv__tool"],
	  "permissions":{"mode":"rules","allow":{"B\u0061sh":["git *"],"Read":["**/*.go","src/{a,b}/*"],"mcp(x)":["*"],"X":null},"deny":{},"escalate":{"Write":[]}}}}`,
	`{"task_id":"T","role":"a","modes":["m1","m2","m3","m4","m5","m6"],"overrides":{"tools":["t1","t2","t3","t4"],
	  "permissions":{"mode":"rules","allow":{"A":["a","b","c"],"B":["d"]},"deny":{"C":["e","f"]}}}}`,
	`{"task_id":"` + strings.Repeat("x", events.MaxTaskIDLen) + `","role":"` + strings.Repeat("r", 64) + `",
	  "overrides":{"model":"` + strings.Repeat("é", events.MaxValueLen) + `"}}`,
}

// TestDecodeTaskDataValidForms: each valid form decodes, in both content
// modes to the same task, and the decoded task re-encodes to data that
// decodes to it again (absent, null and empty survive).
func TestDecodeTaskDataValidForms(t *testing.T) {
	for _, data := range validTasks {
		task, ref, err := events.DecodeTaskData([]byte(data), events.DecodeOptions{})
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if ref == nil || ref.Token() != task.Role {
			t.Errorf("%s: ref %v for role %q", data, ref, task.Role)
		}
		for _, m := range modes {
			h, body := encode(t, data, m.binary)
			inc, err := events.DecodeTask(h, body, events.DecodeOptions{})
			if err != nil {
				t.Fatalf("%s %s: %v", m.name, data, err)
			}
			if diff := cmp.Diff(task, inc.Task); diff != "" {
				t.Errorf("%s %s: (-data +event):\n%s", m.name, data, diff)
			}
		}
		again, err := json.Marshal(task, json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))
		if err != nil {
			t.Fatal(err)
		}
		task2, _, err := events.DecodeTaskData(again, events.DecodeOptions{})
		if err != nil {
			t.Fatalf("%s: re-encoded %s: %v", data, again, err)
		}
		if diff := cmp.Diff(task, task2); diff != "" {
			t.Errorf("%s: round trip (-first +again):\n%s", data, diff)
		}
	}
	// A tool whose pattern list is null is absent, like any null.
	task, _, err := events.DecodeTaskData([]byte(`{"task_id":"T","role":"a","overrides":{"permissions":{"mode":"rules","allow":{"B":null,"C":["x"]}}}}`), events.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{"C": {"x"}}, task.Override.Permissions.Allow); diff != "" {
		t.Errorf("allow (-want +got):\n%s", diff)
	}
}
