package events

import (
	"embed"
	"io/fs"

	"github.com/rolecall/rolecall/resolve"
)

// Event types (docs/EVENTS.md).
const (
	TypeTaskAssigned = "dev.rolecall.task.assigned.v1"
	TypeSpecResolved = "dev.rolecall.agentspec.resolved.v1"
	TypeSpecFailed   = "dev.rolecall.agentspec.failed.v1"
)

// Overrides is the task's "overrides" object. nil pointers and nil slices
// are absent (the JSON member was missing or null); non-nil empty slices
// are explicit empty values.
type Overrides struct {
	Model       *string                   `json:"model,omitzero"`
	Effort      *string                   `json:"effort,omitzero"`
	ExtraPrompt *string                   `json:"extra_prompt,omitzero"`
	Tools       []string                  `json:"tools,omitzero"`
	Permissions *resolve.PermissionPolicy `json:"permissions,omitzero"`
	Yolo        *bool                     `json:"yolo,omitzero"`
	Bypass      *bool                     `json:"bypass,omitzero"`
	FastMode    *bool                     `json:"fast_mode,omitzero"`
	LionSystem  *bool                     `json:"lion_system,omitzero"`
}

// Task is the data of a dev.rolecall.task.assigned.v1 event.
type Task struct {
	TaskID  string   `json:"task_id"`
	Role    string   `json:"role"`
	Pack    *string  `json:"pack,omitzero"`
	Profile *string  `json:"profile,omitzero"`
	Modes   []string `json:"modes,omitzero"`
	// Skills are glob patterns narrowing the skills the pack entry
	// admits: nil (absent) keeps them all, [] none.
	Skills []string `json:"skills,omitzero"`
	// Override is the "overrides" object (nil when absent). The field is
	// not named Overrides because that is the method converting it (with
	// Modes) into resolve.TaskOverrides.
	Override *Overrides `json:"overrides,omitzero"`
}

// ResolvedData is the data of a dev.rolecall.agentspec.resolved.v1 event:
// the resolved spec (fields as docs/EVENTS.md lists them) plus the task
// id, the materialized system message and the inputs digest.
type ResolvedData struct {
	TaskID string `json:"task_id"`
	resolve.ResolvedAgentSpec
	SystemMessage string `json:"system_message"`
	InputsDigest  string `json:"inputs_digest"`
	// Decision is the decision record (nil: none, as outcomes written
	// before it existed). The encoder fills its id and worker version.
	Decision *Decision `json:"decision,omitzero"`
}

// FailureData is the data of a dev.rolecall.agentspec.failed.v1 event.
// TaskID and Subject are nil when unknown (JSON null).
type FailureData struct {
	TaskID  *string        `json:"task_id"`
	Stage   resolve.Stage  `json:"stage"`
	Code    resolve.Code   `json:"code"`
	Subject *string        `json:"subject"`
	Details map[string]any `json:"details"`
	Message string         `json:"message"`
	// Decision is the decision record, as in ResolvedData.
	Decision *Decision `json:"decision,omitzero"`
}

//go:embed schema/*.json
var schemaFS embed.FS

// SchemaNames lists the embedded JSON Schema files (draft 2020-12).
func SchemaNames() []string { return []string{SchemaTask, SchemaResolved, SchemaFailed} }

// Schema returns a copy of the embedded JSON Schema file name (e.g.
// "resolved.v1.json"), or nil if there is none. Its $id is
// DefaultDataSchemaBase + name, the dataschema of the events it describes.
func Schema(name string) []byte {
	b, _ := fs.ReadFile(schemaFS, "schema/"+name) // nil on error
	return b
}
