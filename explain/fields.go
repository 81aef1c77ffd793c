package explain

import (
	"bytes"

	"github.com/rolecall/rolecall/events"
)

// FieldValue is one field's value and source as resolved outcome data
// holds them.
type FieldValue struct {
	Value  any
	Source string
}

// OutcomeFields reads every explained field's value and source off
// resolved outcome data, under the field names of a document: identity
// (its role token), pack (its name), model, effort, modes (the identity's),
// tools, permissions, yolo, bypass, fast_mode, lion_system, prompt (the
// prompt body), artifact_defaults, timeout, active, skills (their names).
// It is how a chain is checked against an outcome, and how a recorded
// decision is compared with a new run.
func OutcomeFields(d *events.ResolvedData) map[string]FieldValue {
	s := d.Sources
	skills := make([]string, len(d.Skills))
	for i, sk := range d.Skills {
		skills[i] = sk.Name
	}
	var effort, timeout, permissions, artifacts any
	if d.Effort != nil {
		effort = *d.Effort
	}
	if d.Timeout != nil {
		timeout = *d.Timeout
	}
	if d.Permissions != nil {
		permissions = d.Permissions
	}
	if d.ArtifactDefaults != nil {
		artifacts = d.ArtifactDefaults
	}
	return map[string]FieldValue{
		"identity":          {s.Identity, s.Identity},
		"pack":              {d.Pack.Name, s.Pack},
		"model":             {d.Model, s.Model},
		"effort":            {effort, s.Effort},
		"modes":             {d.Identity.Modes, s.Modes},
		"tools":             {d.Tools, s.Tools},
		"permissions":       {permissions, s.Permissions},
		"yolo":              {d.Yolo, s.Yolo},
		"bypass":            {d.Bypass, s.Bypass},
		"fast_mode":         {d.FastMode, s.FastMode},
		"lion_system":       {d.LionSystem, s.LionSystem},
		"prompt":            {d.PromptBody, s.Prompt},
		"artifact_defaults": {artifacts, s.ArtifactDefaults},
		"timeout":           {timeout, s.Timeout},
		"active":            {d.Active, s.Active},
		"skills":            {skills, s.Skills},
	}
}

// SameValue reports whether two field values encode to the same JSON (the
// way outcome data encodes them: sorted keys, nil as null).
func SameValue(a, b any) bool {
	ja, errA := events.MarshalData(a)
	jb, errB := events.MarshalData(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// Changed lists the fields whose value or source differ between two
// resolved outcomes, in the order of the precedence table: a recorded
// document's changed, and the fields replay reports.
func Changed(was, now *events.ResolvedData) []string {
	a, b := OutcomeFields(was), OutcomeFields(now)
	out := []string{}
	for _, kv := range now.Sources.Fields() {
		f := kv[0]
		if a[f].Source != b[f].Source || !SameValue(a[f].Value, b[f].Value) {
			out = append(out, f)
		}
	}
	return out
}
