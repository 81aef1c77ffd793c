package events

import (
	"github.com/rolecall/rolecall/resolve"
)

// Event types (DESIGN.md §6).
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
	// Override is the "overrides" object (nil when absent). The field is
	// not named Overrides because that is the method converting it (with
	// Modes) into resolve.TaskOverrides.
	Override *Overrides `json:"overrides,omitzero"`
}

// ResolvedData is the data of a dev.rolecall.agentspec.resolved.v1 event:
// the resolved spec (fields exactly as DESIGN.md §6) plus the task id, the
// materialized system message and the inputs digest.
type ResolvedData struct {
	TaskID string `json:"task_id"`
	resolve.ResolvedAgentSpec
	SystemMessage string `json:"system_message"`
	InputsDigest  string `json:"inputs_digest"`
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
}
