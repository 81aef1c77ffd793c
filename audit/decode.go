package audit

import (
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/coded"
)

// Event types.
const (
	TypeAllocated = "dev.rolecall.agentspec.allocated.v1"
	TypeDrift     = "dev.rolecall.agentspec.drift.v1"
)

// CodeUnknownDecision is the drift code of an allocation whose decision
// is not found.
const CodeUnknownDecision = "drift_unknown_decision"

// Code is a stable code of an audit failure.
type Code string

// CodeAllocationInvalid is the code of an allocation event that does not
// decode.
const CodeAllocationInvalid Code = "allocation_invalid"

// Bounds of an allocation's values.
const (
	maxIDLen    = 256
	maxValueLen = 256
	maxBody     = 64 << 10
)

// Allocation is the data of an allocated event. A nil value was not
// reported (absent or null) and is not compared.
type Allocation struct {
	DecisionID string  `json:"decision_id"`
	Provider   *string `json:"provider"`
	Model      *string `json:"model"`
	Effort     *string `json:"effort"`
}

// AllocatedEvent is a decoded allocated event.
type AllocatedEvent struct {
	ID, Source string
	Data       Allocation
}

// Error is a typed audit failure (coded.Error with this package's codes).
// Match it with errors.As, or compare codes with errors.Is against another
// *Error carrying only a Code.
type Error = coded.Error[Code]

func invalid(format string, args ...any) *Error {
	return coded.New(CodeAllocationInvalid, nil, format, args...)
}

// DecodeAllocated reads an allocated event in structured mode (a
// CloudEvents JSON body) or binary mode (ce-* headers, the body is the
// data). Unknown data members are ignored, so allocators may add their
// own; the four known ones must have the right types.
func DecodeAllocated(h nats.Header, body []byte) (AllocatedEvent, error) {
	var ev AllocatedEvent
	if len(body) > maxBody {
		return ev, invalid("the event is %d bytes, over %d", len(body), maxBody)
	}
	e, err := events.DecodeEvent(h, body, TypeAllocated)
	if err != nil {
		return ev, invalid("%v", err)
	}
	ev.ID, ev.Source = e.ID(), e.Source()
	if !text(ev.ID, maxIDLen) || !text(ev.Source, maxIDLen) {
		return ev, invalid("id and source must be non-empty printable strings of at most %d bytes", maxIDLen)
	}
	data := e.Data()
	if err := json.Unmarshal(data, &ev.Data); err != nil {
		return ev, invalid("data: %v", err)
	}
	if !text(ev.Data.DecisionID, maxIDLen) {
		return ev, invalid("data.decision_id must be a non-empty printable string of at most %d bytes", maxIDLen)
	}
	// In the data's order, so that of several bad fields the same one is named each time.
	for _, f := range []struct {
		name string
		v    *string
	}{{"provider", ev.Data.Provider}, {"model", ev.Data.Model}, {"effort", ev.Data.Effort}} {
		if f.v != nil && (len(*f.v) > maxValueLen || !utf8.ValidString(*f.v)) {
			return ev, invalid("data.%s must be valid UTF-8 of at most %d bytes", f.name, maxValueLen)
		}
	}
	return ev, nil
}

// text reports a non-empty string of printable ASCII of at most n bytes.
func text(s string, n int) bool {
	return s != "" && len(s) <= n && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e })
}
