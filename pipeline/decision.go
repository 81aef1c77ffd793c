package pipeline

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// NewDecision builds the decision record of an outcome decided with snap
// for task. inputs are what the decision read
// (discover.Snapshot.DecisionInputs); nil means none, as for a task that
// could not be decoded (task nil: the record then holds a null task) or a
// dead letter, where nothing was decided. prompt is the resolved
// prompt_body (nil for a failure). The record's id and worker version are
// set when the outcome is encoded (events.OutcomeMeta), where the outcome
// id is known.
func NewDecision(snap *discover.Snapshot, task *events.Task, inputs []events.DecisionInput, prompt *string) *events.Decision {
	if inputs == nil {
		// The schema wants an array; outcome data encodes nil as null.
		inputs = []events.DecisionInput{}
	}
	d := &events.Decision{Config: DecisionConfig(snap), Task: jsontext.Value("null"), Inputs: inputs}
	if task != nil {
		if b, err := events.MarshalData(task); err == nil {
			d.Task = b
		}
	}
	if prompt != nil {
		pd := digestOf(*prompt)
		d.PromptDigest = &pd
	}
	return d
}

// decisionInputs lists what the decision of out read, from snap's index
// (discover.Snapshot.DecisionInputs): the worker config, its placeholders
// and the preamble always; for a resolved spec, the catalog Role of a
// casts identity, its Modes, the selected pack with its mixins, the
// profile and the skills; for a failure, what the request names
// (discover.Snapshot.RequestUse), as the spec that would say what was used
// does not exist. A few map look-ups: never a walk over the root.
func decisionInputs(snap *discover.Snapshot, task *events.Task, ref resolve.RoleRef, out *Outcome) []events.DecisionInput {
	if snap == nil || task == nil {
		return nil
	}
	if out.Resolved == nil {
		return snap.DecisionInputs(snap.RequestUse(discover.Request{Ref: ref, Pack: task.Pack, Profile: task.Profile, Task: task.Overrides()}))
	}
	spec := &out.Resolved.ResolvedAgentSpec
	var u discover.DecisionUse
	if out.Inputs.Pack != nil {
		u.Pack = out.Inputs.Pack.Name
	}
	// A replacement reads no catalog Role or Mode.
	if spec.Identity.Kind == resolve.IdentityCasts {
		u.Role, u.Modes = spec.Identity.Name, spec.Identity.Modes
	}
	if p := out.Inputs.Profile; p != nil {
		u.Profile = p.Name
	}
	if len(spec.Skills) > 0 {
		u.Skills = make([]string, len(spec.Skills))
		for i, sk := range spec.Skills {
			u.Skills[i] = sk.Name
		}
	}
	return snap.DecisionInputs(u)
}

// DecisionConfig names a snapshot's configuration as a decision record
// does: its source ("files" unless set), digest, and revision (only for a
// bundle from NATS).
func DecisionConfig(snap *discover.Snapshot) events.DecisionConfig {
	if snap == nil {
		return events.DecisionConfig{Source: discover.ConfigFromFiles}
	}
	c := events.DecisionConfig{Source: snap.ConfigSource, Digest: snap.Digest}
	if c.Source == "" {
		c.Source = discover.ConfigFromFiles
	}
	if c.Source == discover.ConfigFromNATS {
		rev := snap.Revision
		c.Revision = &rev
	}
	return c
}

// Decision returns the outcome's decision record (nil when it has none).
func (o *Outcome) Decision() *events.Decision {
	switch {
	case o.Resolved != nil:
		return o.Resolved.Decision
	case o.Failure != nil:
		return o.Failure.Decision
	}
	return nil
}

// withoutExtraPrompt is a copy of a decision whose task's
// overrides.extra_prompt is replaced by its digest: an outcome too large
// to publish records the task without the prompt that made it so (the
// task event itself still holds it).
func withoutExtraPrompt(d *events.Decision, task events.Task) *events.Decision {
	if d == nil {
		return nil
	}
	c := *d
	if task.Override != nil && task.Override.ExtraPrompt != nil {
		o := *task.Override
		pd := digestOf(*o.ExtraPrompt)
		o.ExtraPrompt = &pd
		task.Override = &o
		if b, err := events.MarshalData(&task); err == nil {
			c.Task = b
		}
	}
	return &c
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return resolve.DigestPrefix + hex.EncodeToString(sum[:])
}
