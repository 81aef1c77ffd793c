package service

import "fmt"

// Code is a service error code: what went wrong with a request itself,
// as opposed to the task it carries (those take the worker's failure
// codes, resolve.Code).
type Code string

// The service's own codes. They are stable: a client may switch on them.
const (
	// CodeRequestInvalid: the request body of roster, validate or config
	// is not the JSON object the endpoint takes (not JSON, an unknown
	// member, a wrong type, an invalid pack name).
	CodeRequestInvalid Code = "request_invalid"
	// CodeResponseTooLarge: the answer is larger than the connection's
	// max payload.
	CodeResponseTooLarge Code = "response_too_large"
	// CodeInternal: a bug; the request may be retried.
	CodeInternal Code = "internal"
	// CodeNoConfig: no configuration is in service yet (a worker with
	// --config-from nats before its first bundle loads); another instance
	// of the queue group may answer a retry.
	CodeNoConfig Code = "config_unavailable"
)

// Reasons of request_invalid (details.reason).
const (
	ReasonSyntax       = "syntax"        // not JSON
	ReasonNotObject    = "not_object"    // JSON, but not an object
	ReasonUnknownField = "unknown_field" // a member the endpoint does not take
	ReasonWrongType    = "wrong_type"    // a member of the wrong JSON kind
	ReasonDuplicateKey = "duplicate_key" // a member twice
	ReasonInvalidName  = "invalid_name"  // a pack name that cannot be one
	ReasonRequired     = "required"      // a member the request needs is absent or empty
	ReasonConflict     = "conflict"      // members that exclude each other
)

// Status codes of the Nats-Service-Error-Code header.
const (
	StatusBadRequest  = 400
	StatusInternal    = 500
	StatusUnavailable = 503
)

// Error is a typed failure of a request that is not a task's failure. It
// is the body of the error reply, as JSON. Match it with errors.As, or
// compare codes with errors.Is against another *Error carrying only a
// Code.
type Error struct {
	Code Code `json:"code"`
	// Subject names the member at fault ("pack"); null for the body as a
	// whole.
	Subject *string `json:"subject"`
	// Details always holds "reason" for request_invalid; never null.
	Details map[string]any `json:"details"`
	Message string         `json:"message"`
	// Status is the Nats-Service-Error-Code it is answered with.
	Status int `json:"-"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is matches another *Error by Code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func requestInvalid(member, reason, format string, args ...any) *Error {
	e := &Error{Code: CodeRequestInvalid, Status: StatusBadRequest, Details: map[string]any{"reason": reason},
		Message: fmt.Sprintf(format, args...)}
	if member != "" {
		e.Subject = &member
		e.Details["field"] = member
	}
	return e
}

func internal(format string, args ...any) *Error {
	return &Error{Code: CodeInternal, Status: StatusInternal, Details: map[string]any{}, Message: fmt.Sprintf(format, args...)}
}
