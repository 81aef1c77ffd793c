package discover

import (
	"strings"

	"github.com/rolecall/rolecall/resolve"
)

// Origins of values that no file supplied.
var (
	originTask    = Origin{File: "task"}
	originBuiltin = Origin{File: "builtin"}
)

// CandidateOrigin says which file and line hold one candidate of an explain
// chain (its Source and Key), in the manner of git config --show-origin.
// in and spec are the Inputs and the result of the resolution that made
// the chain (Inputs.Explain set) against this snapshot. A pack's value
// gives the file and line it is written at through composition: the mixin
// that supplied it, or the variant that set it. Task values give
// Origin{File: "task"}; compiled-in defaults Origin{File: "builtin"};
// what no file holds ("none", "provider_default", an absent candidate)
// the zero Origin.
func (s *Snapshot) CandidateOrigin(in resolve.Inputs, spec *resolve.ResolvedAgentSpec, c resolve.Candidate) Origin {
	if c.Status == resolve.StatusAbsent {
		return Origin{}
	}
	switch src := c.Source; src {
	case resolve.SourceTask:
		return originTask
	case resolve.SourcePack, resolve.SourcePackVariant:
		return s.packOrigin(in, c.Key)
	case resolve.SourceExternalProfile, resolve.SourceExternalOverlay, resolve.SourceExternalReplacement:
		return s.profileOrigin(in, c.Key)
	case resolve.SourceRuntimeDefault:
		if line, ok := s.Config.KeyLines[c.Key]; ok {
			return Origin{File: s.Config.Origin.File, Line: line}
		}
		return originBuiltin
	case resolve.SourceWorkerDefault:
		if name, file, line := s.defaultPack(); file != "" && in.Pack != nil && name == in.Pack.Name {
			return Origin{File: file, Line: line}
		}
		return originBuiltin
	case resolve.SourceRole:
		if spec == nil {
			return Origin{}
		}
		return s.roleOrigin(spec.Identity.Name, c.Key)
	default:
		if role, ok := strings.CutPrefix(src, "casts:"); ok {
			return s.roleOrigin(role, "")
		}
		if strings.HasPrefix(src, resolve.ExternalPrefix) {
			return s.profileOrigin(in, "")
		}
		if mode, ok := strings.CutPrefix(src, "mode:"); ok {
			if cf, ok := s.ModeFiles[mode]; ok {
				return Origin{File: cf.Origin.File, Line: cf.KeyLines["body"]}
			}
		}
	}
	return Origin{}
}

// Origin is FieldOrigin for one field ("model", a key of
// resolve.Sources.Fields). spec must come from a resolution with
// Inputs.Explain set: without its chain the answer is the zero Origin.
func (s *Snapshot) Origin(in resolve.Inputs, spec *resolve.ResolvedAgentSpec, field string) Origin {
	if spec == nil {
		return Origin{}
	}
	for _, f := range spec.Explain {
		if f.Field == field {
			return s.FieldOrigin(in, spec, f)
		}
	}
	return Origin{}
}

// FieldOrigin is the origin of a field's winner: its selected candidate,
// or for the prompt the block that makes the identity (the Role's body, or
// the overlay or replacement profile's body).
func (s *Snapshot) FieldOrigin(in resolve.Inputs, spec *resolve.ResolvedAgentSpec, f resolve.FieldExplain) Origin {
	want := ""
	if f.Field == "prompt" {
		want = f.Source
		if want == resolve.SourceCasts {
			want = resolve.SourceRole
		}
	}
	for _, c := range f.Candidates {
		if c.Status == resolve.StatusSelected && (want == "" || c.Source == want) {
			return s.CandidateOrigin(in, spec, c)
		}
	}
	return Origin{}
}

func (s *Snapshot) roleOrigin(role, key string) Origin {
	cf, ok := s.RoleFiles[role]
	if !ok {
		return Origin{}
	}
	return Origin{File: cf.Origin.File, Line: cf.KeyLines[key]}
}

func (s *Snapshot) profileOrigin(in resolve.Inputs, key string) Origin {
	if in.Profile == nil {
		return Origin{}
	}
	p, ok := s.Profiles[in.Profile.Name]
	if !ok {
		return Origin{}
	}
	return Origin{File: p.Origin.File, Line: p.KeyLines[key]}
}

// packOrigin finds key ("roles.architect.variants[1].set.effort") in the
// selected pack, or the nearest enclosing key that is written (an entry
// without active: points at the entry).
func (s *Snapshot) packOrigin(in resolve.Inputs, key string) Origin {
	if in.Pack == nil {
		return Origin{}
	}
	pf, ok := s.Packs[in.Pack.Name]
	if !ok {
		return Origin{}
	}
	return pf.Where(key)
}

// Where is the file and line of key in the composed pack: the key itself,
// else the nearest enclosing key that is written, else the pack's file.
func (pf *PackFile) Where(key string) Origin {
	for k := key; k != ""; k = parentKey(k) {
		if o, ok := pf.KeyOrigins[k]; ok {
			return o
		}
	}
	return pf.Origin
}

// parentKey drops the last element of a dotted key ("a.b[2]" → "a.b",
// "a.b" → "a").
func parentKey(k string) string {
	if strings.HasSuffix(k, "]") {
		if i := strings.LastIndexByte(k, '['); i >= 0 {
			return k[:i]
		}
	}
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i]
	}
	return ""
}
