package resolve

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Code is a stable failure code. Codes are public API: they appear in
// failure events and subjects (rolecall.specs.failed.<code>).
type Code string

// Resolver codes, in validation order (docs/CONFIG.md).
const (
	CodeRoleUnknown                    Code = "role_unknown"
	CodeExternalProfileMissing         Code = "external_profile_missing"
	CodeExternalProfileNameMismatch    Code = "external_profile_name_mismatch"
	CodeExternalProfileInactive        Code = "external_profile_inactive"
	CodeExternalRefRequiresReplacement Code = "external_ref_requires_replacement"
	CodeReplacementRequiresExternalRef Code = "replacement_requires_external_ref"
	CodeOverlayRoleMissing             Code = "overlay_role_missing"
	CodeOverlayRoleMismatch            Code = "overlay_role_mismatch"
	CodeReplacementHasBaseRole         Code = "replacement_has_base_role"
	CodeProfileDispositionRequired     Code = "profile_disposition_required"
	CodeRoleMissingFromPack            Code = "role_missing_from_pack"
	CodeRoleInactive                   Code = "role_inactive"
	CodeModelUnresolved                Code = "model_unresolved"
	CodeTierUnknown                    Code = "tier_unknown"
	CodeTierUnsupported                Code = "tier_unsupported"
	CodeTierUnavailable                Code = "tier_unavailable"
	CodeModesOnReplacement             Code = "modes_on_replacement"
	CodeModeUnknown                    Code = "mode_unknown"
	CodeModeDuplicate                  Code = "mode_duplicate"
	CodeModeDisallowed                 Code = "mode_disallowed"
	CodeModeConflict                   Code = "mode_conflict"
	CodePackDefaultInvalid             Code = "pack_default_invalid"
	CodeSkillUnmatched                 Code = "skill_unmatched"
	CodeSkillOverlap                   Code = "skill_overlap"
	CodeResumeWithoutTimeout           Code = "resume_without_timeout"
)

// Stage codes: produced outside the resolver, carried in the same failure
// payload. They live here so one type names every code.
const (
	CodeEventInvalid      Code = "event_invalid"
	CodeTaskInvalid       Code = "task_invalid"
	CodePackNotFound      Code = "pack_not_found"
	CodePackInvalid       Code = "pack_invalid"
	CodeProfileInvalid    Code = "profile_invalid"
	CodeProfileDuplicate  Code = "profile_duplicate"
	CodeCatalogInvalid    Code = "catalog_invalid"
	CodePathEscape        Code = "path_escape"
	CodeMaterializeFailed Code = "materialize_failed"
	CodeDeliveryExhausted Code = "delivery_exhausted"
	// Pack composition and skill sources (discover).
	CodePlaceholderForbidden  Code = "placeholder_forbidden"
	CodePlaceholderUnresolved Code = "placeholder_unresolved"
	CodeSourceMissing         Code = "source_missing"
	CodeSkillDuplicate        Code = "skill_duplicate"
)

// CodeConfigInvalid is a bad rolecall.yaml, or a file it names such as
// preamble_file (stage discover); see docs/DECISIONS.md.
const CodeConfigInvalid Code = "config_invalid"

// Stage names where a failure can arise.
type Stage string

const (
	StageDecode      Stage = "decode"
	StageDiscover    Stage = "discover"
	StageResolve     Stage = "resolve"
	StageMaterialize Stage = "materialize"
	StageDeliver     Stage = "deliver"
)

var codeStage = map[Code]Stage{
	CodeEventInvalid: StageDecode, CodeTaskInvalid: StageDecode,
	CodePackNotFound: StageDiscover, CodePackInvalid: StageDiscover,
	CodeProfileInvalid: StageDiscover, CodeProfileDuplicate: StageDiscover,
	CodeCatalogInvalid: StageDiscover, CodePathEscape: StageDiscover,
	CodeConfigInvalid:        StageDiscover,
	CodePlaceholderForbidden: StageDiscover, CodePlaceholderUnresolved: StageDiscover,
	CodeSourceMissing: StageDiscover, CodeSkillDuplicate: StageDiscover,
	CodeMaterializeFailed: StageMaterialize,
	CodeDeliveryExhausted: StageDeliver,
}

// Stage returns the stage a code belongs to; unknown codes and resolver codes
// are StageResolve.
func (c Code) Stage() Stage {
	if s, ok := codeStage[c]; ok {
		return s
	}
	return StageResolve
}

// ResolverCodes lists the resolver codes in validation order.
func ResolverCodes() []Code {
	return []Code{
		CodeRoleUnknown,
		CodeExternalProfileMissing, CodeExternalProfileNameMismatch, CodeExternalProfileInactive,
		CodeExternalRefRequiresReplacement, CodeReplacementRequiresExternalRef,
		CodeOverlayRoleMissing, CodeOverlayRoleMismatch, CodeReplacementHasBaseRole,
		CodeProfileDispositionRequired,
		CodeRoleMissingFromPack, CodeRoleInactive,
		CodeModelUnresolved,
		CodeTierUnknown, CodeTierUnsupported, CodeTierUnavailable,
		CodeModesOnReplacement, CodeModeUnknown, CodeModeDuplicate, CodeModeDisallowed, CodeModeConflict,
		CodePackDefaultInvalid,
		CodeSkillUnmatched, CodeSkillOverlap,
		CodeResumeWithoutTimeout,
	}
}

// ResolutionError is the typed failure of Resolve (and of ParseRoleToken,
// with CodeTaskInvalid). Match it with errors.As, or compare codes with
// errors.Is against another *ResolutionError carrying only a Code.
type ResolutionError struct {
	Code Code
	// Subject is the offending name or field path; "" means none (null).
	Subject string
	// Details is a small JSON-ready object; never nil in values Resolve returns.
	Details map[string]any
	// Message is a human sentence; Error() falls back to a generated one.
	Message string
}

func (e *ResolutionError) Error() string {
	if e.Message != "" {
		return string(e.Code) + ": " + e.Message
	}
	if e.Subject != "" {
		return fmt.Sprintf("%s: %q", e.Code, e.Subject)
	}
	return string(e.Code)
}

// Is reports whether target is a *ResolutionError with the same Code, so
// errors.Is(err, &ResolutionError{Code: CodeModeUnknown}) works.
func (e *ResolutionError) Is(target error) bool {
	t, ok := target.(*ResolutionError)
	return ok && t.Code == e.Code
}

func fail(code Code, subject string, details map[string]any, format string, args ...any) *ResolutionError {
	if details == nil {
		details = map[string]any{}
	}
	return &ResolutionError{Code: code, Subject: subject, Details: details, Message: fmt.Sprintf(format, args...)}
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// sortedKeys is m's keys in order: [], not nil, for an empty m, as an
// error's details list them.
func sortedKeys[V any](m map[string]V) []string {
	keys := slices.AppendSeq(make([]string, 0, len(m)), maps.Keys(m))
	slices.Sort(keys)
	return keys
}
