package events

import (
	"github.com/go-json-experiment/json/jsontext"

	"github.com/rolecall/rolecall/resolve"
)

// Decision is the record every outcome carries of how it was decided:
// which configuration, which task as decoded, and each input that decision
// read, with the sha256 of its bytes, so that the decision can be reproduced
// and checked later (docs/EVENTS.md, "Decision record").
type Decision struct {
	// ID is the outcome id.
	ID            string         `json:"id"`
	WorkerVersion string         `json:"worker_version"`
	Config        DecisionConfig `json:"config"`
	// Task is the task data as decoded (null when it could not be).
	Task jsontext.Value `json:"task"`
	// Inputs lists the inputs this decision read. Outcome data encodes
	// nil as null, which the schema rejects: a record with none holds [].
	Inputs []DecisionInput `json:"inputs"`
	// PromptDigest is the sha256 of the resolved prompt_body (null for a
	// failure).
	PromptDigest *string `json:"prompt_digest"`
}

// DecisionConfig names the configuration a decision was made with.
type DecisionConfig struct {
	// Source is "files" (a config root) or "nats" (a bundle).
	Source string `json:"source"`
	// Digest is the snapshot digest of the configuration.
	Digest string `json:"digest"`
	// Revision is the bundle's revision in NATS (null for files).
	Revision *uint64 `json:"revision"`
}

// DecisionInput is one input a decision read (resolve.InputRecord, which
// discovery builds once per snapshot and selects per decision).
type DecisionInput = resolve.InputRecord
