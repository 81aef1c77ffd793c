package ui

import (
	"cmp"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/audit"
	"github.com/rolecall/rolecall/explain"
)

// Kinds of entries in the specs stream.
const (
	KindResolved = "resolved"
	KindFailed   = "failed"
	KindDrift    = "drift"
	// KindInvalid is a message that does not read as an outcome or a
	// drift event; it is listed, with why, rather than hidden.
	KindInvalid = "invalid"
)

// Entry is one message of the specs stream as /api/decisions lists it.
type Entry struct {
	ID      string  `json:"id"`
	Seq     uint64  `json:"seq"`
	Time    *string `json:"time"`
	Kind    string  `json:"kind"`
	Subject string  `json:"subject"`
	TaskID  *string `json:"task_id"`
	// Role is the resolved identity's token, or for a failure the role
	// its decision record's task asked for.
	Role    *string `json:"role"`
	Pack    *string `json:"pack"`
	Model   *string `json:"model"`
	Effort  *string `json:"effort"`
	Code    *string `json:"code"`
	Message *string `json:"message"`
	// ConfigDigest and WorkerVersion come from the decision record (null
	// without one).
	ConfigDigest  *string `json:"config_digest"`
	WorkerVersion *string `json:"worker_version"`
	HasDecision   bool    `json:"has_decision"`
	Drift         *Drift  `json:"drift"`
	// Error says why an invalid entry could not be read.
	Error *string `json:"error"`

	at time.Time
}

// Drift is the data of a drift event, as the audit writes it.
type Drift = audit.Drift

// entryOf reads one stored message, whatever it holds. It also returns
// the parsed outcome, for callers that need more of it.
func entryOf(prefix string, m *jetstream.RawStreamMsg) (Entry, *explain.StoredOutcome) {
	e := Entry{Seq: m.Sequence, Subject: m.Subject, Kind: KindInvalid, at: m.Time}
	var so *explain.StoredOutcome
	var err error
	if strings.HasPrefix(m.Subject, prefix+".specs.drift.") {
		e.Kind = KindDrift
		if err := readDrift(&e, m); err != nil {
			e.Kind, e.Error = KindInvalid, str(err.Error())
		}
	} else if so, err = explain.ParseOutcome(m.Sequence, m.Subject, m.Header, m.Data); err != nil {
		e.ID, e.Error = m.Header.Get("Nats-Msg-Id"), str(err.Error())
	} else {
		readOutcome(&e, so)
	}
	if !e.at.IsZero() {
		e.Time = str(e.at.UTC().Format(time.RFC3339Nano))
	}
	return e, so
}

// readOutcome fills e from a parsed outcome.
func readOutcome(e *Entry, so *explain.StoredOutcome) {
	e.ID, e.Kind, e.TaskID = so.ID, so.Kind(), str(so.TaskID)
	if !so.Time.IsZero() {
		e.at = so.Time
	}
	if r := so.Resolved; r != nil {
		e.Role, e.Pack, e.Model, e.Effort = str(r.Sources.Identity), str(r.Pack.Name), str(r.Model), r.Effort
		if r.Identity.Kind == "casts" {
			e.Role = str(r.Identity.Name)
		}
	}
	if f := so.Failure; f != nil {
		e.Code, e.Message = str(string(f.Code)), str(f.Message)
	}
	if d := so.Decision; d != nil {
		e.HasDecision = true
		e.ConfigDigest, e.WorkerVersion = str(d.Config.Digest), str(d.WorkerVersion)
		if e.Role == nil {
			e.Role = taskRole(d.Task)
		}
	}
}

// readDrift reads a drift event leniently: its envelope in structured
// mode (or binary, with ce- headers) and the members of its data.
func readDrift(e *Entry, m *jetstream.RawStreamMsg) error {
	var env struct {
		ID   string         `json:"id"`
		Type string         `json:"type"`
		Time string         `json:"time"`
		Data jsontext.Value `json:"data"`
	}
	if id := m.Header.Get("ce-id"); id != "" {
		env.ID, env.Type, env.Time, env.Data = id, m.Header.Get("ce-type"), m.Header.Get("ce-time"), m.Data
	} else if err := json.Unmarshal(m.Data, &env); err != nil {
		return err
	}
	var d Drift
	if err := json.Unmarshal(env.Data, &d); err != nil {
		return err
	}
	e.ID, e.Drift, e.Code = env.ID, &d, cmp.Or(d.Code, str("drift"))
	if t, err := time.Parse(time.RFC3339Nano, env.Time); err == nil {
		e.at = t
	}
	return nil
}

// taskRole is the role a recorded task asked for.
func taskRole(task jsontext.Value) *string {
	var t struct {
		Role string `json:"role"`
	}
	if len(task) == 0 || json.Unmarshal(task, &t) != nil {
		return nil
	}
	return str(t.Role)
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
