package coded

import "fmt"

// Error is a failure with a stable code. Match it with errors.As, or
// compare codes with errors.Is against another *Error carrying only a
// Code. Details is never nil, so it encodes as {}.
type Error[C ~string] struct {
	Code    C              `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

func (e *Error[C]) Error() string { return string(e.Code) + ": " + e.Message }

// Is matches another *Error of the same code type by Code.
func (e *Error[C]) Is(target error) bool {
	t, ok := target.(*Error[C])
	return ok && t.Code == e.Code
}

// New is an *Error with the formatted message; nil details become {}.
func New[C ~string](code C, details map[string]any, format string, args ...any) *Error[C] {
	if details == nil {
		details = map[string]any{}
	}
	return &Error[C]{Code: code, Message: fmt.Sprintf(format, args...), Details: details}
}
