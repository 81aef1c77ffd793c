package resolve

import (
	"fmt"
	"strings"
)

// Resolve decides the effective agent configuration for ref from in, or
// returns the first *ResolutionError in the validation order of DESIGN.md §4.
// It is pure: it reads nothing but its arguments and never mutates them.
func Resolve(ref RoleRef, in Inputs) (ResolvedAgentSpec, error) {
	var r resolution
	if err := r.run(ref, in); err != nil {
		return ResolvedAgentSpec{}, err
	}
	return r.out, nil
}

// ResolveWithPreamble is Resolve(ref, in) and, second, the system message
// a materializer makes of the result with this preamble: MessageHead +
// BlockSeparator + PromptBody, or PromptBody itself when the head is empty
// (materialize.SystemMessage). The message and the prompt body are one
// allocation, the body its tail, so a caller that needs both — the worker
// publishes both — pays for the prompt once. The preamble decides nothing
// in the result, which equals Resolve's.
func ResolveWithPreamble(ref RoleRef, in Inputs, preamble string) (ResolvedAgentSpec, string, error) {
	r := resolution{preamble: preamble}
	if err := r.run(ref, in); err != nil {
		return ResolvedAgentSpec{}, "", err
	}
	return r.out, r.message, nil
}

// ResolveShared is ResolveWithPreamble without the deep copy that keeps
// the result apart from its inputs: its lists, maps, Role and effort may
// be the inputs' own (the snapshot's, the task's). The system message (and
// the prompt body, its tail) is carved from arena when it is not nil. It
// is for a caller that only reads the result while the inputs stand, as
// the worker does: it encodes the result and drops it. Neither side may
// then be modified; a result handed on to code that might must come from
// Resolve or ResolveWithPreamble, or be copied with Clone. The copy was
// about half of the worker's resolution time (docs/PERFORMANCE.md).
func ResolveShared(ref RoleRef, in Inputs, preamble string, arena *TextArena) (ResolvedAgentSpec, string, error) {
	r := resolution{preamble: preamble, shared: true, arena: arena}
	if err := r.run(ref, in); err != nil {
		return ResolvedAgentSpec{}, "", err
	}
	return r.out, r.message, nil
}

type resolution struct {
	in Inputs
	// role and entry are copies of the catalog's Role and the pack's
	// entry (values, so that holding them allocates nothing); both are
	// unset for a replacement identity.
	role    Role
	entry   PackEntry
	profile *ExternalProfile // the supplied profile, if it applies
	replace bool
	// overlays[:nOverlays] are the casts prompt's overlay blocks.
	overlays  [2]string
	nOverlays int
	out       ResolvedAgentSpec
	// preamble is ResolveWithPreamble's; message is the system message
	// composed with the prompt body (the body when there is no preamble).
	preamble string
	message  string
	// shared and arena are ResolveShared's: the result is not deep-copied
	// at the end, and its text comes from arena (when not nil).
	shared bool
	arena  *TextArena
}

func (r *resolution) run(ref RoleRef, in Inputs) error {
	r.in = in
	if in.Catalog == nil {
		return fail(CodeRoleUnknown, ref.Token(), nil, "no catalog was supplied")
	}
	// 1. classify identity.
	if err := r.classify(ref); err != nil {
		return err
	}
	// 3. casts identity needs an active entry in the selected pack.
	if !r.replace {
		if err := r.packEntry(); err != nil {
			return err
		}
	}
	// 4. model and effort.
	if err := r.modelEffort(); err != nil {
		return err
	}
	// 5.–6. Modes.
	modes, err := r.modes()
	if err != nil {
		return err
	}
	// 7. tools, permissions, flags, artifacts, deadline.
	if err := r.rest(); err != nil {
		return err
	}
	// 8. prompt and sources.
	r.prompt(modes)
	// The result shares the inputs' lists and maps; Resolve and
	// ResolveWithPreamble hand out a deep copy instead.
	r.share()
	if !r.shared {
		r.out = r.out.Clone()
	}
	return nil
}

func (r *resolution) classify(ref RoleRef) error {
	p := r.in.Profile
	switch ref := ref.(type) {
	case RoleName:
		name := string(ref)
		role, ok := r.in.Catalog.Roles[name]
		if !ok {
			return fail(CodeRoleUnknown, name, nil, "role %q is not in the built-in catalog (use %q for a replacement profile)", name, ExternalPrefix+name)
		}
		r.role = role
		r.out.Sources.Identity = "casts:" + name
		if p == nil {
			return nil
		}
		// 2. profile/disposition for a bare built-in Role.
		if !p.IsEnabled() {
			return fail(CodeExternalProfileInactive, p.Name, nil, "external profile %q is disabled", p.Name)
		}
		switch p.Disposition {
		case DispositionOverlay:
		case DispositionLegacy:
			if r.in.Policy.RejectLegacyProfiles {
				return fail(CodeProfileDispositionRequired, p.Name, nil, "external profile %q has no disposition and legacy profiles are rejected", p.Name)
			}
			fallthrough
		default:
			return fail(CodeReplacementRequiresExternalRef, p.Name, map[string]any{"role": name},
				"profile %q is a replacement; select it with %q, not the built-in role %q", p.Name, ExternalPrefix+p.Name, name)
		}
		if p.BaseRole == nil {
			return fail(CodeOverlayRoleMissing, p.Name, map[string]any{"base_role": nil}, "overlay profile %q declares no base_role", p.Name)
		}
		base := *p.BaseRole
		if _, ok := r.in.Catalog.Roles[base]; !ok {
			return fail(CodeOverlayRoleMissing, p.Name, map[string]any{"base_role": base}, "overlay profile %q has base_role %q, which is not in the catalog", p.Name, base)
		}
		if base != name {
			return fail(CodeOverlayRoleMismatch, p.Name, map[string]any{"base_role": base, "role": name}, "overlay profile %q is for role %q, not %q", p.Name, base, name)
		}
		r.profile = p
		return nil
	case ExternalRef:
		r.out.Sources.Identity = ref.Token()
		r.replace = true
		if p == nil {
			return fail(CodeExternalProfileMissing, ref.Name, nil, "no external profile %q was supplied", ref.Name)
		}
		if p.Name != ref.Name {
			return fail(CodeExternalProfileNameMismatch, ref.Name, map[string]any{"expected": ref.Name, "supplied": p.Name},
				"role %q was requested but profile %q was supplied", ref.Token(), p.Name)
		}
		if !p.IsEnabled() {
			return fail(CodeExternalProfileInactive, p.Name, nil, "external profile %q is disabled", p.Name)
		}
		switch p.Disposition {
		case DispositionOverlay:
			return fail(CodeExternalRefRequiresReplacement, p.Name, nil, "profile %q is an overlay; %q selects only replacements", p.Name, ref.Token())
		case DispositionLegacy:
			if r.in.Policy.RejectLegacyProfiles {
				return fail(CodeProfileDispositionRequired, p.Name, nil, "external profile %q has no disposition and legacy profiles are rejected", p.Name)
			}
		}
		if p.BaseRole != nil {
			return fail(CodeReplacementHasBaseRole, p.Name, map[string]any{"base_role": *p.BaseRole}, "replacement profile %q must not declare base_role", p.Name)
		}
		if p.Disposition == DispositionLegacy {
			r.out.Diagnostics = []Diagnostic{{
				Code:    DiagnosticLegacyProfileReplacement,
				Message: fmt.Sprintf("External profile '%s' has no disposition; treating it as 'replacement' during the compatibility window.", p.Name),
			}}
		}
		r.profile = p
		return nil
	default:
		return fail(CodeTaskInvalid, "role", nil, "unsupported role reference %T", ref)
	}
}

func (r *resolution) packEntry() error {
	name := r.role.Name
	if r.in.Pack == nil {
		return fail(CodeRoleMissingFromPack, name, map[string]any{"pack": nil}, "no pack was supplied for role %q", name)
	}
	e, ok := r.in.Pack.Roles[name]
	if !ok {
		return fail(CodeRoleMissingFromPack, name, map[string]any{"pack": r.in.Pack.Name},
			"pack %q has no entry for role %q", r.in.Pack.Name, name)
	}
	if !e.IsActive() {
		return fail(CodeRoleInactive, name, map[string]any{"pack": r.in.Pack.Name},
			"role %q is inactive in pack %q", name, r.in.Pack.Name)
	}
	r.entry = e
	return nil
}

// cand is one precedence level for a string field.
type cand struct {
	v   *string
	src string
}

// first returns the first level that sets a value, and its source.
func first(levels ...cand) (*string, string) {
	for _, c := range levels {
		if c.v != nil {
			return c.v, c.src
		}
	}
	return nil, ""
}

func (r *resolution) modelEffort() error {
	var pm, pe *string
	if r.profile != nil {
		pm, pe = r.profile.Model, r.profile.Effort
	}
	em, ee := r.entry.Model, r.entry.Effort // unset for a replacement
	t, d := r.in.Task, r.in.Defaults
	model, src := first(cand{t.Model, SourceTask}, cand{pm, SourceExternalProfile}, cand{em, SourcePack}, cand{d.Model, SourceRuntimeDefault})
	if model == nil || *model == "" {
		return fail(CodeModelUnresolved, r.identityName(), nil, "no model for %s: task, profile, pack and runtime defaults give none", r.out.Sources.Identity)
	}
	r.out.Model, r.out.Sources.Model = *model, src
	effort, src := first(cand{t.Effort, SourceTask}, cand{pe, SourceExternalProfile}, cand{ee, SourcePack}, cand{d.Effort, SourceRuntimeDefault})
	if effort == nil {
		r.out.Sources.Effort = SourceProviderDefault
	} else {
		r.out.Effort, r.out.Sources.Effort = effort, src
	}
	return nil
}

func (r *resolution) identityName() string {
	if r.replace {
		return r.profile.Name
	}
	return r.role.Name
}

// modes chooses and validates the Mode list (steps 5 and 6).
func (r *resolution) modes() ([]Mode, error) {
	req := r.in.Task.Modes
	if r.replace {
		if len(req) > 0 {
			return nil, fail(CodeModesOnReplacement, r.profile.Name, map[string]any{"modes": clone(req)},
				"replacement profile %q takes no Modes, got %s", r.profile.Name, quoteList(req))
		}
		r.out.Sources.Modes = SourceNone
		return nil, nil
	}
	fromPack := false
	switch {
	case req != nil:
		r.out.Sources.Modes = SourceTask
	case len(r.entry.DefaultModes) > 0:
		req, fromPack = r.entry.DefaultModes, true
		r.out.Sources.Modes = SourcePack
	default:
		r.out.Sources.Modes = SourceNone
	}
	modes, err := r.checkModes(req)
	if err != nil && fromPack {
		return nil, fail(CodePackDefaultInvalid, r.in.Pack.Name+"/"+r.role.Name, map[string]any{
			"pack": r.in.Pack.Name, "role": r.role.Name, "mode": err.Subject, "reason": string(err.Code),
		}, "pack %q default_modes for role %q: %s", r.in.Pack.Name, r.role.Name, err.Message)
	}
	if err != nil {
		return nil, err
	}
	return modes, nil
}

// checkModes runs the four passes of step 6, each first to last.
func (r *resolution) checkModes(names []string) ([]Mode, *ResolutionError) {
	cat := r.in.Catalog.Modes
	modes := make([]Mode, len(names))
	for i, n := range names {
		m, ok := cat[n]
		if !ok {
			return nil, fail(CodeModeUnknown, n, nil, "mode %q is not in the catalog", n)
		}
		modes[i] = m
	}
	for i, n := range names {
		for _, prev := range names[:i] {
			if prev == n {
				return nil, fail(CodeModeDuplicate, n, nil, "mode %q is listed twice", n)
			}
		}
	}
	if allow := r.entry.ModesAllow; len(allow) > 0 {
		for _, n := range names {
			if !contains(allow, n) {
				return nil, fail(CodeModeDisallowed, n, map[string]any{"mode": n, "allowed": clone(allow)},
					"mode %q is not allowed for role %q in pack %q (allowed: %s)", n, r.role.Name, r.in.Pack.Name, quoteList(allow))
			}
		}
	}
	for i := range modes {
		for j := i + 1; j < len(modes); j++ {
			a, b := modes[i], modes[j]
			if contains(a.ConflictsWith, b.Name) || contains(b.ConflictsWith, a.Name) {
				return nil, fail(CodeModeConflict, b.Name, map[string]any{"modes": []string{a.Name, b.Name}},
					"modes %q and %q conflict", a.Name, b.Name)
			}
		}
	}
	return modes, nil
}

func (r *resolution) rest() error {
	t, d, p := r.in.Task, r.in.Defaults, r.profile
	out := &r.out

	// Tools and Permissions are the inputs' own (see run).
	if t.Tools != nil {
		out.Tools, out.Sources.Tools = t.Tools, SourceTask
	} else {
		out.Tools, out.Sources.Tools = d.Tools, SourceRuntimeDefault
	}
	if out.Tools == nil {
		out.Tools = []string{}
	}
	switch {
	case t.Permissions != nil:
		out.Permissions, out.Sources.Permissions = t.Permissions, SourceTask
	case d.Permissions != nil:
		out.Permissions, out.Sources.Permissions = d.Permissions, SourceRuntimeDefault
	default:
		out.Sources.Permissions = SourceNone
	}

	var py, pb, pf, pl *bool
	if p != nil {
		py, pb, pf, pl = p.Yolo, p.Bypass, p.FastMode, p.LionSystem
	}
	out.Yolo, out.Sources.Yolo = flag(t.Yolo, py, d.Yolo)
	out.Bypass, out.Sources.Bypass = flag(t.Bypass, pb, d.Bypass)
	out.FastMode, out.Sources.FastMode = flag(t.FastMode, pf, d.FastMode)
	switch {
	case t.LionSystem != nil:
		out.LionSystem, out.Sources.LionSystem = *t.LionSystem, SourceTask
	case pl != nil:
		out.LionSystem, out.Sources.LionSystem = *pl, SourceExternalProfile
	default:
		out.LionSystem, out.Sources.LionSystem = d.LionSystem, SourceRuntimeDefault
	}

	switch {
	case p != nil && p.ArtifactDefaults != nil:
		out.ArtifactDefaults, out.Sources.ArtifactDefaults = p.ArtifactDefaults, SourceExternalProfile
	case !r.replace && r.role.ArtifactDefaults != nil:
		out.ArtifactDefaults, out.Sources.ArtifactDefaults = r.role.ArtifactDefaults, SourceRole
	default:
		out.Sources.ArtifactDefaults = SourceNone
	}

	out.Sources.Timeout = SourceNone
	if p != nil {
		if p.Timeout != nil {
			v := *p.Timeout
			out.Timeout, out.Sources.Timeout = &v, SourceExternalProfile
		}
		out.ResumeOnTimeout = p.ResumeOnTimeout
		if p.ResumeOnTimeout && p.Timeout == nil {
			return fail(CodeResumeWithoutTimeout, p.Name, nil, "profile %q sets resume_on_timeout without a timeout", p.Name)
		}
	}

	out.Active = true
	if r.replace {
		out.Sources.Active = SourceExternalProfile
	} else {
		out.Sources.Active = SourcePack
	}
	if r.in.Pack != nil {
		out.Pack = PackRef{Name: r.in.Pack.Name, Digest: PackDigest(r.in.Pack)}
	}
	out.Sources.Pack = SourceWorkerDefault
	if r.in.PackSelection == PackFromTask {
		out.Sources.Pack = SourceTask
	}
	return nil
}

// flag implements "explicit task value → external profile when true →
// runtime default" for yolo, bypass and fast_mode.
func flag(task, profile *bool, def bool) (bool, string) {
	switch {
	case task != nil:
		return *task, SourceTask
	case profile != nil && *profile:
		return true, SourceExternalProfile
	default:
		return def, SourceRuntimeDefault
	}
}

func (r *resolution) prompt(modes []Mode) {
	out := &r.out
	var extra string
	if r.in.Task.ExtraPrompt != nil {
		extra = strings.TrimSpace(*r.in.Task.ExtraPrompt)
	}
	if r.replace {
		out.Identity = Identity{Kind: IdentityExternal, Name: r.profile.Name, Modes: []string{}}
		out.PromptDisposition = PromptReplacement
		out.Sources.Prompt = SourceExternalReplacement
		out.PromptBody, r.message = joinBlocksAfter(r.arena, r.head(), r.profile.Body, extra)
		out.PromptOverlays = []string{}
		out.Emits = []string{}
		if out.Diagnostics == nil {
			out.Diagnostics = []Diagnostic{}
		}
		return
	}

	// The lists set here are the inputs' own (see run); share lists the
	// Modes' names.
	out.Identity = Identity{Kind: IdentityCasts, Name: r.role.Name}
	out.Directives = Directives{
		Authority:   r.entry.Authority,
		Boundaries:  r.entry.Boundaries,
		Escalations: r.entry.Escalations,
	}
	// At most two overlays: kept in r until share gives the result its
	// list of them.
	out.PromptDisposition, out.Sources.Prompt = PromptCasts, SourceCasts
	if r.profile != nil {
		out.PromptDisposition, out.Sources.Prompt = PromptOverlay, SourceExternalOverlay
		if b := strings.TrimSpace(r.profile.Body); b != "" {
			r.overlays[r.nOverlays] = b
			r.nOverlays++
		}
	}
	if extra != "" {
		r.overlays[r.nOverlays] = extra
		r.nOverlays++
	}
	out.PromptBody, r.message = castsPromptAfter(r.arena, r.head(), r.role.Body, modes, out.Directives, r.overlays[:r.nOverlays])
	role := r.role
	out.Role = &role
	// modes is this resolution's own slice (checkModes made it).
	out.ModeDefs = modes
	out.GrantRoleEmission = true
	out.Emits = r.role.Emits
	if out.Emits == nil {
		out.Emits = []string{}
	}
	if out.Diagnostics == nil {
		out.Diagnostics = []Diagnostic{}
	}
}

// share gives the result the two lists that only this resolution holds —
// the Modes' names and the prompt's overlays, which r keeps in place — in
// one allocation; every other list and map is the inputs' own.
func (r *resolution) share() {
	if r.replace {
		return
	}
	out := &r.out
	a := strArena(make([]string, len(out.ModeDefs)+r.nOverlays))
	names := a.take(len(out.ModeDefs))
	for i, m := range out.ModeDefs {
		names[i] = m.Name
	}
	out.Identity.Modes = names
	out.PromptOverlays = a.copy(r.overlays[:r.nOverlays])
}

// head is what the system message puts before the prompt body
// (lion_system is decided before the prompt).
func (r *resolution) head() string { return MessageHead(r.preamble, r.out.LionSystem) }

// MessageHead is what a system message puts before the prompt body and a
// BlockSeparator: the trimmed preamble when lion_system is on, and nothing
// (the message is the body) when it is off or the preamble is blank. The
// materializer's SystemMessage and ResolveWithPreamble both follow it.
func MessageHead(preamble string, lionSystem bool) string {
	if !lionSystem {
		return ""
	}
	return strings.TrimSpace(preamble)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
