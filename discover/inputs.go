package discover

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rolecall/rolecall/resolve"
)

// DefaultPack is the pack used when neither the task nor rolecall.yaml
// names one.
const DefaultPack = "default"

// Inputs builds the resolver's inputs for one task. It is the per-task hot
// path: name checks and map lookups only, no I/O. The catalog, pack and
// profile in the result are the snapshot's own (immutable) values, not
// copies.
//
// Names in req are checked first (task_invalid, a *resolve.ResolutionError).
// The pack is req.Pack, else rolecall.yaml's default_pack, else "default";
// an unknown one is a *Error with code pack_not_found, and a broken one is
// its own *Error (Snapshot.PackErrors). The profile is the
// one req.Profile names; without it, the one an ExternalRef names, or for a
// bare role the rolecall.yaml overlays binding, else none. A profile is
// never chosen because its name equals a Role. A named profile that does
// not exist is external_profile_missing (a *resolve.ResolutionError).
func (s *Snapshot) Inputs(req Request) (resolve.Inputs, error) {
	if req.Ref == nil {
		return resolve.Inputs{}, &resolve.ResolutionError{Code: resolve.CodeTaskInvalid, Subject: "role", Details: map[string]any{"field": "role"}, Message: "role is required"}
	}
	// name is the profile to use and via who named it; the message is
	// built only on error.
	var refName, name, via string
	switch ref := req.Ref.(type) {
	case resolve.RoleName:
		refName = string(ref)
		if b, ok := s.Config.Overlays[refName]; ok {
			name, via = b, "overlays"
		}
	case resolve.ExternalRef:
		refName, name, via = ref.Name, ref.Name, "role"
	}
	if err := resolve.ValidateName("role", refName); err != nil {
		return resolve.Inputs{}, err
	}
	if req.Pack != nil {
		if err := resolve.ValidateName("pack", *req.Pack); err != nil {
			return resolve.Inputs{}, err
		}
	}
	if req.Profile != nil {
		if err := resolve.ValidateName("profile", *req.Profile); err != nil {
			return resolve.Inputs{}, err
		}
		name, via = *req.Profile, "profile"
	}

	pf, err := s.pack(req.Pack)
	if err != nil {
		return resolve.Inputs{}, err
	}
	in := resolve.Inputs{
		Catalog:       s.Catalog,
		Pack:          pf.Pack,
		PackSelection: resolve.PackFromWorkerDefault,
		Task:          req.Task,
		Defaults:      s.Defaults,
		Policy:        s.Policy,
		Models:        s.Models,
		Skills:        s.Skills,
	}
	if req.Pack != nil {
		in.PackSelection = resolve.PackFromTask
	}

	if name != "" {
		p, ok := s.Profiles[name]
		if !ok {
			err := missingProfile(name, via, refName, s.closestProfiles(name))
			if via == "overlays" {
				err.Message, err.Subject = s.Config.masks.apply(err.Message), s.Config.masks.apply(err.Subject)
			}
			return resolve.Inputs{}, err
		}
		in.Profile = &p.ExternalProfile
	}
	if err := s.skillProblem(req.Ref, &in); err != nil {
		return resolve.Inputs{}, err
	}
	return in, nil
}

func missingProfile(name, via, role string, closest []string) *resolve.ResolutionError {
	by := map[string]string{
		"role":     "the role token " + resolve.ExternalPrefix + name,
		"overlays": fmt.Sprintf("the rolecall.yaml overlays binding for role %q", role),
		"profile":  "the task's profile field",
	}[via]
	err := &resolve.ResolutionError{
		Code: resolve.CodeExternalProfileMissing, Subject: name, Details: map[string]any{},
		Message: fmt.Sprintf("profile %q, named by %s, does not exist%s", name, by, didYouMean(closest)),
	}
	if len(closest) > 0 {
		err.Details["closest"] = closest
	}
	return err
}

// pack finds the selected pack: the task's, else the worker default.
func (s *Snapshot) pack(task *string) (*PackFile, error) {
	name, file, line := s.defaultPack()
	key := "pack"
	switch {
	case task != nil:
		name, file, line = *task, "", 0
	case file != "":
		key = "default_pack" // the key of rolecall.yaml that names it
	}
	if pf, ok := s.Packs[name]; ok {
		return pf, nil
	}
	if err, ok := s.PackErrors[name]; ok {
		return nil, err
	}
	if file == "" {
		file = packDir + "/" + name + packExt
	}
	h := s.packHint(name)
	err := &Error{Code: resolve.CodePackNotFound, File: file, Line: line, Key: key, Subject: name, Message: h.msg}
	if len(h.closest) > 0 {
		err.Extra = map[string]any{"closest": h.closest}
	}
	if task == nil {
		return nil, s.Config.masks.mask(err) // default_pack may come from a placeholder
	}
	return nil, err
}

// defaultPack is the worker's default pack and where it was set.
func (s *Snapshot) defaultPack() (name, file string, line int) {
	if s.Config.DefaultPack != "" {
		return s.Config.DefaultPack, s.Config.Origin.File, s.Config.KeyLines["default_pack"]
	}
	return DefaultPack, "", 0
}

// Roster is the planner roster of a pack ("" = the worker's default pack):
// its active built-in Roles, then external:<name> for every enabled
// replacement profile (resolve.Roster).
func (s *Snapshot) Roster(pack string) ([]string, error) {
	pf, err := s.namedPack(pack)
	if err != nil {
		return nil, err
	}
	return resolve.Roster(pf.Pack, s.Catalog, s.profileList, s.Policy), nil
}

// namedPack is the pack a roster names ("" = the worker's default pack).
func (s *Snapshot) namedPack(pack string) (*PackFile, error) {
	if pack == "" {
		return s.pack(nil)
	}
	if err := resolve.ValidateName("pack", pack); err != nil {
		return nil, err
	}
	return s.pack(&pack)
}

// didYouMean is the suggestion a not-found message ends with, "" when
// nothing is close.
func didYouMean(closest []string) string {
	switch len(closest) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("; did you mean %q?", closest[0])
	}
	return fmt.Sprintf("; did you mean one of %s?", quoteNames(closest))
}

func quoteNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = strconv.Quote(n)
	}
	return strings.Join(quoted, ", ")
}
