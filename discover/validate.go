package discover

import (
	"errors"
	"fmt"
	"slices"

	"github.com/rolecall/rolecall/resolve"
)

// Validate loads everything under root and reports every problem it finds,
// each with file and line, sorted by file and line; nil means none. Each
// file is decoded independently, so one broken file does not hide another.
// On top of what Load refuses it checks cross-references:
//
//   - every pack × Role of that pack resolves with no task overrides, so
//     default_modes problems surface as pack_default_invalid and a missing
//     model as model_unresolved (inactive entries are checked as if active);
//     a pack entry for a Role not in the catalog is role_unknown, and a
//     modes_allow entry naming no Mode is mode_unknown;
//   - every overlay profile's base_role is in the catalog
//     (overlay_role_missing), a replacement declares none
//     (replacement_has_base_role), resume_on_timeout has a timeout
//     (resume_without_timeout), and a legacy profile is
//     profile_disposition_required when legacy profiles are rejected;
//   - rolecall.yaml's default_pack exists (pack_not_found) and every
//     overlays binding names a Role of the catalog and an enabled overlay
//     profile for that Role.
//
// Warnings (legacy profiles while they are allowed) are not problems and
// are not reported; Load returns them in Snapshot.Warnings.
func Validate(root string) []*Error {
	l := load(root)
	v := &validator{l: l, errs: l.errs}
	v.packs()
	v.profiles()
	v.config()
	sortErrors(v.errs)
	return v.errs
}

type validator struct {
	l    *loader
	errs []*Error
}

func (v *validator) add(code resolve.Code, file string, line int, key, subject, format string, args ...any) {
	v.errs = append(v.errs, &Error{Code: code, File: file, Line: line, Key: key, Subject: subject, Message: fmt.Sprintf(format, args...)})
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
			file, line := pf.Origin.File, pf.KeyLines[key]
			if _, ok := l.catalog.Roles[role]; !ok {
				if !l.brokenRoles[role] {
					v.add(resolve.CodeRoleUnknown, file, line, key, role, "pack %q has an entry for role %q, which is not in the catalog", name, role)
				}
				continue
			}
			if slices.ContainsFunc(entry.DefaultModes, func(m string) bool { return l.brokenModes[m] }) {
				continue // the Mode's own file is already reported
			}
			for i, m := range entry.ModesAllow {
				if _, ok := l.catalog.Modes[m]; !ok && !l.brokenModes[m] {
					k := fmt.Sprintf("%s.modes_allow[%d]", key, i)
					v.add(resolve.CodeModeUnknown, file, pf.KeyLines[key+".modes_allow"], k, m, "key %q: mode %q is not in the catalog", k, m)
				}
			}
			pack := pf.Pack
			if !entry.IsActive() {
				// Check an inactive entry's defaults too, on a copy.
				cp := *pf.Pack
				cp.Roles = map[string]resolve.PackEntry{role: entry}
				active := true
				e := entry
				e.Active = &active
				cp.Roles[role] = e
				cp.Digest = ""
				pack = &cp
			}
			_, err := resolve.Resolve(resolve.RoleName(role), resolve.Inputs{
				Catalog: l.catalog, Pack: pack, PackSelection: resolve.PackFromWorkerDefault,
				Defaults: l.cfg.Defaults, Policy: resolve.Policy{RejectLegacyProfiles: l.cfg.LegacyProfiles == LegacyReject},
			})
			var re *resolve.ResolutionError
			if errors.As(err, &re) {
				errLine, errKey := line, key
				if re.Code == resolve.CodePackDefaultInvalid {
					errKey = key + ".default_modes"
					errLine = pf.KeyLines[errKey]
				}
				v.add(re.Code, file, errLine, errKey, re.Subject, "%s", re.Message)
			}
		}
	}
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
		if _, ok := l.packs[n]; !ok && !l.brokenPacks[n] {
			v.add(resolve.CodePackNotFound, file, cfg.KeyLines["default_pack"], "default_pack", n, "default_pack %q does not exist (known: %s)", n, quoteNames(sortedKeys(l.packs)))
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
		case p.Disposition != resolve.DispositionOverlay:
			v.add(resolve.CodeReplacementRequiresExternalRef, file, line, key, name, "overlays binds role %q to profile %q, which is not an overlay", role, name)
		case !p.IsEnabled():
			v.add(resolve.CodeExternalProfileInactive, file, line, key, name, "overlays binds role %q to profile %q, which is disabled", role, name)
		case p.BaseRole != nil && *p.BaseRole != role:
			v.add(resolve.CodeOverlayRoleMismatch, file, line, key, name, "overlays binds role %q to profile %q, whose base_role is %q", role, name, *p.BaseRole)
		}
	}
}
