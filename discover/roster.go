package discover

import (
	"strings"

	"github.com/rolecall/rolecall/resolve"
)

// RosterEntry is one identity of a pack's roster with what a planner
// needs to choose it without resolving: its description, the tiers it
// may be given and the skills its pack entry admits.
type RosterEntry struct {
	// Identity is the role token: a Role name or external:<name>.
	Identity    string `json:"identity"`
	Description string `json:"description"`
	// Tiers are the tiers a task may name for it: the entry's tiers as
	// written, else every tier of the model catalog (lexical); empty
	// without a catalog.
	Tiers []RosterTier `json:"tiers"`
	// Skills are what the pack entry's skills patterns admit (a task can
	// only narrow them; a variant of the entry may set others). A
	// replacement has no pack entry and so admits none.
	Skills []RosterSkill `json:"skills"`
}

// RosterTier is a tier and the model it yields now (Model "" and
// Available false when it yields none, or the catalog does not hold it).
type RosterTier struct {
	Name        string `json:"name"`
	Available   bool   `json:"available"`
	Model       string `json:"model,omitzero"`
	ResolvedVia string `json:"resolved_via,omitzero"`
}

// RosterSkill is an admitted skill.
type RosterSkill struct {
	Name        string `json:"name"`
	Source      string `json:"source"`
	Description string `json:"description"`
}

// RosterEntries is Roster with each identity's description, tiers and
// admitted skills, in the same order.
func (s *Snapshot) RosterEntries(pack string) ([]RosterEntry, error) {
	pf, err := s.namedPack(pack)
	if err != nil {
		return nil, err
	}
	ids := resolve.Roster(pf.Pack, s.Catalog, s.profileList, s.Policy)
	out := make([]RosterEntry, 0, len(ids))
	for _, id := range ids {
		e := RosterEntry{Identity: id, Skills: []RosterSkill{}}
		var entry resolve.PackEntry
		if name, ok := strings.CutPrefix(id, resolve.ExternalPrefix); ok {
			if p, ok := s.Profiles[name]; ok {
				e.Description = p.Description
			}
		} else {
			e.Description = s.Catalog.Roles[id].Description
			entry = pf.Pack.Roles[id]
		}
		e.Tiers = s.rosterTiers(entry.Tiers)
		for _, sk := range resolve.MatchSkills(entry.Skills, s.Skills) {
			e.Skills = append(e.Skills, RosterSkill{Name: sk.Name, Source: sk.Source, Description: s.SkillFiles[sk.Name].Description})
		}
		out = append(out, e)
	}
	return out, nil
}

func (s *Snapshot) rosterTiers(supported []string) []RosterTier {
	names := supported
	if len(names) == 0 && s.Models != nil {
		names = sortedKeys(s.Models.Tiers)
	}
	out := make([]RosterTier, 0, len(names))
	for _, t := range names {
		model, via, _, ok := s.Models.Expand(t, supported)
		out = append(out, RosterTier{Name: t, Available: ok, Model: model, ResolvedVia: via})
	}
	return out
}
