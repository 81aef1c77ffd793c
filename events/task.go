package events

import (
	"bytes"
	"cmp"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/rolecall/rolecall/resolve"
)

// DefaultMaxDataBytes bounds task data (the JSON bytes of the event's
// data); larger data is task_invalid with reason too_large.
const DefaultMaxDataBytes = 256 << 10

// MaxTaskIDLen bounds task_id (bytes; task ids are ASCII).
const MaxTaskIDLen = 128

// MaxValueLen bounds model, effort, tool names and permission-map keys,
// in characters.
const MaxValueLen = 256

// DecodeOptions tunes decoding. The zero value is the default.
type DecodeOptions struct {
	// MaxDataBytes bounds the task data; 0 means DefaultMaxDataBytes.
	MaxDataBytes int
}

func (o DecodeOptions) maxData() int { return cmp.Or(max(o.MaxDataBytes, 0), DefaultMaxDataBytes) }

// taskWire is Task as decoded: task_id and role are pointers so that a
// missing member (required) and "" (empty) get different reasons.
type taskWire struct {
	TaskID    *string    `json:"task_id"`
	Role      *string    `json:"role"`
	Pack      *string    `json:"pack"`
	Profile   *string    `json:"profile"`
	Modes     []string   `json:"modes"`
	Skills    []string   `json:"skills"`
	Overrides *Overrides `json:"overrides"`
}

var strictTask = json.JoinOptions(json.RejectUnknownMembers(true))

// DecodeTaskData decodes and validates task data strictly: unknown
// members (at any level), duplicate names, invalid UTF-8, wrong JSON
// types and invalid values are task_invalid, with the field's JSON path
// as Subject. null is absent, and absent and empty stay different. The
// role token is parsed into a resolve.RoleRef. On error the Task still
// carries TaskID when the data names a valid one, for the failure outcome.
func DecodeTaskData(data []byte, opts DecodeOptions) (Task, resolve.RoleRef, error) {
	if limit := opts.maxData(); len(data) > limit {
		return Task{TaskID: peekTaskID(data[:limit])}, nil, taskInvalid("", ReasonTooLarge,
			"task data is %d bytes, over the %d-byte limit", len(data), limit)
	}
	if err := checkObject(data); err != nil {
		return Task{}, nil, err
	}
	var w taskWire
	if err := json.Unmarshal(data, &w, strictTask); err != nil {
		return Task{TaskID: peekTaskID(data)}, nil, jsonError(err)
	}
	t := Task{Pack: w.Pack, Profile: w.Profile, Modes: w.Modes, Skills: w.Skills, Override: w.Overrides}
	if w.TaskID != nil && validTaskID(*w.TaskID) == "" {
		t.TaskID = *w.TaskID
	}
	ref, err := validateTask(&w)
	if err != nil {
		return Task{TaskID: t.TaskID}, nil, err
	}
	t.Role = *w.Role
	if o := t.Override; o != nil && o.Permissions != nil {
		// null is absent everywhere, including inside a permission map:
		// tool entries whose pattern list was null are dropped.
		p := o.Permissions
		for _, m := range []map[string][]string{p.Allow, p.Deny, p.Escalate} {
			maps.DeleteFunc(m, func(_ string, v []string) bool { return v == nil })
		}
	}
	return t, ref, nil
}

// checkObject rejects data that is not a JSON object before the decoder
// would turn a top-level null into a zero Task: data that is not JSON at
// all (binary mode carries any bytes) is syntax, JSON of another kind is
// not_object.
func checkObject(data []byte) error {
	switch {
	case len(bytes.TrimLeft(data, " \t\r\n")) == 0:
		return taskInvalid("", ReasonMissing, "task data is missing")
	case jsontext.Value(data).Kind() != '{':
		if err := json.Unmarshal(data, new(jsontext.Value)); err != nil {
			return jsonError(err)
		}
		return taskInvalid("", ReasonNotObject, "task data is not a JSON object")
	}
	return nil
}

// jsonError maps a json/jsontext error to task_invalid with the path.
func jsonError(err error) *DecodeError {
	var se *json.SemanticError
	var sy *jsontext.SyntacticError
	switch {
	case errors.As(err, &sy):
		return syntaxError(pointerPath(sy.JSONPointer), sy)
	case errors.As(err, &se):
		path := pointerPath(se.JSONPointer)
		if errors.Is(se.Err, json.ErrUnknownName) {
			return taskInvalid(path, ReasonUnknownField, "unknown field %s", describe(path))
		}
		want := "a different type"
		if se.GoType != nil {
			want = jsonKindOf(se.GoType)
		}
		return taskInvalid(path, ReasonWrongType, "%s must be %s, not %s", describe(path), want, kindName(se.JSONKind))
	}
	return taskInvalid("", ReasonSyntax, "task data cannot be decoded: %v", err)
}

func syntaxError(path string, sy *jsontext.SyntacticError) *DecodeError {
	switch {
	case errors.Is(sy.Err, jsontext.ErrDuplicateName):
		return taskInvalid(path, ReasonDuplicateKey, "member %s appears twice", describe(path))
	case strings.Contains(sy.Err.Error(), "invalid UTF-8"):
		return taskInvalid(path, ReasonInvalidUTF8, "%s holds invalid UTF-8", describe(path))
	case strings.Contains(sy.Err.Error(), "invalid surrogate pair"):
		// An escaped lone surrogate (\ud800) is no character: the string
		// has no UTF-8 form.
		return taskInvalid(path, ReasonInvalidUTF8, "%s holds an unpaired UTF-16 surrogate escape", describe(path))
	case isDepthError(sy):
		return taskInvalid(path, ReasonTooDeep, "%s is nested too deeply", describe(path))
	}
	return taskInvalid("", ReasonSyntax, "task data is not valid JSON at byte %d: %v", sy.ByteOffset, sy.Err)
}

// isDepthError recognizes jsontext's nesting limit (10,000), whose error
// value is not exported.
func isDepthError(sy *jsontext.SyntacticError) bool {
	return strings.Contains(sy.Err.Error(), "max depth")
}

func describe(path string) string {
	if path == "" {
		return "the task data"
	}
	return path
}

// jsonKindOf names the JSON shape a Go type of the task model expects.
func jsonKindOf(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return cmp.Or(map[reflect.Kind]string{reflect.String: "a string", reflect.Bool: "a boolean", reflect.Slice: "an array",
		reflect.Map: "an object", reflect.Struct: "an object"}[t.Kind()], "a different type")
}

func kindName(k jsontext.Kind) string {
	return cmp.Or(map[jsontext.Kind]string{'n': "null", 'f': "a boolean", 't': "a boolean", '"': "a string", '0': "a number",
		'{': "an object", '[': "an array"}[k], "another kind")
}

// validateTask checks values in schema order: task_id, role, pack,
// profile, modes, skills, then overrides (model, effort, tools,
// permissions). The first failure wins.
func validateTask(w *taskWire) (resolve.RoleRef, error) {
	switch {
	case w.TaskID == nil:
		return nil, taskInvalid("task_id", ReasonRequired, "task_id is required")
	case *w.TaskID == "":
		return nil, taskInvalid("task_id", ReasonEmpty, "task_id is empty")
	}
	if msg := validTaskID(*w.TaskID); msg != "" {
		return nil, taskInvalid("task_id", ReasonInvalidValue, "task_id %s", msg)
	}
	switch {
	case w.Role == nil:
		return nil, taskInvalid("role", ReasonRequired, "role is required")
	case *w.Role == "":
		return nil, taskInvalid("role", ReasonEmpty, "role is empty")
	}
	ref, err := resolve.ParseRoleToken(*w.Role)
	if err != nil {
		de := nameError("role", err)
		if strings.HasPrefix(*w.Role, resolve.ExternalPrefix) {
			de.Message = "role " + printable(*w.Role) + " names no valid profile: " + de.Message
		}
		return nil, de
	}
	if err := cmp.Or(checkName("pack", w.Pack), checkName("profile", w.Profile)); err != nil {
		return nil, err
	}
	for i, m := range w.Modes {
		if m == "" || resolve.ValidateName("modes", m) != nil {
			return nil, checkName(indexPath("modes", i), &m)
		}
	}
	if err := cmp.Or(checkSkills(w.Skills), checkOverrides(w.Overrides)); err != nil {
		return nil, err
	}
	return ref, nil
}

// checkSkills checks the task's skill patterns: each non-empty, bounded,
// without control characters and a valid path.Match glob
// (resolve.ValidateSkillPattern).
func checkSkills(patterns []string) error {
	for i, p := range patterns {
		// The path is built only on failure, as for modes.
		if resolve.ValidateSkillPattern("skills", p) == nil {
			continue
		}
		field := indexPath("skills", i)
		msg := resolve.ValidateSkillPattern(field, p).(*resolve.ResolutionError).Message
		switch {
		case p == "":
			return taskInvalid(field, ReasonEmpty, "%s is empty", field)
		case len(p) <= resolve.MaxSkillPatternLen && unsafeIndex(p) < 0:
			return taskInvalid(field, ReasonInvalidGlob, "%s", msg)
		}
		return taskInvalid(field, ReasonInvalidValue, "%s", msg)
	}
	return nil
}

// validTaskID returns "" for a valid task id: 1–128 printable ASCII
// characters (U+0021–U+007E), so it is safe as a CloudEvents subject, in
// a NATS header and in a log line without escaping.
func validTaskID(id string) string {
	switch {
	case id == "":
		return "is empty"
	case len(id) > MaxTaskIDLen:
		return "is longer than 128 characters"
	case strings.ContainsFunc(id, func(r rune) bool { return r < '!' || r > '~' }):
		return "may only hold printable ASCII characters without spaces (U+0021–U+007E)"
	}
	return ""
}

func checkName(field string, v *string) error {
	if v == nil {
		return nil
	}
	if *v == "" {
		return taskInvalid(field, ReasonEmpty, "%s is empty", field)
	}
	if err := resolve.ValidateName(field, *v); err != nil {
		return nameError(field, err)
	}
	return nil
}

// nameError rewraps a resolve name error (whose message already names
// the field) as task_invalid.
func nameError(field string, err error) *DecodeError {
	msg := err.Error()
	var re *resolve.ResolutionError
	if errors.As(err, &re) && re.Message != "" {
		msg = re.Message
	}
	return taskInvalid(field, ReasonInvalidName, "%s", msg)
}

func checkOverrides(o *Overrides) error {
	if o == nil {
		return nil
	}
	if err := cmp.Or(checkValue("overrides.model", o.Model), checkValue("overrides.effort", o.Effort)); err != nil {
		return err
	}
	for i, tool := range o.Tools {
		if valueProblem(tool) != "" {
			return checkValue(indexPath("overrides.tools", i), &tool)
		}
	}
	if p := o.Permissions; p != nil {
		return checkPermissions("overrides.permissions", p)
	}
	return nil
}

// checkValue accepts an identifier value (model, effort, tool name): 1–256
// characters without control or format characters (resolve.UnsafeChar).
func checkValue(field string, v *string) error {
	switch {
	case v == nil || valueProblem(*v) == "":
		return nil
	case *v == "":
		return taskInvalid(field, ReasonEmpty, "%s is empty", field)
	case utf8.RuneCountInString(*v) > MaxValueLen:
		return taskInvalid(field, ReasonInvalidValue, "%s is longer than %d characters", field, MaxValueLen)
	}
	i, r := resolve.UnsafeChar(*v)
	return taskInvalid(field, ReasonInvalidValue, "%s has %s at byte %d", field, resolve.DescribeUnsafe(r), i)
}

// valueProblem returns the reason a free-text value is invalid, or "".
func valueProblem(v string) string {
	switch {
	case v == "":
		return ReasonEmpty
	case len(v) > MaxValueLen && utf8.RuneCountInString(v) > MaxValueLen, unsafeIndex(v) >= 0:
		return ReasonInvalidValue
	}
	return ""
}

// unsafeIndex returns the byte index of the first character an identifier
// may not hold (resolve.UnsafeChar), or -1.
func unsafeIndex(s string) int {
	i, _ := resolve.UnsafeChar(s)
	return i
}

// controlIndex returns the byte index of the first C0, DEL or C1 control
// character in s, or -1.
func controlIndex(s string) int {
	return strings.IndexFunc(s, unicode.IsControl)
}

func checkPermissions(field string, p *resolve.PermissionPolicy) error {
	switch p.Mode {
	case resolve.PermissionAllowAll, resolve.PermissionDenyAll, resolve.PermissionRules:
	case "":
		return taskInvalid(field+".mode", ReasonRequired, "%s.mode is required (allow_all, deny_all or rules)", field)
	default:
		return taskInvalid(field+".mode", ReasonInvalidValue, "%s.mode %s is not allow_all, deny_all or rules", field, printable(string(p.Mode)))
	}
	return cmp.Or(
		checkRules(field, "allow", p.Allow),
		checkRules(field, "deny", p.Deny),
		checkRules(field, "escalate", p.Escalate),
	)
}

// checkRules visits the tools in sorted order, so the first failure
// reported is the same on every run.
func checkRules(parent, name string, rules map[string][]string) error {
	field := parent + "." + name
	for _, tool := range slices.Sorted(maps.Keys(rules)) {
		key := keyPath(field, tool)
		if tool == "" {
			return taskInvalid(key, ReasonEmpty, "%s has an empty tool name", field)
		}
		if err := checkValue(key, &tool); err != nil {
			return err
		}
		for i, pat := range rules[tool] {
			p := indexPath(key, i)
			if pat == "" {
				return taskInvalid(p, ReasonEmpty, "%s is empty", p)
			}
			if i, r := resolve.UnsafeChar(pat); i >= 0 {
				return taskInvalid(p, ReasonInvalidValue, "%s has %s at byte %d", p, resolve.DescribeUnsafe(r), i)
			}
			if !doublestar.ValidatePattern(pat) {
				return taskInvalid(p, ReasonInvalidGlob, "%s %s is not a valid glob pattern", p, printable(pat))
			}
		}
	}
	return nil
}

// peekTaskID reads a valid top-level task_id from data that failed
// strict decoding, so the failure can still name its task. Any doubt (a
// task_id repeated, cut short, not a string, not a valid id, or after a
// syntax error) gives "".
func peekTaskID(data []byte) string {
	var w struct {
		TaskID member `json:"task_id"`
	}
	err := json.Unmarshal(data, &w, jsontext.AllowDuplicateNames(true))
	var sy *jsontext.SyntacticError
	if m := w.TaskID; m.n == 1 && !(errors.As(err, &sy) && underMember(sy.JSONPointer, "task_id")) {
		if id, err := jsonString(data[m.start:m.end]); err == nil && validTaskID(id) == "" {
			return id
		}
	}
	return ""
}

// Overrides converts the task's overrides (and its Modes and Skills) into the
// resolver's TaskOverrides. Absent stays nil and empty stays empty;
// slices are shared, not copied (the resolver never mutates its input).
func (t Task) Overrides() resolve.TaskOverrides {
	out := resolve.TaskOverrides{Modes: t.Modes, Skills: t.Skills}
	if o := t.Override; o != nil {
		out.Model = o.Model
		out.Effort = o.Effort
		out.ExtraPrompt = o.ExtraPrompt
		out.Tools = o.Tools
		out.Permissions = o.Permissions
		out.Yolo = o.Yolo
		out.Bypass = o.Bypass
		out.FastMode = o.FastMode
		out.LionSystem = o.LionSystem
	}
	return out
}
