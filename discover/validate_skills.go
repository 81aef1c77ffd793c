package discover

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rolecall/rolecall/resolve"
)

// tierSkillCodes are the codes tiersAndSkills reports in full. The
// per-entry resolutions of packs() stop at the first of them, so theirs
// are dropped in favour of these.
var tierSkillCodes = []resolve.Code{
	resolve.CodeTierUnknown, resolve.CodeTierUnsupported, resolve.CodeTierUnavailable,
	resolve.CodeSkillUnmatched, resolve.CodeSkillOverlap,
}

// tiersAndSkills reports the skill sources' problems, every tier symbol
// (defaults, profiles, pack entries) and every tier of a pack entry's
// tiers that the catalog does not hold or that yields no model, and every
// skill pattern of a pack entry (or of its variants) that matches no
// skill or shares a skill with another pattern of its list.
func (v *validator) tiersAndSkills() {
	l := v.l
	v.errs = slices.DeleteFunc(v.errs, func(e *Error) bool { return slices.Contains(tierSkillCodes, e.Code) })
	v.errs = append(v.errs, l.sk.errs...)
	cfg := &l.cfg
	if sym := cfg.Defaults.Model; sym != nil && strings.HasPrefix(*sym, resolve.TierPrefix) && l.cfgOK {
		v.tierSymbol(*sym, nil, cfg.Origin.File, cfg.KeyLines["defaults.model"], "defaults.model", "defaults.model")
	}
	for _, name := range sortedKeys(l.profiles) {
		p := l.profiles[name]
		if p.Model != nil && strings.HasPrefix(*p.Model, resolve.TierPrefix) {
			v.tierSymbol(*p.Model, nil, p.Origin.File, profileLine(p, "model"), "model", "profile "+name+"'s model")
		}
	}
	if l.catalog == nil {
		return
	}
	for _, name := range sortedKeys(l.packs) {
		pf := l.packs[name]
		for _, role := range sortedKeys(pf.Pack.Roles) {
			if _, ok := l.catalog.Roles[role]; !ok {
				continue // role_unknown is reported already
			}
			v.entryTiersAndSkills(pf, role, pf.Pack.Roles[role])
		}
	}
}

func (v *validator) entryTiersAndSkills(pf *PackFile, role string, e resolve.PackEntry) {
	m, key := v.l.cfg.Models, "roles."+role
	what := fmt.Sprintf("pack %q role %q", pf.Pack.Name, role)
	for i, t := range e.Tiers {
		k := fmt.Sprintf("%s.tiers[%d]", key, i)
		file, line := packLine(pf, key+".tiers")
		if !hasTier(m, t) {
			v.add(resolve.CodeTierUnknown, file, line, k, t, "%s supports tier %q, which is not in the model catalog%s", what, t, knownTiers(m))
		} else if _, _, tried, ok := m.Expand(t, e.Tiers); !ok {
			v.add(resolve.CodeTierUnavailable, file, line, k, t, "%s supports tier %q, which yields no model (tried %s)", what, t, quoteNames(tried))
		}
	}
	if e.Model != nil && strings.HasPrefix(*e.Model, resolve.TierPrefix) {
		file, line := packLine(pf, key+".model")
		v.tierSymbol(*e.Model, e.Tiers, file, line, key+".model", what+"'s model")
	}
	// The model a task that names no profile gets when the entry writes
	// none: the bound overlay's (above the entry's own, too), else the
	// runtime default.
	taken, from := v.boundModel(role), "the model of its bound overlay"
	if taken == nil && e.Model == nil {
		taken, from = v.l.cfg.Defaults.Model, "defaults.model"
	}
	if taken != nil && len(e.Tiers) > 0 {
		if t, ok := strings.CutPrefix(*taken, resolve.TierPrefix); ok && hasTier(m, t) && !slices.Contains(e.Tiers, t) {
			file, line := packLine(pf, key+".tiers")
			v.add(resolve.CodeTierUnsupported, file, line, key+".tiers", *taken, "%s takes %s %q, but supports only %s", what, from, *taken, quoteNames(e.Tiers))
		}
	}
	file, line := packLine(pf, key+".skills")
	v.patterns(e.Skills, file, line, key+".skills", what)
	for i, va := range e.Variants {
		k := fmt.Sprintf("%s.variants[%d].set.skills", key, i)
		file, line := packLine(pf, k)
		v.patterns(va.Set.Skills, file, line, k, fmt.Sprintf("%s variant %d", what, i))
	}
}

// tierSymbol checks one model value written as a tier symbol.
func (v *validator) tierSymbol(sym string, supported []string, file string, line int, key, what string) {
	m := v.l.cfg.Models
	t := strings.TrimPrefix(sym, resolve.TierPrefix)
	switch _, _, tried, ok := m.Expand(t, supported); {
	case !hasTier(m, t):
		v.add(resolve.CodeTierUnknown, file, line, key, sym, "%s %q names a tier that is not in the model catalog%s", what, sym, knownTiers(m))
	case len(supported) > 0 && !slices.Contains(supported, t):
		v.add(resolve.CodeTierUnsupported, file, line, key, sym, "%s %q names a tier the role does not support (supported: %s)", what, sym, quoteNames(supported))
	case !ok:
		v.add(resolve.CodeTierUnavailable, file, line, key, sym, "%s %q yields no model (tried %s)", what, sym, quoteNames(tried))
	}
}

// patterns checks one list of skill patterns against the skills found:
// each must match one, and no two may match one skill. While a source is
// missing or a skill unreadable (reported instead), what a pattern would
// match is unknown and unmatched patterns are not reported; a duplicate
// leaves the set known (the first is kept).
func (v *validator) patterns(ps []string, file string, line int, key, what string) {
	skills := v.l.sk.list
	incomplete := slices.ContainsFunc(v.l.sk.errs, func(e *Error) bool { return e.Code != resolve.CodeSkillDuplicate })
	matches := make([][]resolve.Skill, len(ps))
	for i, p := range ps {
		matches[i] = resolve.MatchSkills([]string{p}, skills)
		if len(matches[i]) == 0 && !incomplete {
			v.add(resolve.CodeSkillUnmatched, file, line, fmt.Sprintf("%s[%d]", key, i), p, "%s skill pattern %q matches no skill", what, p)
		}
	}
	for i := range ps {
		for j := i + 1; j < len(ps); j++ {
			for _, s := range matches[j] {
				if slices.Contains(matches[i], s) {
					v.add(resolve.CodeSkillOverlap, file, line, key, s.Name, "%s skill %q is matched by both %q and %q", what, s.Name, ps[i], ps[j])
					break
				}
			}
		}
	}
}

func hasTier(m *resolve.ModelCatalog, t string) bool {
	if m == nil {
		return false
	}
	_, ok := m.Tiers[t]
	return ok
}

func knownTiers(m *resolve.ModelCatalog) string {
	if m == nil {
		return " (rolecall.yaml declares no models:)"
	}
	return " (tiers: " + quoteNames(sortedKeys(m.Tiers)) + ")"
}

// packLine is where key is written in pf (a mixin's file included), else
// the nearest enclosing key that is (a role entry, the file).
func packLine(pf *PackFile, key string) (string, int) {
	o := pf.Where(key)
	return o.File, o.Line
}

// Diagnostics loads root and returns its diagnostics, sorted: optional
// skill sources that are missing (source_skipped) and profile flags
// written false that a profile cannot set (profile_flag_false_ignored).
// They are not problems, and are returned whether or not the root has any.
func Diagnostics(root string) []*Error { return loadedDiagnostics(load(root, Options{})) }
