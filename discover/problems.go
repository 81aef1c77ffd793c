package discover

import (
	"fmt"
	"os"
)

// DiagnosticProfileFlagFalseIgnored is the diagnostic for a profile that
// writes yolo, bypass or fast_mode as false: a profile can only switch
// these flags on, so the value has no effect.
const DiagnosticProfileFlagFalseIgnored = "profile_flag_false_ignored"

// Problems returns what Validate reports for the configuration s was
// loaded from, computed from s alone (no file is read, so it serves a
// snapshot from any source): every broken pack, the cross-reference
// checks of Validate and the skill sources' problems, sorted by file and
// line; nil means none. A problem that stops a load (a broken
// rolecall.yaml, profile or catalog file) cannot be in a snapshot.
func (s *Snapshot) Problems() []*Error {
	l := &loader{
		cfg: s.Config, cfgOK: true,
		catalog: s.Catalog, roleFiles: s.RoleFiles, modeFiles: s.ModeFiles,
		packs: s.Packs, profiles: s.Profiles, packErrs: s.PackErrors,
		sk: skillSet{list: s.Skills, files: s.SkillFiles, errs: s.SkillErrors},
	}
	return validateLoaded(l)
}

// Report is what Check finds in a config root.
type Report struct {
	// Problems are what Validate reports: each makes tasks fail.
	Problems []*Error
	// Diagnostics are what Diagnostics reports: facts that change nothing.
	Diagnostics []*Error
}

// Check is Validate and Diagnostics of root from one load. Its error is
// not a problem of the files: it says the root itself cannot be opened
// (it does not exist, is not a directory, or is not readable), so nothing
// was checked.
func Check(root string, opts Options) (Report, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return Report{}, fmt.Errorf("cannot open the config root %s: %w", root, unwrapPath(err))
	}
	r.Close()
	l := load(root, opts)
	return Report{Problems: validateLoaded(l), Diagnostics: loadedDiagnostics(l)}, nil
}

// loadedDiagnostics are the diagnostics of one load, sorted.
func loadedDiagnostics(l *loader) []*Error {
	var out []*Error
	for _, w := range l.warnings {
		if w.Code == DiagnosticSourceSkipped {
			out = append(out, w)
		}
	}
	out = append(out, profileFlagDiagnostics(l.profiles)...)
	sortErrors(out)
	return out
}

// profileFlagDiagnostics reports every yolo, bypass or fast_mode a profile
// writes as false. The rule stays (a profile may switch these flags on,
// never off, so a profile cannot undo a task's or the deployment's
// choice), but a false that does nothing should not pass unnoticed.
func profileFlagDiagnostics(profiles map[string]*Profile) []*Error {
	var out []*Error
	for _, name := range sortedKeys(profiles) {
		p := profiles[name]
		for _, f := range []struct {
			key string
			v   *bool
		}{{"yolo", p.Yolo}, {"bypass", p.Bypass}, {"fast_mode", p.FastMode}} {
			if f.v == nil || *f.v {
				continue
			}
			out = append(out, &Error{
				Code: DiagnosticProfileFlagFalseIgnored, File: p.Origin.File, Line: profileLine(p, f.key), Key: f.key, Subject: name,
				Message: fmt.Sprintf("profile %q sets %s: false, which is ignored: a profile can only switch %s on, so the task's value or rolecall.yaml's defaults.%s decides; remove the line", name, f.key, f.key, f.key),
			})
		}
	}
	return out
}
