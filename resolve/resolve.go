package resolve

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Resolve decides the effective agent configuration for ref from in, or
// returns the first *ResolutionError in the validation order of
// docs/CONFIG.md. It is pure: it reads nothing but its arguments, never
// mutates them, and no slice, map or pointer of its result is shared with
// them, so a caller may keep or change the result freely. With
// in.Explain set, the result also records every field's candidates.
func Resolve(ref RoleRef, in Inputs) (ResolvedAgentSpec, error) {
	r := resolution{in: in, ex: chain{on: in.Explain}}
	if err := r.run(ref); err != nil {
		return ResolvedAgentSpec{}, err
	}
	r.out.Explain = r.ex.fields
	return r.out, nil
}

// resolution is one run of Resolve: the steps below fill out in order.
type resolution struct {
	in Inputs
	ex chain
	// role and entry are the catalog's Role and the pack's entry as the
	// variants left it; both are unset for a replacement identity.
	role    Role
	entry   PackEntry
	profile *ExternalProfile // the supplied profile, if it applies
	// fromProfile is *profile, or an empty profile when none applies, so
	// that every field the profile layer offers reads as unset.
	fromProfile ExternalProfile
	replace     bool
	// tier is the tier symbol the model was written as ("" for a literal).
	tier string
	// setBy says which variant set each entry field (-1: none).
	setBy variantFields
	out   ResolvedAgentSpec
}

// variantFields holds, per field a variant may set, the index of the last
// variant that set it, or -1.
type variantFields struct {
	effort, defaultModes, modesAllow, authority, boundaries, escalations, skills int
}

func (r *resolution) run(ref RoleRef) error {
	if r.in.Catalog == nil {
		return fail(CodeRoleUnknown, ref.Token(), nil, "no catalog was supplied")
	}
	r.setBy = variantFields{-1, -1, -1, -1, -1, -1, -1}
	// 1.–2. classify the identity and check the profile's disposition.
	if err := r.classify(ref); err != nil {
		return err
	}
	// 3. a casts identity needs an active entry in the selected pack.
	if !r.replace {
		if err := r.packEntry(); err != nil {
			return err
		}
	}
	// 4. the model, and 4b. its tier symbol expanded.
	if err := r.model(); err != nil {
		return err
	}
	if err := r.expandTier(); err != nil {
		return err
	}
	// 4c. the entry's variants, chosen by the model; then the effort,
	// which a variant may set.
	r.variants()
	r.effort()
	// 5.–6. Modes.
	modes, err := r.modes()
	if err != nil {
		return err
	}
	// 6b. skills.
	if err := r.skills(); err != nil {
		return err
	}
	// 7. tools, permissions, flags, artifacts, deadline.
	if err := r.rest(); err != nil {
		return err
	}
	// 8.–9. prompt and sources.
	r.prompt(modes)
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
		r.ex.add("identity", r.out.Sources.Identity, r.out.Sources.Identity,
			Candidate{Source: r.out.Sources.Identity, Status: StatusSelected, Value: name, Reason: "a bare role name selects the built-in catalog only", Key: "role"})
		if p == nil {
			return nil
		}
		if err := r.usable(p); err != nil {
			return err
		}
		if p.Disposition != DispositionOverlay {
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
		r.profile, r.fromProfile = p, *p
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
		if err := r.usable(p); err != nil {
			return err
		}
		if p.Disposition == DispositionOverlay {
			return fail(CodeExternalRefRequiresReplacement, p.Name, nil, "profile %q is an overlay; %q selects only replacements", p.Name, ref.Token())
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
		r.profile, r.fromProfile = p, *p
		r.ex.add("identity", r.out.Sources.Identity, r.out.Sources.Identity,
			Candidate{Source: r.out.Sources.Identity, Status: StatusSelected, Value: p.Name, Reason: "external:<name> selects a replacement profile explicitly", Key: "role"})
		return nil
	default:
		return fail(CodeTaskInvalid, "role", nil, "unsupported role reference %T", ref)
	}
}

// usable checks what every selection of profile p needs: it is enabled,
// and it declares a disposition unless the policy admits legacy profiles.
func (r *resolution) usable(p *ExternalProfile) error {
	if !p.IsEnabled() {
		return fail(CodeExternalProfileInactive, p.Name, nil, "external profile %q is disabled", p.Name)
	}
	if p.Disposition == DispositionLegacy && r.in.Policy.RejectLegacyProfiles {
		return fail(CodeProfileDispositionRequired, p.Name, nil, "external profile %q has no disposition and legacy profiles are rejected", p.Name)
	}
	return nil
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

// entryKey is where an entry field is written in the pack.
func (r *resolution) entryKey(field string) string { return "roles." + r.role.Name + "." + field }

// noEntry excludes the pack's offers for a replacement identity.
func (r *resolution) noEntry() string {
	if r.replace {
		return "a replacement identity has no pack entry"
	}
	return ""
}

// first returns the first offer that is set, and its source srcs[i]: no
// rule excludes a model or an effort.
func first(offers []*string, srcs ...string) (*string, string) {
	for i, v := range offers {
		if v != nil {
			return v, srcs[i]
		}
	}
	return nil, ""
}

// model is step 4: task → external profile → pack entry → runtime default.
func (r *resolution) model() error {
	t, d, p := r.in.Task, r.in.Defaults, &r.fromProfile
	model, src := first([]*string{t.Model, p.Model, r.entry.Model, d.Model}, SourceTask, SourceExternalProfile, SourcePack, SourceRuntimeDefault)
	if r.ex.on {
		r.ex.add("model", nil, src, rank(
			offer{SourceTask, val(t.Model), "overrides.model", ""},
			offer{SourceExternalProfile, val(p.Model), "model", ""},
			offer{SourcePack, val(r.entry.Model), r.entryKey("model"), r.noEntry()},
			offer{SourceRuntimeDefault, val(d.Model), "defaults.model", ""},
		)...)
	}
	if model == nil || *model == "" {
		return fail(CodeModelUnresolved, r.identityName(), nil, "no model for %s: task, profile, pack and runtime defaults give none", r.out.Sources.Identity)
	}
	r.out.Model, r.out.Sources.Model = *model, src
	return nil
}

// expandTier is step 4b: a tier symbol becomes the model its tier, or a
// fallback tier, names in the model catalog. It never invents a model.
func (r *resolution) expandTier() error {
	sym := r.out.Model
	name, ok := strings.CutPrefix(sym, TierPrefix)
	if !ok {
		r.explainModel("a literal model")
		return nil
	}
	r.tier = sym
	m := r.in.Models
	if m == nil {
		return fail(CodeTierUnknown, sym, map[string]any{"tier": name, "known": []string{}},
			"model %q names a tier, but no model catalog is configured (rolecall.yaml models:)", sym)
	}
	if _, ok := m.Tiers[name]; !ok {
		return fail(CodeTierUnknown, sym, map[string]any{"tier": name, "known": sortedKeys(m.Tiers)},
			"tier %q is not in the model catalog (known: %s)", name, quoteList(sortedKeys(m.Tiers)))
	}
	// A replacement has no entry, and an empty list allows every tier.
	if len(r.entry.Tiers) > 0 && !slices.Contains(r.entry.Tiers, name) {
		return fail(CodeTierUnsupported, sym, map[string]any{"tier": name, "supported": slices.Clone(r.entry.Tiers)},
			"role %q in pack %q does not support tier %q (supported: %s)", r.role.Name, r.in.Pack.Name, name, quoteList(r.entry.Tiers))
	}
	model, via, tried, ok := m.Expand(name, r.entry.Tiers)
	if !ok {
		return fail(CodeTierUnavailable, sym, map[string]any{"tier": name, "allow_fallback": m.AllowFallback, "tried": tried},
			"tier %q has no model now and %s", name, map[bool]string{true: "no fallback tier has one", false: "fallback is not allowed"}[m.AllowFallback])
	}
	r.out.Model = model
	r.out.ModelTier = &ModelTier{Symbol: sym, ResolvedVia: via, CatalogDigest: ModelsDigest(m)}
	r.explainModel("tier " + name + " resolved via " + via)
	return nil
}

// explainModel completes the model's chain with the concrete model.
func (r *resolution) explainModel(how string) {
	if r.ex.on {
		f := &r.ex.fields[len(r.ex.fields)-1]
		f.Value = r.out.Model
		for i := range f.Candidates {
			if f.Candidates[i].Status == StatusSelected {
				f.Candidates[i].Reason += "; " + how
			}
		}
	}
}

// variants is step 4c: every variant whose conditions hold for the task's
// selector (the model after steps 4 and 4b, the tier symbol as written,
// the pack and the role) applies in declaration order, later ones winning.
// The selector is computed once, from the unchanged base.
func (r *resolution) variants() {
	if r.in.Pack != nil {
		r.out.Pack.Variants = []int{}
	}
	if r.replace {
		return
	}
	sel := map[string]string{WhenModel: r.out.Model, WhenPack: r.in.Pack.Name, WhenRole: r.role.Name}
	if r.tier != "" {
		sel[WhenTier] = r.tier
	}
	for i, v := range r.entry.Variants {
		if !v.matches(sel) {
			continue
		}
		r.out.Pack.Variants = append(r.out.Pack.Variants, i)
		s, e, by := v.Set, &r.entry, &r.setBy
		set(&e.Effort, &by.effort, s.Effort, i)
		set(&e.DefaultModes, &by.defaultModes, s.DefaultModes, i)
		set(&e.ModesAllow, &by.modesAllow, s.ModesAllow, i)
		set(&e.Authority, &by.authority, s.Authority, i)
		set(&e.Boundaries, &by.boundaries, s.Boundaries, i)
		set(&e.Escalations, &by.escalations, s.Escalations, i)
		set(&e.Skills, &by.skills, s.Skills, i)
	}
}

// set applies variant i's value v of an entry field (nil: not set) to
// field, recording i in by.
func set[T *string | []string](field *T, by *int, v T, i int) {
	if v != nil {
		*field, *by = v, i
	}
}

// matches reports whether every condition holds for the selector; a key
// the selector lacks (no tier symbol) holds for no condition.
func (v Variant) matches(sel map[string]string) bool {
	for _, c := range v.When {
		got, ok := sel[c.Key]
		if !ok {
			return false
		}
		if c.Glob {
			if !globMatch(c.Value, got) {
				return false
			}
		} else if got != c.Value {
			return false
		}
	}
	return true
}

// entrySource is the source and key of an entry field: the pack's own, or
// the variant's that set it (i ≥ 0).
func (r *resolution) entrySource(field string, i int) (string, string) {
	if i >= 0 {
		return SourcePackVariant, r.entryKey("variants[" + strconv.Itoa(i) + "].set." + field)
	}
	return SourcePack, r.entryKey(field)
}

// effort: task → external profile → pack entry (or the variant that set
// it) → runtime default → none (the provider's default).
func (r *resolution) effort() {
	t, d, p := r.in.Task, r.in.Defaults, &r.fromProfile
	packSrc, packKey := r.entrySource("effort", r.setBy.effort)
	effort, src := first([]*string{t.Effort, p.Effort, r.entry.Effort, d.Effort}, SourceTask, SourceExternalProfile, packSrc, SourceRuntimeDefault)
	if effort == nil {
		r.out.Sources.Effort = SourceProviderDefault
	} else {
		v := *effort
		r.out.Effort, r.out.Sources.Effort = &v, src
	}
	if r.ex.on {
		c := rank(
			offer{SourceTask, val(t.Effort), "overrides.effort", ""},
			offer{SourceExternalProfile, val(p.Effort), "effort", ""},
			offer{packSrc, val(r.entry.Effort), packKey, r.noEntry()},
			offer{SourceRuntimeDefault, val(d.Effort), "defaults.effort", ""},
		)
		c = append(c, Candidate{Source: SourceProviderDefault, Status: StatusAbsent, Reason: "used only when no layer sets an effort"})
		if effort == nil {
			c[len(c)-1].Status, c[len(c)-1].Reason = StatusSelected, "no layer sets an effort: the provider's default applies"
		}
		r.ex.add("effort", val(r.out.Effort), r.out.Sources.Effort, c...)
	}
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
			return nil, fail(CodeModesOnReplacement, r.profile.Name, map[string]any{"modes": slices.Clone(req)},
				"replacement profile %q takes no Modes, got %s", r.profile.Name, quoteList(req))
		}
		r.out.Sources.Modes = SourceNone
		r.ex.add("modes", []string{}, SourceNone,
			Candidate{Source: SourceTask, Status: StatusAbsent, Value: orNil(req), Reason: "a replacement identity takes no Modes", Key: "modes"},
			Candidate{Source: SourcePack, Status: StatusExcluded, Reason: "a replacement identity has no pack entry"},
			Candidate{Source: SourceNone, Status: StatusSelected, Value: []string{}, Reason: "a replacement identity has no Modes"})
		return nil, nil
	}
	packSrc, packKey := r.entrySource("default_modes", r.setBy.defaultModes)
	defaults := r.entry.DefaultModes
	fromPack := false
	switch {
	case req != nil:
		r.out.Sources.Modes = SourceTask
	case len(defaults) > 0:
		req, fromPack = defaults, true
		r.out.Sources.Modes = packSrc
	default:
		r.out.Sources.Modes = SourceNone
	}
	if r.ex.on {
		var packOffer any
		var excluded string
		if len(defaults) > 0 {
			packOffer = defaults
			if r.in.Task.Modes != nil && len(r.in.Task.Modes) == 0 {
				excluded = "the task's explicit empty list excludes the pack's defaults"
			}
		}
		c := rank(offer{SourceTask, orNil(r.in.Task.Modes), "modes", ""}, offer{packSrc, packOffer, packKey, excluded})
		none := Candidate{Source: SourceNone, Status: StatusAbsent, Reason: "used only when neither gives Modes"}
		if r.out.Sources.Modes == SourceNone {
			none.Status, none.Reason, none.Value = StatusSelected, "neither the task nor the pack gives Modes", []string{}
		}
		// The value is the outcome's: an empty list, never null, when no
		// layer gives Modes.
		value := append([]string{}, req...)
		r.ex.add("modes", value, r.out.Sources.Modes, append(c, none)...)
	}
	modes, err := r.checkModes(req)
	if err == nil {
		return modes, nil
	}
	if !fromPack {
		return nil, err
	}
	details := map[string]any{"pack": r.in.Pack.Name, "role": r.role.Name, "mode": err.Subject, "reason": string(err.Code)}
	if r.setBy.defaultModes >= 0 {
		details["variant"] = r.setBy.defaultModes
	}
	return nil, fail(CodePackDefaultInvalid, r.in.Pack.Name+"/"+r.role.Name, details,
		"pack %q default_modes for role %q: %s", r.in.Pack.Name, r.role.Name, err.Message)
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
		if slices.Contains(names[:i], n) {
			return nil, fail(CodeModeDuplicate, n, nil, "mode %q is listed twice", n)
		}
	}
	if allow := r.entry.ModesAllow; len(allow) > 0 {
		for _, n := range names {
			if !slices.Contains(allow, n) {
				return nil, fail(CodeModeDisallowed, n, map[string]any{"mode": n, "allowed": slices.Clone(allow)},
					"mode %q is not allowed for role %q in pack %q (allowed: %s)", n, r.role.Name, r.in.Pack.Name, quoteList(allow))
			}
		}
	}
	for i := range modes {
		for j := i + 1; j < len(modes); j++ {
			a, b := modes[i], modes[j]
			if slices.Contains(a.ConflictsWith, b.Name) || slices.Contains(b.ConflictsWith, a.Name) {
				return nil, fail(CodeModeConflict, b.Name, map[string]any{"modes": []string{a.Name, b.Name}},
					"modes %q and %q conflict", a.Name, b.Name)
			}
		}
	}
	return modes, nil
}

// skills is step 6b: the entry's patterns admit skills; the task's narrow
// within them. Every pattern must match (skill_unmatched), then no skill
// may match two patterns of one list (skill_overlap).
func (r *resolution) skills() error {
	entry, task := r.entry.Skills, r.in.Task.Skills
	avail := make([]string, len(r.in.Skills))
	for i, s := range r.in.Skills {
		avail[i] = s.Name
	}
	entryMatches, err := matchAll(entry, avail, "the pack entry's", nil)
	if err != nil {
		return err
	}
	admitted := union(entryMatches)
	taskMatches, err := matchAll(task, admitted, "the task's", avail)
	if err != nil {
		return err
	}
	if err := overlap(entry, entryMatches, "the pack entry's"); err != nil {
		return err
	}
	if err := overlap(task, taskMatches, "the task's"); err != nil {
		return err
	}
	packSrc, packKey := r.entrySource("skills", r.setBy.skills)
	selected := admitted
	switch {
	case task != nil:
		selected, r.out.Sources.Skills = union(taskMatches), SourceTask
	case entry != nil:
		r.out.Sources.Skills = packSrc
	default:
		r.out.Sources.Skills = SourceNone
	}
	r.out.Skills = make([]Skill, 0, len(selected))
	for _, s := range r.in.Skills {
		if slices.Contains(selected, s.Name) {
			r.out.Skills = append(r.out.Skills, s)
		}
	}
	if r.ex.on {
		c := []Candidate{{Source: SourceTask, Value: orNil(task), Key: "skills"}, {Source: packSrc, Value: orNil(entry), Key: packKey}}
		switch {
		case task != nil:
			c[0].Status, c[0].Reason = StatusSelected, "the task narrows what the pack entry admits"
			c[1].Status, c[1].Reason = StatusShadowed, "admits the skills the task narrows"
		case entry != nil:
			c[0].Status, c[0].Reason = StatusAbsent, "not set: every admitted skill"
			c[1].Status, c[1].Reason = StatusSelected, "admits these skills"
		default:
			c[0].Status, c[0].Reason = StatusAbsent, "not set"
			c[1].Status, c[1].Reason = StatusAbsent, "not set: the entry admits no skill"
			if r.replace {
				c[1].Status, c[1].Reason = StatusExcluded, r.noEntry()
			}
			c = withNone(c, SourceNone)
		}
		// The value is the outcome's list of skill names ([] for none).
		names := make([]string, len(r.out.Skills))
		for i, s := range r.out.Skills {
			names[i] = s.Name
		}
		r.ex.add("skills", names, r.out.Sources.Skills, c...)
	}
	return nil
}

// matchAll expands each pattern against names; a pattern that matches
// none is skill_unmatched. outside, when not nil, are the names beyond
// the set a narrowing list may reach, for a clearer message.
func matchAll(patterns, names []string, whose string, outside []string) ([][]string, error) {
	out := make([][]string, len(patterns))
	for i, p := range patterns {
		matches := func(n string) bool { return globMatch(p, n) }
		for _, n := range names {
			if matches(n) {
				out[i] = append(out[i], n)
			}
		}
		if len(out[i]) == 0 {
			msg := fmt.Sprintf("%s skill pattern %q matches no skill", whose, p)
			if slices.ContainsFunc(outside, matches) {
				msg = fmt.Sprintf("%s skill pattern %q matches only skills the pack entry does not admit", whose, p)
			}
			return nil, fail(CodeSkillUnmatched, p, map[string]any{"pattern": p, "list": strings.TrimSuffix(strings.TrimPrefix(whose, "the "), "'s")}, "%s", msg)
		}
	}
	return out, nil
}

// overlap fails when one skill is matched by two patterns of one list.
func overlap(patterns []string, matches [][]string, whose string) error {
	for i := range matches {
		for j := i + 1; j < len(matches); j++ {
			for _, n := range matches[j] {
				if slices.Contains(matches[i], n) {
					return fail(CodeSkillOverlap, n, map[string]any{"skill": n, "patterns": []string{patterns[i], patterns[j]}},
						"skill %q is matched by both %q and %q in %s list", n, patterns[i], patterns[j], whose)
				}
			}
		}
	}
	return nil
}

// union is the sorted, distinct names of matches.
func union(matches [][]string) []string {
	all := slices.Concat(matches...)
	slices.Sort(all)
	return slices.Compact(all)
}

func (r *resolution) rest() error {
	t, d, p := r.in.Task, r.in.Defaults, &r.fromProfile
	out := &r.out

	// The tools are never null: [] when neither layer gives any.
	if t.Tools != nil {
		out.Tools, out.Sources.Tools = append([]string{}, t.Tools...), SourceTask
	} else {
		out.Tools, out.Sources.Tools = append([]string{}, d.Tools...), SourceRuntimeDefault
	}
	switch {
	case t.Permissions != nil:
		out.Permissions, out.Sources.Permissions = t.Permissions.Clone(), SourceTask
	case d.Permissions != nil:
		out.Permissions, out.Sources.Permissions = d.Permissions.Clone(), SourceRuntimeDefault
	default:
		out.Sources.Permissions = SourceNone
	}

	out.Yolo, out.Sources.Yolo = flag(t.Yolo, p.Yolo, d.Yolo)
	out.Bypass, out.Sources.Bypass = flag(t.Bypass, p.Bypass, d.Bypass)
	out.FastMode, out.Sources.FastMode = flag(t.FastMode, p.FastMode, d.FastMode)
	switch {
	case t.LionSystem != nil:
		out.LionSystem, out.Sources.LionSystem = *t.LionSystem, SourceTask
	case p.LionSystem != nil:
		out.LionSystem, out.Sources.LionSystem = *p.LionSystem, SourceExternalProfile
	default:
		out.LionSystem, out.Sources.LionSystem = d.LionSystem, SourceRuntimeDefault
	}

	switch {
	case p.ArtifactDefaults != nil:
		out.ArtifactDefaults, out.Sources.ArtifactDefaults = CloneMap(p.ArtifactDefaults), SourceExternalProfile
	case r.role.ArtifactDefaults != nil: // a replacement has no Role
		out.ArtifactDefaults, out.Sources.ArtifactDefaults = CloneMap(r.role.ArtifactDefaults), SourceRole
	default:
		out.Sources.ArtifactDefaults = SourceNone
	}

	out.Sources.Timeout = SourceNone
	if p.Timeout != nil {
		v := *p.Timeout
		out.Timeout, out.Sources.Timeout = &v, SourceExternalProfile
	}
	out.ResumeOnTimeout = p.ResumeOnTimeout
	if p.ResumeOnTimeout && p.Timeout == nil {
		return fail(CodeResumeWithoutTimeout, p.Name, nil, "profile %q sets resume_on_timeout without a timeout", p.Name)
	}

	out.Active = true
	if r.replace {
		out.Sources.Active = SourceExternalProfile
	} else {
		out.Sources.Active = SourcePack
	}
	if r.in.Pack != nil {
		out.Pack.Name, out.Pack.Digest = r.in.Pack.Name, PackDigest(r.in.Pack)
	}
	out.Sources.Pack = SourceWorkerDefault
	if r.in.PackSelection == PackFromTask {
		out.Sources.Pack = SourceTask
	}
	if r.ex.on {
		r.explainRest()
	}
	return nil
}

// explainRest records the chains of the fields rest decided.
func (r *resolution) explainRest() {
	t, d, p, out := r.in.Task, r.in.Defaults, &r.fromProfile, &r.out
	pack := []Candidate{
		{Source: SourceTask, Status: StatusAbsent, Reason: "not set", Key: "pack"},
		{Source: SourceWorkerDefault, Status: StatusSelected, Value: out.Pack.Name, Reason: "the task named no pack", Key: "default_pack"},
	}
	if r.in.PackSelection == PackFromTask {
		pack[0].Status, pack[0].Value, pack[0].Reason = StatusSelected, out.Pack.Name, "the task named the pack"
		pack[1].Status, pack[1].Value, pack[1].Reason = StatusShadowed, nil, "the task named the pack"
	}
	if r.in.Pack == nil {
		// Only a replacement resolves without a pack: its one candidate is
		// the layer that was to choose it, giving the empty name.
		key := map[bool]string{true: "pack", false: "default_pack"}[out.Sources.Pack == SourceTask]
		pack = []Candidate{{Source: out.Sources.Pack, Status: StatusSelected, Value: "", Reason: "no pack was supplied; a replacement identity needs none", Key: key}}
	}
	r.ex.add("pack", out.Pack.Name, out.Sources.Pack, pack...)
	defTools := append([]string{}, d.Tools...) // unset: the last resort, no tools
	var defExcluded string
	if t.Tools != nil && len(t.Tools) == 0 {
		defExcluded = "the explicit empty list above excludes it"
	}
	r.ex.add("tools", out.Tools, out.Sources.Tools, rank(
		offer{SourceTask, orNil(t.Tools), "overrides.tools", ""},
		offer{SourceRuntimeDefault, defTools, "defaults.tools", defExcluded})...)
	perm := rank(
		offer{SourceTask, orNil(t.Permissions), "overrides.permissions", ""},
		offer{SourceRuntimeDefault, orNil(d.Permissions), "defaults.permissions", ""},
	)
	r.ex.add("permissions", orNil(out.Permissions), out.Sources.Permissions, withNone(perm, out.Sources.Permissions)...)
	for _, f := range []struct {
		name        string
		task, prof  *bool
		def, result bool
		src         string
	}{
		{"yolo", t.Yolo, p.Yolo, d.Yolo, out.Yolo, out.Sources.Yolo},
		{"bypass", t.Bypass, p.Bypass, d.Bypass, out.Bypass, out.Sources.Bypass},
		{"fast_mode", t.FastMode, p.FastMode, d.FastMode, out.FastMode, out.Sources.FastMode},
	} {
		excluded := ""
		if f.prof != nil && !*f.prof {
			excluded = "a profile can only switch " + f.name + " on"
		}
		r.ex.add(f.name, f.result, f.src, rank(
			offer{SourceTask, val(f.task), "overrides." + f.name, ""},
			offer{SourceExternalProfile, val(f.prof), f.name, excluded},
			offer{SourceRuntimeDefault, f.def, "defaults." + f.name, ""},
		)...)
	}
	r.ex.add("lion_system", out.LionSystem, out.Sources.LionSystem, rank(
		offer{SourceTask, val(t.LionSystem), "overrides.lion_system", ""},
		offer{SourceExternalProfile, val(p.LionSystem), "lion_system", ""},
		offer{SourceRuntimeDefault, d.LionSystem, "defaults.lion_system", ""},
	)...)
	r.ex.add("artifact_defaults", orNil(out.ArtifactDefaults), out.Sources.ArtifactDefaults, withNone(rank(
		offer{SourceExternalProfile, orNil(p.ArtifactDefaults), "artifact_defaults", ""},
		offer{SourceRole, orNil(r.role.ArtifactDefaults), "artifact_defaults", ""},
	), out.Sources.ArtifactDefaults)...)
	r.ex.add("timeout", val(out.Timeout), out.Sources.Timeout, withNone(rank(offer{SourceExternalProfile, val(p.Timeout), "timeout", ""}), out.Sources.Timeout)...)
	if r.replace {
		r.ex.add("active", true, SourceExternalProfile, Candidate{Source: SourceExternalProfile, Status: StatusSelected, Value: true, Reason: "the profile is enabled", Key: "enabled"})
	} else {
		r.ex.add("active", true, SourcePack, Candidate{Source: SourcePack, Status: StatusSelected, Value: true, Reason: "the pack entry is active", Key: r.entryKey("active")})
	}
}

// withNone appends the "none" candidate, selected when src is none.
func withNone(c []Candidate, src string) []Candidate {
	none := Candidate{Source: SourceNone, Status: StatusAbsent, Reason: "used only when no layer sets a value"}
	if src == SourceNone {
		none.Status, none.Reason = StatusSelected, "no layer sets a value"
	}
	return append(c, none)
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
	if out.Diagnostics == nil {
		out.Diagnostics = []Diagnostic{}
	}
	out.PromptOverlays = []string{}
	if r.replace {
		out.Identity = Identity{Kind: IdentityExternal, Name: r.profile.Name, Modes: []string{}}
		out.PromptDisposition = PromptReplacement
		out.Sources.Prompt = SourceExternalReplacement
		out.PromptBody = JoinBlocks(r.profile.Body, extra)
		out.Emits = []string{}
		r.explainPrompt(nil, extra)
		return
	}

	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.Name
		modes[i].ConflictsWith = slices.Clone(m.ConflictsWith)
	}
	out.Identity = Identity{Kind: IdentityCasts, Name: r.role.Name, Modes: names}
	out.PromptDisposition, out.Sources.Prompt = PromptCasts, SourceCasts
	if r.profile != nil {
		out.PromptDisposition, out.Sources.Prompt = PromptOverlay, SourceExternalOverlay
		if b := strings.TrimSpace(r.profile.Body); b != "" {
			out.PromptOverlays = append(out.PromptOverlays, b)
		}
	}
	if extra != "" {
		out.PromptOverlays = append(out.PromptOverlays, extra)
	}
	out.Directives = Directives{
		Authority:   slices.Clone(r.entry.Authority),
		Boundaries:  slices.Clone(r.entry.Boundaries),
		Escalations: slices.Clone(r.entry.Escalations),
	}
	out.PromptBody = CastsPrompt(r.role.Body, modes, out.Directives, out.PromptOverlays...)
	role := r.role
	role.Emits = slices.Clone(role.Emits)
	role.ArtifactDefaults = CloneMap(role.ArtifactDefaults)
	out.Role = &role
	out.ModeDefs = modes // this resolution's own (checkModes made it)
	out.GrantRoleEmission = true
	out.Emits = append([]string{}, r.role.Emits...)
	r.explainPrompt(modes, extra)
}

// explainPrompt lists the prompt's blocks in order: each that is not
// blank went into prompt_body.
func (r *resolution) explainPrompt(modes []Mode, extra string) {
	if !r.ex.on {
		return
	}
	var c []Candidate
	block := func(src, key, text, what string) {
		st, why := StatusSelected, what
		if strings.TrimSpace(text) == "" {
			st, why = StatusAbsent, what+" (blank: adds nothing)"
		}
		c = append(c, Candidate{Source: src, Status: st, Value: strings.TrimSpace(text), Reason: why, Key: key})
	}
	if r.replace {
		block(SourceExternalReplacement, "body", r.profile.Body, "the replacement profile's body")
	} else {
		block(SourceRole, "body", r.role.Body, "the Role's body")
		for _, m := range modes {
			block("mode:"+m.Name, "behaviors", m.Behaviors, "Mode "+m.Name+"'s behaviors")
		}
		for _, d := range []struct {
			field string
			lines []string
			i     int
		}{{"authority", r.entry.Authority, r.setBy.authority}, {"boundaries", r.entry.Boundaries, r.setBy.boundaries}, {"escalations", r.entry.Escalations, r.setBy.escalations}} {
			src, key := r.entrySource(d.field, d.i)
			block(src, key, strings.Join(d.lines, "\n"), "the pack's "+d.field+" directives")
		}
		if r.profile != nil {
			block(SourceExternalOverlay, "body", r.profile.Body, "the overlay profile's body")
		}
	}
	block(SourceTask, "overrides.extra_prompt", extra, "the task's extra prompt")
	r.ex.add("prompt", r.out.PromptBody, r.out.Sources.Prompt, c...)
}

// CloneMap deep-copies a JSON-like mapping (nested maps, lists and
// scalars), preserving nil. The materializer uses it too, so one copy rule
// serves both pure packages.
func CloneMap(m map[string]any) map[string]any {
	out := maps.Clone(m) // nil stays nil
	for k, v := range out {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return CloneMap(v)
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	case []string:
		return slices.Clone(v)
	default:
		return v
	}
}

// Clone returns a deep copy of the policy (nil stays nil).
func (p *PermissionPolicy) Clone() *PermissionPolicy {
	if p == nil {
		return nil
	}
	rules := func(m map[string][]string) map[string][]string {
		out := maps.Clone(m) // nil stays nil
		for k, v := range out {
			out[k] = slices.Clone(v)
		}
		return out
	}
	return &PermissionPolicy{Mode: p.Mode, Allow: rules(p.Allow), Deny: rules(p.Deny), Escalate: rules(p.Escalate)}
}
