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

	// PromptTail, when not empty, is the last block of the prompt body and
	// of the system message, kept apart from both: the event's prompt_body
	// is PromptBody + resolve.BlockSeparator + PromptTail, and its
	// system_message is SystemMessage + resolve.BlockSeparator +
	// PromptTail. A worker finishing a task from a resolve.Plan keeps the
	// task's extra prompt here (Plan.ResolveApart) rather than compose a
	// copy of the whole prompt per task; the encoders write the event as
	// for Complete's result. Anything else that reads the prompt must use
	// Complete.
	PromptTail string `json:"-"`
}

// Complete returns d with PromptTail folded into PromptBody and
// SystemMessage: d itself when PromptTail is empty, else a copy.
func (d *ResolvedData) Complete() *ResolvedData {
	if d.PromptTail == "" {
		return d
	}
	c := *d
	c.PromptBody = d.PromptBody + resolve.BlockSeparator + d.PromptTail
	c.SystemMessage = d.SystemMessage + resolve.BlockSeparator + d.PromptTail
	c.PromptTail = ""
	return &c
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
