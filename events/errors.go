package events

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/rolecall/rolecall/resolve"
)

// DecodeError is the typed failure of the decode stage. Code is
// resolve.CodeEventInvalid (the envelope is not an acceptable CloudEvent)
// or resolve.CodeTaskInvalid (the task data does not match the task
// schema). Match it with errors.As, or compare codes with errors.Is
// against another *DecodeError carrying only a Code.
type DecodeError struct {
	Code resolve.Code
	// Subject names what is wrong: for event_invalid the attribute or
	// header ("type", "content-type"), for task_invalid the JSON path of
	// the offending field ("overrides.model", "modes[1]"). "" means the
	// message or the data as a whole (null in a failure event).
	Subject string
	// Details always holds "reason" (one of the Reason constants) and,
	// when Subject is set, "attribute" or "field"; never nil.
	Details map[string]any
	// Message is a human sentence without the code.
	Message string
}

func (e *DecodeError) Error() string {
	if e.Message != "" {
		return string(e.Code) + ": " + e.Message
	}
	if e.Subject != "" {
		return fmt.Sprintf("%s: %q", e.Code, e.Subject)
	}
	return string(e.Code)
}

// Is reports whether target is a *DecodeError with the same Code, so
// errors.Is(err, &DecodeError{Code: resolve.CodeTaskInvalid}) works.
func (e *DecodeError) Is(target error) bool {
	t, ok := target.(*DecodeError)
	return ok && t.Code == e.Code
}

// Reason returns Details["reason"], or "" if there is none.
func (e *DecodeError) Reason() string {
	r, _ := e.Details["reason"].(string)
	return r
}

// Reasons: the stable details.reason values of decode failures.
const (
	// event_invalid
	ReasonNotCloudEvent          = "not_cloudevent"           // neither mode applies, or batch/non-JSON format
	ReasonNotJSON                = "not_json"                 // structured body is not a JSON object
	ReasonDuplicateAttribute     = "duplicate_attribute"      // a member or ce- header appears twice
	ReasonInvalidAttributeName   = "invalid_attribute_name"   // not lowercase a-z0-9
	ReasonMissing                = "missing"                  // a required attribute (or the task data) is absent
	ReasonWrongType              = "wrong_type"               // JSON kind does not match
	ReasonInvalidValue           = "invalid_value"            // malformed value (URI, time, encoding, control characters)
	ReasonUnsupportedSpecVersion = "unsupported_specversion"  // specversion other than "1.0"
	ReasonUnsupportedContentType = "unsupported_content_type" // datacontenttype other than application/json
	ReasonUnexpectedEventType    = "unexpected_event_type"    // type is not the one expected here
	ReasonConflict               = "conflict"                 // content-type and ce-datacontenttype disagree
	// task_invalid
	ReasonTooLarge     = "too_large"     // data over DecodeOptions.MaxDataBytes
	ReasonNotObject    = "not_object"    // data is not a JSON object
	ReasonSyntax       = "syntax"        // data is not JSON
	ReasonDuplicateKey = "duplicate_key" // a member name repeats in one object
	ReasonInvalidUTF8  = "invalid_utf8"  // a string is not valid UTF-8
	ReasonTooDeep      = "too_deep"      // nesting beyond the JSON decoder's depth limit
	ReasonUnknownField = "unknown_field" // a member the schema does not define
	ReasonRequired     = "required"      // task_id, role or permissions.mode absent or null
	ReasonEmpty        = "empty"         // "" where a value is required
	ReasonInvalidName  = "invalid_name"  // not a valid name (resolve.ValidateName) or role token
	ReasonInvalidGlob  = "invalid_glob"  // a permission pattern that is not a valid glob
	// ReasonWrongType, ReasonInvalidValue and ReasonMissing are shared.
)

func eventInvalid(attr, reason, format string, args ...any) *DecodeError {
	return decodeError(resolve.CodeEventInvalid, "attribute", attr, reason, fmt.Sprintf(format, args...))
}

func taskInvalid(field, reason, format string, args ...any) *DecodeError {
	return decodeError(resolve.CodeTaskInvalid, "field", field, reason, fmt.Sprintf(format, args...))
}

// decodeError also records a subject, when set, as details[key].
func decodeError(code resolve.Code, key, subject, reason, msg string) *DecodeError {
	d := map[string]any{"reason": reason}
	if subject != "" {
		d[key] = subject
	}
	return &DecodeError{Code: code, Subject: subject, Details: d, Message: msg}
}

// printable bounds and escapes a hostile value before it is echoed back
// in a message, so a failure event never carries a megabyte or a control
// character from its input.
func printable(s string) string {
	const max = 128
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return strconv.Quote(strings.ToValidUTF8(s, "\uFFFD"))
}

// Path rendering: a JSON pointer into task data in the task schema's
// shape, members as ".name", elements as "[i]", permission-map keys (tool
// names) as "[\"key\"]" unless simple. Tokens below the first one the
// schema does not expect are dropped: a 10,000-deep value gets a short
// subject.

type pathState int

const (
	psLeaf pathState = iota // below what the schema expects (the zero value)
	psRoot
	psOverrides
	psPermissions
	psToolMap
	psList
)

// fieldState is the state after a member name in a state; names missing
// here lead to psLeaf.
var fieldState = map[pathState]map[string]pathState{
	psRoot:        {"modes": psList, "skills": psList, "overrides": psOverrides},
	psOverrides:   {"tools": psList, "permissions": psPermissions},
	psPermissions: {"allow": psToolMap, "deny": psToolMap, "escalate": psToolMap},
}

func pointerPath(p jsontext.Pointer) string {
	var path string
	st := psRoot
	for tok := range p.Tokens() {
		switch st {
		case psLeaf:
			return path
		case psList:
			if _, err := strconv.ParseUint(tok, 10, 32); err != nil {
				return path
			}
			path += "[" + tok + "]"
			st = psLeaf
			continue
		case psToolMap:
			path = keyPath(path, tok)
			st = psList
			continue
		}
		path = keyPath(path, tok)
		st = fieldState[st][tok]
	}
	return path
}

// keyPath appends the member key to parent, as rendered above.
func keyPath(parent, key string) string {
	switch {
	case !simpleKey(key):
		return parent + "[" + printable(key) + "]"
	case parent == "":
		return key
	}
	return parent + "." + key
}

func simpleKey(k string) bool {
	return k != "" && len(k) <= 64 && !strings.ContainsFunc(k, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	})
}

func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}
