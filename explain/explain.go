package explain

import (
	"strings"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// Format names the document's shape; it changes only with a migration
// note in the CHANGELOG.
const Format = "rolecall.explain.v1"

// Outcome kinds of a document.
const (
	OutcomeResolved = "resolved"
	OutcomeFailed   = "failed"
)

// Document is the explain document of one task against one configuration.
type Document struct {
	Format string `json:"format"`
	// TaskID and Role are the task's (null when the task data could not
	// be decoded far enough to name them).
	TaskID *string `json:"task_id"`
	Role   *string `json:"role"`
	// Config is the configuration the task was resolved against.
	Config events.DecisionConfig `json:"config"`
	// Recorded describes the recorded outcome being explained; null when
	// a task was given directly.
	Recorded *Recorded `json:"recorded"`
	// Outcome is "resolved" or "failed" (this run's).
	Outcome string `json:"outcome"`
	// Failure is this run's failure (null when resolved).
	Failure *events.FailureData `json:"failure"`
	// Fields holds one entry per field of sources, in the order of the
	// precedence table; [] for a failure.
	Fields []Field `json:"fields"`
	// ModelTier says how a tier symbol became the model (null for a
	// literal model or a failure).
	ModelTier *Tier `json:"model_tier"`
	// Skills are the selected skills with their SKILL.md.
	Skills      []Skill              `json:"skills"`
	Diagnostics []resolve.Diagnostic `json:"diagnostics"`
}

// Field is one field's decision.
type Field struct {
	Field string `json:"field"`
	// Value and Source are the field's value and source as the outcome
	// holds them (for identity, the role token; for the prompt, the
	// prompt body).
	Value  any    `json:"value"`
	Source string `json:"source"`
	// Origin is where the winner is written (for the prompt, the block
	// that makes the identity); null when no file holds it.
	Origin     *discover.Origin `json:"origin"`
	Candidates []Candidate      `json:"candidates"`
}

// Candidate is one layer's offer for a field, in precedence order.
type Candidate struct {
	// Source is the layer (task, external_profile, pack, pack_variant,
	// runtime_default, role, mode:<name>, none, …).
	Source string `json:"source"`
	// Status is selected, shadowed, absent or excluded.
	Status string `json:"status"`
	// Value is what the layer offers (null when absent).
	Value  any    `json:"value"`
	Reason string `json:"reason"`
	// Key is where the value is written in its layer's input
	// ("overrides.model", "roles.architect.variants[1].set.effort");
	// "" when it has no key.
	Key string `json:"key"`
	// Origin is the file and line of Key ("task" for the task itself,
	// "builtin" for a compiled-in default); null when no file holds it.
	Origin *discover.Origin `json:"origin"`
}

// Tier is the spec's model_tier with where the catalog maps the tier that
// gave the model.
type Tier struct {
	resolve.ModelTier
	Origin *discover.Origin `json:"origin"`
}

// Skill is a selected skill with its SKILL.md.
type Skill struct {
	resolve.Skill
	Origin *discover.Origin `json:"origin"`
}

// Task explains a decoded task against snap with one run of the worker's
// Handle (pipeline.HandleExplained). It returns the document and the
// outcome of that same run: what the worker would publish for the task.
func Task(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef) (*Document, pipeline.Outcome) {
	out := pipeline.HandleExplained(snap, task, ref, nil)
	d := newDocument(snap, task, out.Failure)
	if out.Failure != nil {
		return d, out
	}
	spec := &out.Resolved.ResolvedAgentSpec
	chains := make(map[string]resolve.FieldExplain, len(spec.Explain))
	for _, f := range spec.Explain {
		chains[f.Field] = f
	}
	for _, kv := range spec.Sources.Fields() {
		f, ok := chains[kv[0]]
		if !ok {
			// Every field has a chain (resolve's property test); a field
			// without one still shows its value and source.
			f = resolve.FieldExplain{Field: kv[0], Source: kv[1], Value: OutcomeFields(out.Resolved)[kv[0]].Value}
		}
		field := Field{Field: f.Field, Value: f.Value, Source: f.Source,
			Origin: origin(snap.FieldOrigin(out.Inputs, spec, f)), Candidates: make([]Candidate, len(f.Candidates))}
		for i, c := range f.Candidates {
			field.Candidates[i] = Candidate{Source: c.Source, Status: c.Status, Value: c.Value, Reason: c.Reason, Key: c.Key,
				Origin: origin(snap.CandidateOrigin(out.Inputs, spec, c))}
		}
		d.Fields = append(d.Fields, field)
	}
	if t := spec.ModelTier; t != nil {
		d.ModelTier = &Tier{ModelTier: *t, Origin: origin(snap.TierOrigin(TierName(*t)))}
	}
	for _, sk := range spec.Skills {
		d.Skills = append(d.Skills, Skill{Skill: sk, Origin: origin(snap.SkillOrigin(sk.Name))})
	}
	d.Diagnostics = append(d.Diagnostics, spec.Diagnostics...)
	return d, out
}

// TaskData decodes task data (the task JSON of docs/EVENTS.md) as the
// worker does and explains it. Task data that does not decode gives a
// document whose failure is the decode failure, as the worker's outcome
// would be.
func TaskData(snap *discover.Snapshot, data []byte) (*Document, pipeline.Outcome) {
	task, ref, err := events.DecodeTaskData(data, events.DecodeOptions{})
	if err != nil {
		f := pipeline.FailureFrom(&task.TaskID, resolve.StageDecode, err)
		return newDocument(snap, task, f), pipeline.Outcome{Failure: f, SnapshotDigest: snap.Digest}
	}
	return Task(snap, task, ref)
}

// TierName is the tier whose model a model_tier took: the symbol's own
// tier, or the fallback tier that stood in.
func TierName(t resolve.ModelTier) string {
	if via, ok := strings.CutPrefix(t.ResolvedVia, "fallback:"); ok {
		return via
	}
	name, _ := strings.CutPrefix(t.Symbol, resolve.TierPrefix)
	return name
}

// ConfigOf names a snapshot's configuration as a decision record does.
func ConfigOf(snap *discover.Snapshot) events.DecisionConfig {
	return pipeline.DecisionConfig(snap)
}

// newDocument is the document of task with its outcome, failed when f is
// set, and no fields yet.
func newDocument(snap *discover.Snapshot, task events.Task, f *events.FailureData) *Document {
	d := &Document{Format: Format, TaskID: nonEmpty(task.TaskID), Role: nonEmpty(task.Role), Config: ConfigOf(snap),
		Outcome: OutcomeResolved, Failure: f, Fields: []Field{}, Skills: []Skill{}, Diagnostics: []resolve.Diagnostic{}}
	if f != nil {
		d.Outcome = OutcomeFailed
	}
	return d
}

// origin is nil for the zero Origin (no file holds the value).
func origin(o discover.Origin) *discover.Origin {
	if o == (discover.Origin{}) {
		return nil
	}
	return &o
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
