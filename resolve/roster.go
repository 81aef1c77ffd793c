package resolve

import "slices"

// Roster returns the identities a planner may assign: the active built-in
// Roles of the selected pack (lexical), then "external:<name>" for every
// enabled replacement profile (lexical). Overlays add nothing: they decorate
// their base Role. Legacy profiles count as replacements unless policy
// rejects them. Planner guidance and assignment validation must both use
// this one value.
func Roster(pack *Pack, catalog *Catalog, profiles []ExternalProfile, policy Policy) []string {
	roles := []string{}
	if pack != nil && catalog != nil {
		for _, name := range sortedKeys(catalog.Roles) {
			if e, ok := pack.Roles[name]; ok && e.IsActive() {
				roles = append(roles, name)
			}
		}
	}
	var ext []string
	for i := range profiles {
		p := &profiles[i]
		if !p.IsEnabled() || p.BaseRole != nil {
			continue
		}
		switch p.Disposition {
		case DispositionReplacement:
		case DispositionLegacy:
			if policy.RejectLegacyProfiles {
				continue
			}
		default:
			continue
		}
		ext = append(ext, ExternalPrefix+p.Name)
	}
	slices.Sort(ext)
	return append(roles, ext...)
}
