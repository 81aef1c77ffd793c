package discover

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rolecall/rolecall/resolve"
)

// Validate loads everything under root and reports every problem it finds,
// each with file and line, sorted by file and line; nil means none. Each
// file is decoded independently, so one broken file does not hide another,
// and every broken pack is listed (a pack that extends a broken one too).
// On top of what Load refuses it checks cross-references:
//
//   - every pack × Role of that pack, as composed, resolves with no task
//     overrides (and so with the model of the overlay bound to the Role,
//     when it gives one), so default_modes problems surface as pack_default_invalid
//     and a missing model as model_unresolved (inactive entries are checked
//     as if active); a pack entry for a Role not in the catalog is
//     role_unknown, and a modes_allow entry naming no Mode is mode_unknown;
//   - every variant of every entry the same way, with its set applied, so
//     a variant that names an unknown Mode is reported at the variant's
//     file and line, and the entry with the variants that hold for it
//     together, as a task without overrides gets them (or, when the
//     entry's model gives none, a task that names its own model);
//   - every overlay profile's base_role is in the catalog
//     (overlay_role_missing), a replacement declares none
//     (replacement_has_base_role), resume_on_timeout has a timeout
//     (resume_without_timeout), and a legacy profile is
//     profile_disposition_required when legacy profiles are rejected;
//   - rolecall.yaml's default_pack exists (pack_not_found) and every
//     overlays binding names a Role of the catalog and an enabled overlay
//     profile for that Role;
//   - every tier symbol and every tier of a pack entry's tiers is in the
//     model catalog and yields a model (tier_unknown, tier_unsupported,
//     tier_unavailable), every skill pattern of a pack entry matches a
//     skill and shares none with another of its list (skill_unmatched,
//     skill_overlap), and the skill sources' problems (source_missing,
//     skill_duplicate, ...) are listed.
//
// Warnings (legacy profiles while they are allowed) are not problems and
// are not reported; Load returns them in Snapshot.Warnings. Identical
// problems are listed once.
func Validate(root string) []*Error { return ValidateWith(root, Options{}) }

// ValidateWith is Validate with the options of a load (LookupEnv).
func ValidateWith(root string, opts Options) []*Error { return validateLoaded(load(root, opts)) }

// validateLoaded is Validate of one load (or of a snapshot: Problems).
func validateLoaded(l *loader) []*Error {
	v := &validator{l: l, errs: slices.Clone(l.errs)}
	for _, name := range sortedKeys(l.packErrs) {
		v.errs = append(v.errs, l.packErrs[name])
	}
	v.packs()
	v.profiles()
	v.config()
	v.tiersAndSkills()
	for i, e := range v.errs {
		if e.File == l.cfg.Origin.File && e.File != "" {
			v.errs[i] = l.cfg.masks.mask(e)
		}
	}
	sortErrors(v.errs)
	return slices.CompactFunc(v.errs, func(a, b *Error) bool { return a.Error() == b.Error() })
}

type validator struct {
	l    *loader
	errs []*Error
}

func (v *validator) add(code resolve.Code, file string, line int, key, subject, format string, args ...any) {
	v.errs = append(v.errs, &Error{Code: code, File: file, Line: line, Key: key, Subject: subject, Message: fmt.Sprintf(format, args...)})
}

// addAt reports a problem of pack pf at key, where the composed pack
// writes it; values that placeholders produced are masked.
func (v *validator) addAt(pf *PackFile, code resolve.Code, key, subject, format string, args ...any) {
	at := pf.Where(key)
	v.errs = append(v.errs, &Error{Code: code, File: at.File, Line: at.Line, Key: key, Subject: subject, Message: pf.masks.apply(fmt.Sprintf(format, args...))})
}

func (v *validator) packs() {
	l := v.l
	if l.catalog == nil {
		return
	}
	for _, name := range sortedKeys(l.packs) {
		pf := l.packs[name]
		for _, role := range sortedKeys(pf.Pack.Roles) {
			entry := pf.Pack.Roles[role]
			key := "roles." + role
			if _, ok := l.catalog.Roles[role]; !ok {
				if !l.brokenRoles[role] {
					v.addAt(pf, resolve.CodeRoleUnknown, key, role, "pack %q has an entry for role %q, which is not in the catalog", name, role)
				}
				continue
			}
			if v.unknownModes(pf, key, entry.DefaultModes, entry.ModesAllow) {
				continue
			}
			base := entry
			base.Variants = nil
			seen := []*resolve.ResolutionError{v.check(pf, role, base, key, "", nil)}
			for i, va := range entry.Variants {
				vkey := fmt.Sprintf("%s.variants[%d]", key, i)
				if v.unknownModes(pf, vkey+".set", va.Set.DefaultModes, va.Set.ModesAllow) {
					continue
				}
				seen = append(seen, v.check(pf, role, applyVariant(base, va.Set), key, vkey, seen[0]))
			}
			v.checkTogether(pf, role, entry, key, seen)
		}
	}
}

// checkTogether resolves entry with its variants, as a task without
// overrides sees it: every variant that holds for the entry's own model
// applies, so a variant's default_modes and another's modes_allow that
// each pass alone can fail together. When the entry's model gives none
// (missing, or a tier that fails), the variants are checked for a literal
// stand-in, as a task that names its own model gets them. A failure already reported (seen:
// the entry's, each variant's alone) is not repeated; the others' codes
// are reported on their own (model, tiers, skills).
func (v *validator) checkTogether(pf *PackFile, role string, entry resolve.PackEntry, key string, seen []*resolve.ResolutionError) {
	if len(entry.Variants) < 2 {
		return
	}
	if bm := v.boundModel(role); bm != nil {
		entry.Model = bm
	}
	re := v.resolveEntry(pf, role, entry)
	switch {
	case re == nil:
		return
	case re.Code == resolve.CodeModelUnresolved, re.Code == resolve.CodeTierUnknown, re.Code == resolve.CodeTierUnsupported, re.Code == resolve.CodeTierUnavailable:
		// The model is reported on its own (check, tiersAndSkills).
		standIn := "stand-in-model"
		entry.Model = &standIn
		re = v.resolveEntry(pf, role, entry)
	}
	if re == nil || re.Code != resolve.CodePackDefaultInvalid || slices.ContainsFunc(seen, func(s *resolve.ResolutionError) bool {
		return s != nil && s.Code == re.Code && s.Message == re.Message
	}) {
		return
	}
	c := *re
	c.Message = "with the other variants that hold without task overrides: " + re.Message
	vkey := ""
	if i, ok := re.Details["variant"].(int); ok {
		vkey = fmt.Sprintf("%s.variants[%d]", key, i)
	}
	v.report(pf, key, vkey, &c)
}

// boundModel is the model of the overlay that rolecall.yaml overlays binds
// to role, when that overlay is usable: a task for the role that names no
// profile gets it, and its model ranks above the pack entry's and the
// runtime default. A binding that fails a task is reported by config.
func (v *validator) boundModel(role string) *string {
	name, ok := v.l.cfg.Overlays[role]
	if !ok {
		return nil
	}
	p, ok := v.l.profiles[name]
	if !ok || !p.IsEnabled() || p.Disposition != resolve.DispositionOverlay || p.BaseRole == nil || *p.BaseRole != role {
		return nil
	}
	return p.Model
}

// resolveEntry resolves role with e (as if active) and no task overrides.
func (v *validator) resolveEntry(pf *PackFile, role string, e resolve.PackEntry) *resolve.ResolutionError {
	l := v.l
	active := true
	e.Active = &active
	pack := &resolve.Pack{Name: pf.Pack.Name, Roles: map[string]resolve.PackEntry{role: e}}
	_, err := resolve.Resolve(resolve.RoleName(role), resolve.Inputs{
		Catalog: l.catalog, Pack: pack, PackSelection: resolve.PackFromWorkerDefault,
		Defaults: l.cfg.Defaults, Policy: resolve.Policy{RejectLegacyProfiles: l.cfg.LegacyProfiles == LegacyReject},
		Models: l.cfg.Models, Skills: l.sk.list,
	})
	var re *resolve.ResolutionError
	errors.As(err, &re)
	return re
}

// unknownModes reports modes_allow names outside the catalog (mode_unknown)
// and says whether a default Mode is in a broken catalog file (whose own
// problem is already reported, so the entry is not checked further).
func (v *validator) unknownModes(pf *PackFile, key string, defaults, allow []string) (skip bool) {
	l := v.l
	for i, m := range allow {
		if _, ok := l.catalog.Modes[m]; !ok && !l.brokenModes[m] {
			k := fmt.Sprintf("%s.modes_allow[%d]", key, i)
			v.addAt(pf, resolve.CodeModeUnknown, k, m, "key %q: mode %q is not in the catalog", k, m)
		}
	}
	return slices.ContainsFunc(defaults, func(m string) bool { return l.brokenModes[m] })
}

// check resolves role with entry (as if active) and no task overrides and
// reports the failure, if any, at the key that causes it: the entry's, or
// with vkey set the variant's. It returns the failure. A variant's failure
// that is the entry's own (baseErr) is not reported again: the variant
// does not cause it.
func (v *validator) check(pf *PackFile, role string, entry resolve.PackEntry, key, vkey string, baseErr *resolve.ResolutionError) *resolve.ResolutionError {
	// The model is checked on its own: a missing one here, for the entry
	// (a variant cannot set one), and every tier problem by
	// tiersAndSkills. The rest runs with a literal stand-in, so that a
	// model problem hides none of the later checks (the Modes).
	m := cmp.Or(v.boundModel(role), entry.Model, v.l.cfg.Defaults.Model)
	if m == nil && vkey == "" {
		v.report(pf, key, vkey, v.resolveEntry(pf, role, entry)) // model_unresolved
	}
	if m == nil || strings.HasPrefix(*m, resolve.TierPrefix) {
		standIn := "stand-in-model"
		m = &standIn
	}
	entry.Model = m // the model such a task gets, which decides the variants
	re := v.resolveEntry(pf, role, entry)
	if re != nil && (baseErr == nil || re.Code != baseErr.Code || re.Message != baseErr.Message) {
		v.report(pf, key, vkey, re)
	}
	return re
}

// report adds re, when not nil, at the key of the entry (key) or of its
// variant (vkey) that causes it.
func (v *validator) report(pf *PackFile, key, vkey string, re *resolve.ResolutionError) {
	if re == nil {
		return
	}
	errKey, msg := key, re.Message
	if re.Code == resolve.CodePackDefaultInvalid {
		errKey = key + ".default_modes"
	}
	if vkey != "" {
		msg = vkey[len(key)+1:] + ": " + msg
		errKey = vkey
		for _, k := range []string{"default_modes", "modes_allow"} {
			if _, ok := pf.KeyOrigins[vkey+".set."+k]; ok {
				errKey = vkey + ".set." + k
				break
			}
		}
	}
	v.addAt(pf, re.Code, errKey, re.Subject, "%s", msg)
}

// applyVariant is entry with what set sets, as the resolver applies it.
func applyVariant(e resolve.PackEntry, set resolve.VariantSet) resolve.PackEntry {
	if set.Effort != nil {
		e.Effort = set.Effort
	}
	for _, f := range []struct {
		dst *[]string
		src []string
	}{
		{&e.DefaultModes, set.DefaultModes}, {&e.ModesAllow, set.ModesAllow}, {&e.Authority, set.Authority},
		{&e.Boundaries, set.Boundaries}, {&e.Escalations, set.Escalations}, {&e.Skills, set.Skills},
	} {
		if f.src != nil {
			*f.dst = f.src
		}
	}
	return e
}

func (v *validator) profiles() {
	l := v.l
	reject := l.cfg.LegacyProfiles == LegacyReject
	for _, name := range sortedKeys(l.profiles) {
		p := l.profiles[name]
		file := p.Origin.File
		switch p.Disposition {
		case resolve.DispositionOverlay:
			if p.BaseRole == nil {
				v.add(resolve.CodeOverlayRoleMissing, file, profileLine(p, "disposition"), "base_role", name, "overlay profile %q declares no base_role", name)
			} else if _, ok := l.catalog.Roles[*p.BaseRole]; !ok && !l.brokenRoles[*p.BaseRole] {
				v.add(resolve.CodeOverlayRoleMissing, file, profileLine(p, "base_role"), "base_role", name, "overlay profile %q has base_role %q, which is not in the catalog", name, *p.BaseRole)
			}
		default:
			if p.BaseRole != nil {
				v.add(resolve.CodeReplacementHasBaseRole, file, profileLine(p, "base_role"), "base_role", name, "replacement profile %q must not declare base_role", name)
			}
			if p.Disposition == resolve.DispositionLegacy && reject {
				v.add(resolve.CodeProfileDispositionRequired, file, 1, "disposition", name, "profile %q has no disposition and legacy profiles are rejected", name)
			}
		}
		if p.ResumeOnTimeout && p.Timeout == nil {
			v.add(resolve.CodeResumeWithoutTimeout, file, profileLine(p, "resume_on_timeout"), "resume_on_timeout", name, "profile %q sets resume_on_timeout without a timeout", name)
		}
	}
}

func (v *validator) config() {
	l := v.l
	if !l.cfgOK {
		return
	}
	cfg := &l.cfg
	file := cfg.Origin.File
	if n := cfg.DefaultPack; n != "" {
		if l.packs[n] == nil && l.packErrs[n] == nil {
			msg, _ := unknownPack("default_pack", n, sortedKeys(l.packs))
			v.add(resolve.CodePackNotFound, file, cfg.KeyLines["default_pack"], "default_pack", n, "%s", msg)
		}
	}
	for _, role := range sortedKeys(cfg.Overlays) {
		name := cfg.Overlays[role]
		key := "overlays." + role
		line := cfg.KeyLines[key]
		if _, ok := l.catalog.Roles[role]; !ok {
			if !l.brokenRoles[role] {
				v.add(resolve.CodeRoleUnknown, file, line, key, role, "overlays binds role %q, which is not in the catalog", role)
			}
			continue
		}
		p, ok := l.profiles[name]
		switch {
		case l.brokenProfiles[name]:
		case !ok:
			v.add(resolve.CodeExternalProfileMissing, file, line, key, name, "overlays binds role %q to profile %q, which does not exist", role, name)
		// In the order a task for the role checks the profile (docs/CONFIG.md, step 2).
		case !p.IsEnabled():
			v.add(resolve.CodeExternalProfileInactive, file, line, key, name, "overlays binds role %q to profile %q, which is disabled", role, name)
		case p.Disposition == resolve.DispositionLegacy && l.cfg.LegacyProfiles == LegacyReject:
			v.add(resolve.CodeProfileDispositionRequired, file, line, key, name, "overlays binds role %q to profile %q, which has no disposition while legacy profiles are rejected", role, name)
		case p.Disposition != resolve.DispositionOverlay:
			v.add(resolve.CodeReplacementRequiresExternalRef, file, line, key, name, "overlays binds role %q to profile %q, which is not an overlay", role, name)
		case p.BaseRole != nil && *p.BaseRole != role:
			v.add(resolve.CodeOverlayRoleMismatch, file, line, key, name, "overlays binds role %q to profile %q, whose base_role is %q", role, name, *p.BaseRole)
		}
	}
}
