package resolve_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/resolve"
)

// errorCase expects Resolve to fail with exactly this code, subject and
// details. Names start with the expected code so the coverage test below can
// check that every resolver code is reached.
type errorCase struct {
	name    string
	ref     resolve.RoleRef
	in      resolve.Inputs
	code    resolve.Code
	subject string
	details map[string]any
}

func noModel(in *resolve.Inputs) { in.Defaults.Model = nil }

func errorCases() []errorCase {
	none := map[string]any{}
	disabled := func(p *resolve.ExternalProfile) { p.Enabled = ptr(false) }
	return []errorCase{
		// 1. classify identity
		{name: "role_unknown: a bare name not in the catalog",
			ref: casts("ghost"), in: inputs(),
			code: resolve.CodeRoleUnknown, subject: "ghost", details: none},
		{name: "role_unknown: a bare name is not rescued by a same-named replacement profile",
			ref: casts("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter"))),
			code: resolve.CodeRoleUnknown, subject: "ghostwriter", details: none},
		{name: "role_unknown: no catalog at all",
			ref: casts("architect"), in: inputs(func(in *resolve.Inputs) { in.Catalog = nil }),
			code: resolve.CodeRoleUnknown, subject: "architect", details: none},

		// 4b. tier expansion
		{name: "tier_unknown: a tier symbol with no model catalog",
			ref: casts("architect"), in: inputs(withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("tier:strong") })),
			code: resolve.CodeTierUnknown, subject: "tier:strong", details: map[string]any{"tier": "strong", "known": []string{}}},
		{name: "tier_unknown: a tier the catalog does not name",
			ref: casts("architect"), in: inputs(withModels(), withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("tier:huge") })),
			code: resolve.CodeTierUnknown, subject: "tier:huge", details: map[string]any{"tier": "huge", "known": []string{"balanced", "cheap", "strong"}}},
		{name: "tier_unsupported: a tier the role's entry does not list",
			ref: casts("architect"), in: inputs(withModels(), withEntry("architect", func(e *resolve.PackEntry) { e.Tiers = []string{"strong", "balanced"} }),
				withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("tier:cheap") })),
			code: resolve.CodeTierUnsupported, subject: "tier:cheap", details: map[string]any{"tier": "cheap", "supported": []string{"strong", "balanced"}}},
		{name: "tier_unavailable: a tier with no model and no fallback allowed",
			ref: casts("architect"), in: inputs(withModels(func(m *resolve.ModelCatalog) { m.Tiers["strong"] = nil }),
				withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("tier:strong") })),
			code: resolve.CodeTierUnavailable, subject: "tier:strong", details: map[string]any{"tier": "strong", "allow_fallback": false, "tried": []string{"strong"}}},
		{name: "tier_unavailable: the fallback walk finds no tier with a model",
			ref: casts("architect"), in: inputs(withModels(func(m *resolve.ModelCatalog) {
				m.AllowFallback, m.Tiers["balanced"], m.Tiers["cheap"] = true, nil, nil
			}), withTask(func(t *resolve.TaskOverrides) { t.Model = ptr("tier:balanced") })),
			code: resolve.CodeTierUnavailable, subject: "tier:balanced", details: map[string]any{"tier": "balanced", "allow_fallback": true, "tried": []string{"balanced", "cheap"}}},

		// 6b. skills
		{name: "skill_unmatched: a pack pattern that matches no skill",
			ref: casts("architect"), in: inputs(withSkills("adr-writing", "code-review"), withEntry("architect", func(e *resolve.PackEntry) { e.Skills = []string{"adr-*", "diagram-*"} })),
			code: resolve.CodeSkillUnmatched, subject: "diagram-*", details: map[string]any{"pattern": "diagram-*", "list": "pack entry"}},
		{name: "skill_unmatched: a task pattern reaching outside what the entry admits",
			ref: casts("architect"), in: inputs(withSkills("adr-writing", "code-review"), withEntry("architect", func(e *resolve.PackEntry) { e.Skills = []string{"adr-*"} }),
				withTask(func(t *resolve.TaskOverrides) { t.Skills = []string{"code-*"} })),
			code: resolve.CodeSkillUnmatched, subject: "code-*", details: map[string]any{"pattern": "code-*", "list": "task"}},
		{name: "skill_unmatched: a task pattern on a replacement, which admits none",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter")), withSkills("adr-writing"),
				withTask(func(t *resolve.TaskOverrides) { t.Skills = []string{"adr-writing"} })),
			code: resolve.CodeSkillUnmatched, subject: "adr-writing", details: map[string]any{"pattern": "adr-writing", "list": "task"}},
		{name: "skill_overlap: two pack patterns match one skill",
			ref: casts("architect"), in: inputs(withSkills("adr-writing", "code-review"), withEntry("architect", func(e *resolve.PackEntry) { e.Skills = []string{"adr-*", "*-writing"} })),
			code: resolve.CodeSkillOverlap, subject: "adr-writing", details: map[string]any{"skill": "adr-writing", "patterns": []string{"adr-*", "*-writing"}}},
		{name: "skill_overlap: two task patterns match one skill",
			ref: casts("architect"), in: inputs(withSkills("adr-writing", "code-review"), withEntry("architect", func(e *resolve.PackEntry) { e.Skills = []string{"*"} }),
				withTask(func(t *resolve.TaskOverrides) { t.Skills = []string{"code-review", "code-*"} })),
			code: resolve.CodeSkillOverlap, subject: "code-review", details: map[string]any{"skill": "code-review", "patterns": []string{"code-review", "code-*"}}},

		// 2. profile and disposition
		{name: "external_profile_missing: external:<name> with no supplied profile",
			ref: external("ghostwriter"), in: inputs(),
			code: resolve.CodeExternalProfileMissing, subject: "ghostwriter", details: none},
		{name: "external_profile_name_mismatch: the supplied profile has another name",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("other"))),
			code: resolve.CodeExternalProfileNameMismatch, subject: "ghostwriter",
			details: map[string]any{"expected": "ghostwriter", "supplied": "other"}},
		{name: "external_profile_inactive: an explicitly selected disabled replacement",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter", disabled))),
			code: resolve.CodeExternalProfileInactive, subject: "ghostwriter", details: none},
		{name: "external_profile_inactive: a disabled overlay for a bare Role",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect", disabled))),
			code: resolve.CodeExternalProfileInactive, subject: "tuned", details: none},
		{name: "external_ref_requires_replacement: external:<name> naming an overlay",
			ref: external("tuned"), in: inputs(withProfile(overlay("tuned", "architect"))),
			code: resolve.CodeExternalRefRequiresReplacement, subject: "tuned", details: none},
		{name: "replacement_requires_external_ref: a replacement supplied with a bare Role",
			ref: casts("architect"), in: inputs(withProfile(replacement("ghostwriter"))),
			code: resolve.CodeReplacementRequiresExternalRef, subject: "ghostwriter", details: map[string]any{"role": "architect"}},
		{name: "replacement_requires_external_ref: a legacy profile (a replacement) with a bare Role",
			ref: casts("architect"), in: inputs(withProfile(legacy("architect"))),
			code: resolve.CodeReplacementRequiresExternalRef, subject: "architect", details: map[string]any{"role": "architect"}},
		{name: "overlay_role_missing: an overlay without base_role",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.BaseRole = nil }))),
			code: resolve.CodeOverlayRoleMissing, subject: "tuned", details: map[string]any{"base_role": nil}},
		{name: "overlay_role_missing: an overlay whose base_role is not in the catalog",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "ghost"))),
			code: resolve.CodeOverlayRoleMissing, subject: "tuned", details: map[string]any{"base_role": "ghost"}},
		{name: "overlay_role_mismatch: an overlay for another Role",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "reviewer"))),
			code: resolve.CodeOverlayRoleMismatch, subject: "tuned", details: map[string]any{"base_role": "reviewer", "role": "architect"}},
		{name: "replacement_has_base_role: a replacement declaring base_role",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.BaseRole = ptr("architect") }))),
			code: resolve.CodeReplacementHasBaseRole, subject: "ghostwriter", details: map[string]any{"base_role": "architect"}},
		{name: "replacement_has_base_role: a legacy profile is a replacement, so base_role is forbidden too",
			ref: external("ghostwriter"), in: inputs(withProfile(legacy("ghostwriter", func(p *resolve.ExternalProfile) { p.BaseRole = ptr("architect") }))),
			code: resolve.CodeReplacementHasBaseRole, subject: "ghostwriter", details: map[string]any{"base_role": "architect"}},
		{name: "profile_disposition_required: a legacy profile while legacy profiles are rejected",
			ref: external("ghostwriter"), in: inputs(withProfile(legacy("ghostwriter")), rejectLegacy),
			code: resolve.CodeProfileDispositionRequired, subject: "ghostwriter", details: none},
		{name: "profile_disposition_required: also for a bare Role",
			ref: casts("architect"), in: inputs(withProfile(legacy("old")), rejectLegacy),
			code: resolve.CodeProfileDispositionRequired, subject: "old", details: none},

		// 3. casts identity in the selected pack
		{name: "role_missing_from_pack: a catalog Role the pack does not configure",
			ref: casts("orphan"), in: inputs(),
			code: resolve.CodeRoleMissingFromPack, subject: "orphan", details: map[string]any{"pack": "team"}},
		{name: "role_missing_from_pack: no pack at all (never another pack)",
			ref: casts("architect"), in: inputs(func(in *resolve.Inputs) { in.Pack = nil }),
			code: resolve.CodeRoleMissingFromPack, subject: "architect", details: map[string]any{"pack": nil}},
		{name: "role_inactive: the entry says active: false",
			ref: casts("dormant"), in: inputs(),
			code: resolve.CodeRoleInactive, subject: "dormant", details: map[string]any{"pack": "team"}},

		// 4. model
		{name: "model_unresolved: no level sets a model",
			ref: casts("reviewer"), in: inputs(noModel),
			code: resolve.CodeModelUnresolved, subject: "reviewer", details: none},
		{name: "model_unresolved: a replacement without profile or runtime model (the pack is skipped)",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter")), noModel,
				withEntry("ghostwriter", func(e *resolve.PackEntry) { e.Model = ptr("pack-model") })),
			code: resolve.CodeModelUnresolved, subject: "ghostwriter", details: none},
		{name: "model_unresolved: an explicit empty pack model is a value, not absence (no truthiness)",
			ref: casts("architect"), in: inputs(withEntry("architect", func(e *resolve.PackEntry) { e.Model = ptr("") })),
			code: resolve.CodeModelUnresolved, subject: "architect", details: none},

		// 5.–6. Modes
		{name: "modes_on_replacement: a replacement with requested Modes",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter")), taskModes("systematic")),
			code: resolve.CodeModesOnReplacement, subject: "ghostwriter", details: map[string]any{"modes": []string{"systematic"}}},
		{name: "mode_unknown: a requested Mode not in the catalog",
			ref: casts("architect"), in: inputs(taskModes("systematic", "ghost")),
			code: resolve.CodeModeUnknown, subject: "ghost", details: none},
		{name: "mode_duplicate: a requested Mode listed twice",
			ref: casts("architect"), in: inputs(taskModes("systematic", "premortem", "systematic")),
			code: resolve.CodeModeDuplicate, subject: "systematic", details: none},
		{name: "mode_disallowed: a requested Mode outside a non-empty allowlist",
			ref: casts("reviewer"), in: inputs(taskModes("adversarial", "socratic")),
			code: resolve.CodeModeDisallowed, subject: "socratic",
			details: map[string]any{"mode": "socratic", "allowed": []string{"adversarial", "premortem", "fast", "slow"}}},
		{name: "mode_conflict: the earlier Mode lists the later one",
			ref: casts("architect"), in: inputs(taskModes("fast", "slow")),
			code: resolve.CodeModeConflict, subject: "slow", details: map[string]any{"modes": []string{"fast", "slow"}}},
		{name: "mode_conflict: the later Mode lists the earlier one (either side conflicts)",
			ref: casts("architect"), in: inputs(taskModes("slow", "fast")),
			code: resolve.CodeModeConflict, subject: "fast", details: map[string]any{"modes": []string{"slow", "fast"}}},
		{name: "pack_default_invalid: an unknown default Mode",
			ref: casts("architect"), in: inputs(withEntry("architect", func(e *resolve.PackEntry) { e.DefaultModes = []string{"systematic", "ghost"} })),
			code: resolve.CodePackDefaultInvalid, subject: "team/architect",
			details: map[string]any{"pack": "team", "role": "architect", "mode": "ghost", "reason": "mode_unknown"}},
		{name: "pack_default_invalid: a duplicated default Mode",
			ref: casts("architect"), in: inputs(withEntry("architect", func(e *resolve.PackEntry) { e.DefaultModes = []string{"premortem", "premortem"} })),
			code: resolve.CodePackDefaultInvalid, subject: "team/architect",
			details: map[string]any{"pack": "team", "role": "architect", "mode": "premortem", "reason": "mode_duplicate"}},
		{name: "pack_default_invalid: a default Mode outside the entry's own allowlist",
			ref: casts("architect"), in: inputs(withEntry("architect", func(e *resolve.PackEntry) { e.ModesAllow = []string{"systematic"} })),
			code: resolve.CodePackDefaultInvalid, subject: "team/architect",
			details: map[string]any{"pack": "team", "role": "architect", "mode": "premortem", "reason": "mode_disallowed"}},
		{name: "pack_default_invalid: conflicting default Modes",
			ref: casts("architect"), in: inputs(withEntry("architect", func(e *resolve.PackEntry) { e.DefaultModes = []string{"systematic", "fast"} })),
			code: resolve.CodePackDefaultInvalid, subject: "team/architect",
			details: map[string]any{"pack": "team", "role": "architect", "mode": "fast", "reason": "mode_conflict"}},

		// 7. flags and deadline
		{name: "resume_without_timeout: an overlay resumes with no deadline",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) { p.ResumeOnTimeout = true }))),
			code: resolve.CodeResumeWithoutTimeout, subject: "tuned", details: none},
		{name: "resume_without_timeout: a replacement resumes with no deadline",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.ResumeOnTimeout = true }))),
			code: resolve.CodeResumeWithoutTimeout, subject: "ghostwriter", details: none},
	}
}

// orderCases hold two (or more) faults; the one earlier in the validation
// order of docs/CONFIG.md must win. Names say "<winner> beats <loser>".
func orderCases() []errorCase {
	none := map[string]any{}
	disabled := func(p *resolve.ExternalProfile) { p.Enabled = ptr(false) }
	resumeNoTimeout := func(p *resolve.ExternalProfile) { p.ResumeOnTimeout = true }
	return []errorCase{
		{name: "role_unknown beats overlay_role_mismatch",
			ref: casts("ghost"), in: inputs(withProfile(overlay("tuned", "reviewer"))),
			code: resolve.CodeRoleUnknown, subject: "ghost", details: none},
		{name: "external_profile_name_mismatch beats external_profile_inactive",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("other", disabled))),
			code: resolve.CodeExternalProfileNameMismatch, subject: "ghostwriter",
			details: map[string]any{"expected": "ghostwriter", "supplied": "other"}},
		{name: "external_profile_inactive beats external_ref_requires_replacement",
			ref: external("tuned"), in: inputs(withProfile(overlay("tuned", "architect", disabled))),
			code: resolve.CodeExternalProfileInactive, subject: "tuned", details: none},
		{name: "external_profile_inactive beats replacement_requires_external_ref",
			ref: casts("architect"), in: inputs(withProfile(replacement("ghostwriter", disabled))),
			code: resolve.CodeExternalProfileInactive, subject: "ghostwriter", details: none},
		{name: "profile_disposition_required beats replacement_has_base_role (the disposition is checked before base_role)",
			ref: external("ghostwriter"), in: inputs(withProfile(legacy("ghostwriter", func(p *resolve.ExternalProfile) { p.BaseRole = ptr("architect") })), rejectLegacy),
			code: resolve.CodeProfileDispositionRequired, subject: "ghostwriter", details: none},
		{name: "overlay_role_mismatch beats role_missing_from_pack",
			ref: casts("orphan"), in: inputs(withProfile(overlay("tuned", "architect"))),
			code: resolve.CodeOverlayRoleMismatch, subject: "tuned", details: map[string]any{"base_role": "architect", "role": "orphan"}},
		{name: "overlay_role_missing beats role_inactive",
			ref: casts("dormant"), in: inputs(withProfile(overlay("tuned", "dormant", func(p *resolve.ExternalProfile) { p.BaseRole = nil }))),
			code: resolve.CodeOverlayRoleMissing, subject: "tuned", details: map[string]any{"base_role": nil}},
		{name: "role_missing_from_pack beats mode_unknown",
			ref: casts("orphan"), in: inputs(taskModes("ghost")),
			code: resolve.CodeRoleMissingFromPack, subject: "orphan", details: map[string]any{"pack": "team"}},
		{name: "role_inactive beats model_unresolved",
			ref: casts("dormant"), in: inputs(noModel),
			code: resolve.CodeRoleInactive, subject: "dormant", details: map[string]any{"pack": "team"}},
		{name: "model_unresolved beats mode_unknown",
			ref: casts("reviewer"), in: inputs(noModel, taskModes("ghost")),
			code: resolve.CodeModelUnresolved, subject: "reviewer", details: none},
		{name: "model_unresolved beats pack_default_invalid",
			ref: casts("scout"), in: inputs(noModel, withEntry("scout", func(e *resolve.PackEntry) { e.DefaultModes = []string{"ghost"} })),
			code: resolve.CodeModelUnresolved, subject: "scout", details: none},
		{name: "external_profile_missing beats modes_on_replacement",
			ref: external("ghostwriter"), in: inputs(taskModes("systematic")),
			code: resolve.CodeExternalProfileMissing, subject: "ghostwriter", details: none},
		{name: "replacement_has_base_role beats modes_on_replacement",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.BaseRole = ptr("architect") })), taskModes("systematic")),
			code: resolve.CodeReplacementHasBaseRole, subject: "ghostwriter", details: map[string]any{"base_role": "architect"}},
		{name: "model_unresolved beats modes_on_replacement",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter")), noModel, taskModes("systematic")),
			code: resolve.CodeModelUnresolved, subject: "ghostwriter", details: none},
		{name: "mode_unknown beats a mode_conflict earlier in the list (passes, not positions, come first)",
			ref: casts("architect"), in: inputs(taskModes("fast", "slow", "ghost")),
			code: resolve.CodeModeUnknown, subject: "ghost", details: none},
		{name: "mode_unknown: the first unknown name in list order wins",
			ref: casts("architect"), in: inputs(taskModes("ghost-a", "systematic", "ghost-b")),
			code: resolve.CodeModeUnknown, subject: "ghost-a", details: none},
		{name: "mode_duplicate beats a mode_disallowed earlier in the list",
			ref: casts("reviewer"), in: inputs(taskModes("socratic", "fast", "fast")),
			code: resolve.CodeModeDuplicate, subject: "fast", details: none},
		{name: "mode_disallowed beats a mode_conflict earlier in the list",
			ref: casts("reviewer"), in: inputs(taskModes("fast", "slow", "socratic")),
			code: resolve.CodeModeDisallowed, subject: "socratic",
			details: map[string]any{"mode": "socratic", "allowed": []string{"adversarial", "premortem", "fast", "slow"}}},
		{name: "mode_disallowed: the first disallowed name in list order wins",
			ref: casts("reviewer"), in: inputs(taskModes("adversarial", "systematic", "socratic")),
			code: resolve.CodeModeDisallowed, subject: "systematic",
			details: map[string]any{"mode": "systematic", "allowed": []string{"adversarial", "premortem", "fast", "slow"}}},
		{name: "mode_conflict: pairs are tried i<j in order, so (fast, systematic) beats (fast, slow)",
			ref: casts("architect"), in: inputs(taskModes("fast", "premortem", "systematic", "slow")),
			code: resolve.CodeModeConflict, subject: "systematic", details: map[string]any{"modes": []string{"fast", "systematic"}}},
		{name: "pack_default_invalid: an unknown default beats an earlier conflicting pair",
			ref: casts("scout"), in: inputs(withEntry("scout", func(e *resolve.PackEntry) { e.DefaultModes = []string{"fast", "slow", "ghost"} })),
			code: resolve.CodePackDefaultInvalid, subject: "team/scout",
			details: map[string]any{"pack": "team", "role": "scout", "mode": "ghost", "reason": "mode_unknown"}},
		{name: "mode_disallowed: task Modes are checked against the allowlist, not rewritten to pack_default_invalid",
			ref: casts("architect"), in: inputs(withEntry("architect", func(e *resolve.PackEntry) { e.ModesAllow = []string{"systematic"} }), taskModes("premortem")),
			code: resolve.CodeModeDisallowed, subject: "premortem",
			details: map[string]any{"mode": "premortem", "allowed": []string{"systematic"}}},
		{name: "modes_on_replacement beats resume_without_timeout",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter", resumeNoTimeout)), taskModes("systematic")),
			code: resolve.CodeModesOnReplacement, subject: "ghostwriter", details: map[string]any{"modes": []string{"systematic"}}},
		{name: "mode_conflict beats resume_without_timeout",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect", resumeNoTimeout)), taskModes("fast", "slow")),
			code: resolve.CodeModeConflict, subject: "slow", details: map[string]any{"modes": []string{"fast", "slow"}}},
		{name: "pack_default_invalid beats resume_without_timeout",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect", resumeNoTimeout)),
				withEntry("architect", func(e *resolve.PackEntry) { e.DefaultModes = []string{"ghost"} })),
			code: resolve.CodePackDefaultInvalid, subject: "team/architect",
			details: map[string]any{"pack": "team", "role": "architect", "mode": "ghost", "reason": "mode_unknown"}},
	}
}

func checkError(t *testing.T, tc errorCase) {
	t.Helper()
	got, err := resolve.Resolve(tc.ref, tc.in)
	if err == nil {
		t.Fatalf("Resolve succeeded (model %q, modes %v), want %s", got.Model, got.Identity.Modes, tc.code)
	}
	if diff := cmp.Diff(resolve.ResolvedAgentSpec{}, got); diff != "" {
		t.Errorf("a failed Resolve returned a partial spec (-want +got):\n%s", diff)
	}
	var re *resolve.ResolutionError
	if !errors.As(err, &re) {
		t.Fatalf("error %T %v is not a *resolve.ResolutionError", err, err)
	}
	if re.Code != tc.code {
		t.Errorf("code = %s, want %s (%v)", re.Code, tc.code, err)
	}
	if re.Subject != tc.subject {
		t.Errorf("subject = %q, want %q", re.Subject, tc.subject)
	}
	if diff := cmp.Diff(tc.details, re.Details); diff != "" {
		t.Errorf("details (-want +got):\n%s", diff)
	}
	if re.Message == "" {
		t.Errorf("message is empty")
	}
	if want := string(tc.code) + ": " + re.Message; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if re.Code.Stage() != resolve.StageResolve {
		t.Errorf("stage = %s, want resolve", re.Code.Stage())
	}
}

func TestResolverErrors(t *testing.T) {
	for _, tc := range errorCases() {
		t.Run(tc.name, func(t *testing.T) { checkError(t, tc) })
	}
}

func TestValidationOrder(t *testing.T) {
	for _, tc := range orderCases() {
		t.Run(tc.name, func(t *testing.T) { checkError(t, tc) })
	}
}

// TestEveryResolverCodeIsReached: each of the 25 codes has a case named for
// it, and the case list names no code outside ResolverCodes.
func TestEveryResolverCodeIsReached(t *testing.T) {
	codes := resolve.ResolverCodes()
	if len(codes) != 25 {
		t.Fatalf("ResolverCodes() has %d codes, want 25", len(codes))
	}
	known := map[resolve.Code]bool{}
	for _, c := range codes {
		if known[c] {
			t.Errorf("ResolverCodes() lists %s twice", c)
		}
		known[c] = true
	}
	reached := map[resolve.Code]bool{}
	for _, tc := range errorCases() {
		prefix, _, _ := strings.Cut(tc.name, ":")
		if resolve.Code(prefix) != tc.code {
			t.Errorf("case %q is named for %q but expects %s", tc.name, prefix, tc.code)
		}
		if !known[tc.code] {
			t.Errorf("case %q expects %s, which is not a resolver code", tc.name, tc.code)
		}
		reached[tc.code] = true
	}
	for _, c := range codes {
		if !reached[c] {
			t.Errorf("no error case reaches %s", c)
		}
	}
}

// TestSuccessDespiteFaultyDefaults: an explicit task list (even empty) means
// the pack defaults are never validated, because they are never used.
func TestSuccessDespiteFaultyDefaults(t *testing.T) {
	bad := withEntry("architect", func(e *resolve.PackEntry) { e.DefaultModes = []string{"ghost"} })
	for _, modes := range [][]string{{}, {"premortem"}} {
		got := mustResolve(t, casts("architect"), inputs(bad, taskModes(modes...)))
		if diff := cmp.Diff(modes, got.Identity.Modes); diff != "" {
			t.Errorf("modes (-want +got):\n%s", diff)
		}
	}
}

func TestLegacyDiagnostic(t *testing.T) {
	const want = "External profile 'ghostwriter' has no disposition; treating it as 'replacement' during the compatibility window."
	got := mustResolve(t, external("ghostwriter"), inputs(withProfile(legacy("ghostwriter"))))
	wantDiag := []resolve.Diagnostic{{Code: "legacy_profile_replacement", Message: want}}
	if diff := cmp.Diff(wantDiag, got.Diagnostics); diff != "" {
		t.Fatalf("diagnostics (-want +got):\n%s", diff)
	}
	if resolve.DiagnosticLegacyProfileReplacement != "legacy_profile_replacement" {
		t.Errorf("DiagnosticLegacyProfileReplacement = %q", resolve.DiagnosticLegacyProfileReplacement)
	}

	// Diagnostics never alter behavior: apart from them, a legacy profile
	// resolves exactly like the same profile declared as a replacement.
	explicit := mustResolve(t, external("ghostwriter"), inputs(withProfile(replacement("ghostwriter"))))
	if diff := cmp.Diff([]resolve.Diagnostic{}, explicit.Diagnostics); diff != "" {
		t.Errorf("explicit replacement diagnostics (-want +got):\n%s", diff)
	}
	got.Diagnostics = explicit.Diagnostics
	if diff := cmp.Diff(explicit, got); diff != "" {
		t.Errorf("legacy and replacement differ beyond diagnostics (-replacement +legacy):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		ref  resolve.RoleRef
		in   resolve.Inputs
	}{
		{"casts", casts("architect"), inputs()},
		{"overlay", casts("architect"), inputs(withProfile(overlay("tuned", "architect")))},
	} {
		if got := mustResolve(t, tc.ref, tc.in); got.Diagnostics == nil || len(got.Diagnostics) != 0 {
			t.Errorf("%s: diagnostics = %#v, want a non-nil empty list", tc.name, got.Diagnostics)
		}
	}
}

func TestErrorMatching(t *testing.T) {
	_, err := resolve.Resolve(casts("architect"), inputs(taskModes("ghost")))
	wrapped := fmt.Errorf("task T-42: %w", err)

	var re *resolve.ResolutionError
	if !errors.As(wrapped, &re) {
		t.Fatalf("errors.As failed on %v", wrapped)
	}
	if re.Code != resolve.CodeModeUnknown || re.Subject != "ghost" {
		t.Errorf("matched %s %q, want mode_unknown \"ghost\"", re.Code, re.Subject)
	}
	if !errors.Is(wrapped, &resolve.ResolutionError{Code: resolve.CodeModeUnknown}) {
		t.Errorf("errors.Is with the same code = false")
	}
	if errors.Is(wrapped, &resolve.ResolutionError{Code: resolve.CodeModeConflict}) {
		t.Errorf("errors.Is with another code = true")
	}
	if errors.Is(wrapped, errors.New("mode_unknown")) {
		t.Errorf("errors.Is with a plain error of the same text = true")
	}
}

func TestResolutionErrorText(t *testing.T) {
	cases := []struct {
		err  resolve.ResolutionError
		want string
	}{
		{resolve.ResolutionError{Code: resolve.CodeModeUnknown, Subject: "x", Message: "mode \"x\" is not in the catalog"}, `mode_unknown: mode "x" is not in the catalog`},
		{resolve.ResolutionError{Code: resolve.CodeModeUnknown, Subject: "x"}, `mode_unknown: "x"`},
		{resolve.ResolutionError{Code: resolve.CodeModelUnresolved}, `model_unresolved`},
	}
	for _, tc := range cases {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

// TestCodeStage: every code of docs/CONFIG.md belongs to its stage.
func TestCodeStage(t *testing.T) {
	want := map[resolve.Code]resolve.Stage{
		resolve.CodeEventInvalid:          resolve.StageDecode,
		resolve.CodeTaskInvalid:           resolve.StageDecode,
		resolve.CodePackNotFound:          resolve.StageDiscover,
		resolve.CodePackInvalid:           resolve.StageDiscover,
		resolve.CodeProfileInvalid:        resolve.StageDiscover,
		resolve.CodeProfileDuplicate:      resolve.StageDiscover,
		resolve.CodeCatalogInvalid:        resolve.StageDiscover,
		resolve.CodePathEscape:            resolve.StageDiscover,
		resolve.CodeMaterializeFailed:     resolve.StageMaterialize,
		resolve.CodeDeliveryExhausted:     resolve.StageDeliver,
		resolve.CodeConfigInvalid:         resolve.StageDiscover,
		resolve.CodePlaceholderForbidden:  resolve.StageDiscover,
		resolve.CodePlaceholderUnresolved: resolve.StageDiscover,
		resolve.CodeSourceMissing:         resolve.StageDiscover,
		resolve.CodeSkillDuplicate:        resolve.StageDiscover,
	}
	for _, c := range resolve.ResolverCodes() {
		want[c] = resolve.StageResolve
	}
	for code, stage := range want {
		if got := code.Stage(); got != stage {
			t.Errorf("%s.Stage() = %s, want %s", code, got, stage)
		}
	}
	if len(want) != 40 {
		t.Errorf("%d codes in total, want 40 (25 resolver + 15 stage)", len(want))
	}
}
