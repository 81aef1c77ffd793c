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
		replacement := p.Disposition == DispositionReplacement ||
			p.Disposition == DispositionLegacy && !policy.RejectLegacyProfiles
		if replacement && p.IsEnabled() && p.BaseRole == nil {
			ext = append(ext, ExternalPrefix+p.Name)
		}
	}
	slices.Sort(ext)
	return append(roles, ext...)
}
