package resolve

import (
	"fmt"
	"path"
	"slices"
	"unicode/utf8"
)

// Expand finds the model of tier in m: the tier's own model (via
// "tier"), else, when m allows fallback, the first tier after it in the
// fallback order that supported allows and that has a model (via
// "fallback:<tier>"). supported is the role's tier list; empty allows
// every tier. tried lists the tiers looked at, in order. ok is false when
// none of them has a model, and for a tier m does not hold: a model is
// never invented. Resolve (step 4b), validation and the roster share it.
func (m *ModelCatalog) Expand(tier string, supported []string) (model, via string, tried []string, ok bool) {
	if m == nil {
		return "", "", nil, false
	}
	v, known := m.Tiers[tier]
	if !known {
		return "", "", nil, false
	}
	tried = []string{tier}
	if v != nil && *v != "" {
		return *v, "tier", tried, true
	}
	if !m.AllowFallback {
		return "", "", tried, false
	}
	// The tiers after tier in the fallback order: all of them when tier
	// is not in it.
	order := m.Fallback
	if i := slices.Index(order, tier); i >= 0 {
		order = order[i+1:]
	}
	for _, t := range order {
		if len(supported) > 0 && !slices.Contains(supported, t) {
			continue
		}
		tried = append(tried, t)
		if v := m.Tiers[t]; v != nil && *v != "" {
			return *v, "fallback:" + t, tried, true
		}
	}
	return "", "", tried, false
}

// MaxSkillPatternLen bounds a skill pattern (bytes). A skill name is at
// most MaxNameLen bytes, so a longer pattern only costs matching time.
const MaxSkillPatternLen = 2 * MaxNameLen

// ValidateSkillPattern checks a skill pattern from a task or a file:
// 1–MaxSkillPatternLen bytes of valid UTF-8 without control or format
// characters (UnsafeChar), and a valid path.Match pattern. A pattern that can match no skill name
// (one holding '/' or an upper-case letter) is valid here and fails
// resolution with skill_unmatched, as any pattern matching nothing does.
// field names the offending field for Subject.
func ValidateSkillPattern(field, pattern string) error {
	return invalidField(field, pattern, skillPatternProblem(pattern))
}

func skillPatternProblem(p string) string {
	switch {
	case p == "":
		return "is empty"
	case len(p) > MaxSkillPatternLen:
		return fmt.Sprintf("is longer than %d bytes", MaxSkillPatternLen)
	case !utf8.ValidString(p):
		return "is not valid UTF-8"
	}
	if i, r := UnsafeChar(p); i >= 0 {
		return fmt.Sprintf("has %s at byte %d", DescribeUnsafe(r), i)
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Sprintf("%q is not a valid glob pattern (path.Match syntax)", printable(p))
	}
	return ""
}

// MatchSkills returns the skills (a list in lexical order, as discovery
// gives it) that at least one of patterns matches, in that order. It is
// what a pack entry's patterns admit before any task narrows them; an
// invalid pattern matches nothing.
func MatchSkills(patterns []string, skills []Skill) []Skill {
	out := []Skill{}
	for _, s := range skills {
		if slices.ContainsFunc(patterns, func(p string) bool { return globMatch(p, s.Name) }) {
			out = append(out, s)
		}
	}
	return out
}

// globMatch reports whether the path.Match pattern p matches name; an
// invalid pattern matches nothing.
func globMatch(p, name string) bool {
	m, err := path.Match(p, name)
	return err == nil && m
}
