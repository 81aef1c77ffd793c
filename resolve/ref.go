package resolve

import (
	"fmt"
	"strings"
)

// ExternalPrefix marks an explicit replacement identity in a role token.
const ExternalPrefix = "external:"

// MaxNameLen bounds every name taken from a task or a file.
const MaxNameLen = 64

// RoleRef selects an identity: a built-in RoleName or an ExternalRef.
type RoleRef interface {
	// Token is the surface form: "architect" or "external:<name>".
	Token() string
	isRoleRef()
}

// RoleName selects a built-in Role by name; it never selects a profile.
type RoleName string

// ExternalRef explicitly selects a replacement profile by name.
type ExternalRef struct{ Name string }

func (r RoleName) Token() string    { return string(r) }
func (RoleName) isRoleRef()         {}
func (r ExternalRef) Token() string { return ExternalPrefix + r.Name }
func (ExternalRef) isRoleRef()      {}

// ParseRoleToken parses "name" or "external:name". A malformed token is a
// *ResolutionError with CodeTaskInvalid.
func ParseRoleToken(token string) (RoleRef, error) {
	if rest, ok := strings.CutPrefix(token, ExternalPrefix); ok {
		if err := ValidateName("role", rest); err != nil {
			return nil, err
		}
		return ExternalRef{Name: rest}, nil
	}
	if err := ValidateName("role", token); err != nil {
		return nil, err
	}
	return RoleName(token), nil
}

// ValidateName checks a Role, Mode, pack or profile name: 1–64 characters
// of lowercase ASCII letters, digits, '-' and '_', starting with a letter or
// digit. The grammar is deliberately narrow: it excludes path separators,
// dots (so no ".."), '%' (so no percent-encoded escapes), control characters
// and every non-ASCII look-alike, so a name can be used as a file stem
// without further checks. field names the task field for Subject.
func ValidateName(field, name string) error {
	return invalidField(field, name, nameProblem(name))
}

// invalidField is the task_invalid error of a field whose value has
// problem msg (nil when msg is empty).
func invalidField(field, value, msg string) error {
	if msg == "" {
		return nil
	}
	return fail(CodeTaskInvalid, field, map[string]any{"field": field, "value": printable(value)}, "%s %s", field, msg)
}

func nameProblem(name string) string {
	if name == "" {
		return "is empty"
	}
	if len(name) > MaxNameLen {
		return fmt.Sprintf("is longer than %d bytes", MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '-' || c == '_') && i > 0:
		default:
			return fmt.Sprintf("%q has a character outside [a-z0-9_-] at byte %d", printable(name), i)
		}
	}
	return ""
}

// printable bounds and escapes a hostile value before it is echoed back.
func printable(s string) string {
	if len(s) > 2*MaxNameLen {
		s = s[:2*MaxNameLen] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
