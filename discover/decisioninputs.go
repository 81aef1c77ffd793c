package discover

import (
	"cmp"
	"slices"
	"strings"

	"github.com/rolecall/rolecall/resolve"
)

// DecisionUse names what one decision read: the catalog Role, the Modes,
// the selected pack, the profile and the skills. Empty names and names the
// snapshot does not hold contribute nothing.
type DecisionUse struct {
	Role    string
	Modes   []string
	Pack    string
	Profile string
	Skills  []string
}

// RequestUse is what a request names, selected as Inputs selects it: the
// bare role, the modes and skills the task names, the task's pack else the
// worker default, and the profile the task, the role token or the overlays
// binding names. It serves a decision that failed before a spec said what
// was used; it reads no pack entry, so a pack's default modes are not in it.
func (s *Snapshot) RequestUse(req Request) DecisionUse {
	u := DecisionUse{Modes: req.Task.Modes, Skills: req.Task.Skills}
	u.Pack, _, _ = s.defaultPack()
	if req.Pack != nil {
		u.Pack = *req.Pack
	}
	switch ref := req.Ref.(type) {
	case resolve.RoleName:
		u.Role = string(ref)
		u.Profile = s.Config.Overlays[u.Role]
	case resolve.ExternalRef:
		u.Profile = ref.Name
	}
	if req.Profile != nil {
		u.Profile = *req.Profile
	}
	return u
}

// DecisionInputs lists the inputs of one decision: always rolecall.yaml
// with its placeholders and the preamble; then the catalog Role and Modes,
// the pack with its mixins (the whole extends chain) and their
// placeholders, the profile and every file of each skill that u names.
// The list is new (the caller may keep it), sorted by origin, then kind,
// then name, each record once; the digests it points to are the
// snapshot's, shared like the rest of it. The cost is a map look-up per
// name: the records were built once per snapshot (newDecisionIndex).
func (s *Snapshot) DecisionInputs(u DecisionUse) []resolve.InputRecord {
	if s == nil || s.inputs == nil {
		return []resolve.InputRecord{}
	}
	x := s.inputs
	pack := x.packs[u.Pack]
	skills := 0
	for _, n := range u.Skills {
		skills += len(x.skills[n])
	}
	out := make([]resolve.InputRecord, 0, len(x.always)+len(pack)+len(u.Modes)+skills+2)
	out = append(out, x.always...)
	out = append(out, pack...)
	add := func(m map[string]resolve.InputRecord, name string) {
		if r, ok := m[name]; ok {
			out = append(out, r)
		}
	}
	add(x.roles, u.Role)
	add(x.profiles, u.Profile)
	for _, n := range u.Modes {
		add(x.modes, n)
	}
	for _, n := range u.Skills {
		out = append(out, x.skills[n]...)
	}
	slices.SortFunc(out, compareInputs)
	// A task may name a mode twice, and one file may be read as two
	// things (a mixin that is also a ${file:…} target) but not twice as one.
	return slices.CompactFunc(out, func(a, b resolve.InputRecord) bool { return compareInputs(a, b) == 0 })
}

func compareInputs(a, b resolve.InputRecord) int {
	return cmp.Or(strings.Compare(a.Origin, b.Origin), strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
}

// decisionIndex holds a snapshot's input records grouped by what selects
// them, so that a decision lists only what it read at the cost of a few
// map look-ups: a root of thousands of files must not put thousands of
// inputs in every outcome.
type decisionIndex struct {
	always   []resolve.InputRecord // rolecall.yaml, its placeholders, the preamble
	roles    map[string]resolve.InputRecord
	modes    map[string]resolve.InputRecord
	profiles map[string]resolve.InputRecord
	// packs holds, by pack name, the pack, its mixins and their
	// placeholders; a pack that failed to compose, only its own file.
	packs map[string][]resolve.InputRecord
	// skills holds every file of each skill's directory.
	skills map[string][]resolve.InputRecord
}

// newDecisionIndex groups the records of every file read, each with the
// digest of its bytes (sum, given the file). files are the snapshot's
// files in path order, each path once.
func newDecisionIndex(s *Snapshot, files []fileRec, sum func(fileRec) *string) *decisionIndex {
	digests := make(map[string]*string, len(files))
	x := &decisionIndex{
		roles:    make(map[string]resolve.InputRecord, len(s.RoleFiles)),
		modes:    make(map[string]resolve.InputRecord, len(s.ModeFiles)),
		profiles: make(map[string]resolve.InputRecord, len(s.Profiles)),
		packs:    make(map[string][]resolve.InputRecord, len(s.Packs)),
		skills:   make(map[string][]resolve.InputRecord, len(s.SkillFiles)),
	}
	rec := func(kind, name, path string) resolve.InputRecord {
		return resolve.InputRecord{Kind: kind, Name: name, Origin: path, Digest: digests[path]}
	}
	placeholders := func(out []resolve.InputRecord, ps []Placeholder) []resolve.InputRecord {
		for _, p := range ps {
			if p.Kind == PlaceholderEnv {
				out = append(out, resolve.InputRecord{Kind: resolve.InputPlaceholderEnv, Name: p.Name, Origin: p.Origin.File})
				continue
			}
			r := rec(resolve.InputPlaceholderFile, p.Name, p.Name)
			if r.Digest == nil {
				d := p.Digest
				r.Digest = &d
			}
			out = append(out, r)
		}
		return out
	}
	for _, f := range files {
		digests[f.path] = sum(f)
		switch f.kind {
		case resolve.InputConfig:
			x.always = append(x.always, rec(f.kind, f.path, f.path))
		case resolve.InputPreamble:
			x.always = append(x.always, rec(f.kind, f.name, f.path))
		case resolve.InputPack:
			// Its own file, until composition says more (below).
			x.packs[f.name] = []resolve.InputRecord{rec(f.kind, f.name, f.path)}
		}
	}
	x.always = placeholders(x.always, s.Config.Placeholders)
	for name, cf := range s.RoleFiles {
		x.roles[name] = rec(resolve.InputCatalogRole, name, cf.Origin.File)
	}
	for name, cf := range s.ModeFiles {
		x.modes[name] = rec(resolve.InputCatalogMode, name, cf.Origin.File)
	}
	for name, p := range s.Profiles {
		x.profiles[name] = rec(resolve.InputProfile, name, p.Origin.File)
	}
	for name, pf := range s.Packs {
		// pf.Files starts with the mixins in the order applied, then the
		// pack itself.
		rs := make([]resolve.InputRecord, 0, len(pf.Mixins)+1+len(pf.Placeholders))
		for i, m := range pf.Mixins {
			rs = append(rs, rec(resolve.InputMixin, m, pf.Files[i].File))
		}
		rs = append(rs, rec(resolve.InputPack, name, pf.Origin.File))
		x.packs[name] = placeholders(rs, pf.Placeholders)
	}
	for name, sf := range s.SkillFiles {
		for _, rel := range sf.Files {
			// A file of a skill may have any name; its origin is text.
			p := printableName(sf.Dir + "/" + rel)
			x.skills[name] = append(x.skills[name], rec(resolve.InputSkill, name, p))
		}
	}
	return x
}

// fileDigest is "sha256:" and the hex SHA-256 of data.
func fileDigest(data []byte) *string {
	d := bytesDigest(data)
	return &d
}
