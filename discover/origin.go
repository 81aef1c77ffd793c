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

// packKey, profileKey and defaultsKey name the file key behind a resolved
// field, per source.
var (
	packKey    = map[string]string{"model": "model", "effort": "effort", "modes": "default_modes", "active": "active"}
	profileKey = map[string]string{
		"model": "model", "effort": "effort", "yolo": "yolo", "bypass": "bypass",
		"fast_mode": "fast_mode", "lion_system": "lion_system", "artifact_defaults": "artifact_defaults",
		"timeout": "timeout", "active": "enabled",
	}
	defaultsKey = map[string]string{
		"model": "model", "effort": "effort", "tools": "tools", "permissions": "permissions",
		"yolo": "yolo", "bypass": "bypass", "fast_mode": "fast_mode", "lion_system": "lion_system",
	}
)

// Origin says which file and line supplied the winning value of a resolved
// field (a key of resolve.Sources.Fields), for explain output in the manner
// of git config --show-origin. in and spec are the Inputs and result of one
// resolution against this snapshot. Values from the task give
// Origin{File: "task"}; compiled-in defaults give Origin{File: "builtin"};
// "none" and "provider_default" give the zero Origin.
func (s *Snapshot) Origin(in resolve.Inputs, spec *resolve.ResolvedAgentSpec, field string) Origin {
	if spec == nil {
		return Origin{}
	}
	var src string
	for _, f := range spec.Sources.Fields() {
		if f[0] == field {
			src = f[1]
		}
	}
	switch field {
	case "identity":
		if role, ok := strings.CutPrefix(src, "casts:"); ok {
			return s.roleOrigin(role, "")
		}
		return s.profileOrigin(in, "")
	case "prompt":
		if src == resolve.SourceCasts {
			return s.roleOrigin(spec.Identity.Name, "body")
		}
		return s.profileOrigin(in, "body")
	case "pack":
		if src == resolve.SourceTask {
			return originTask
		}
		if name, file, line := s.defaultPack(); file != "" && in.Pack != nil && name == in.Pack.Name {
			return Origin{File: file, Line: line}
		}
		return originBuiltin
	}
	switch src {
	case resolve.SourceTask:
		return originTask
	case resolve.SourcePack:
		return s.packOrigin(in, spec.Identity.Name, packKey[field])
	case resolve.SourceExternalProfile:
		return s.profileOrigin(in, profileKey[field])
	case resolve.SourceRuntimeDefault:
		key := defaultsKey[field]
		if line, ok := s.Config.KeyLines["defaults."+key]; ok && key != "" {
			return Origin{File: s.Config.Origin.File, Line: line}
		}
		return originBuiltin
	case resolve.SourceRole:
		return s.roleOrigin(spec.Identity.Name, field)
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

// packOrigin points at roles.<role>.<key>, or at the role's entry when the
// key is not written (active defaults to true).
func (s *Snapshot) packOrigin(in resolve.Inputs, role, key string) Origin {
	if in.Pack == nil {
		return Origin{}
	}
	pf, ok := s.Packs[in.Pack.Name]
	if !ok {
		return Origin{}
	}
	entry := "roles." + role
	line, ok := pf.KeyLines[entry+"."+key]
	if !ok {
		line = pf.KeyLines[entry]
	}
	return Origin{File: pf.Origin.File, Line: line}
}
