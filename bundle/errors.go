package bundle

import (
	"fmt"

	"github.com/rolecall/rolecall/discover"
)

// Code is a stable bundle error code.
type Code string

// The bundle error codes.
const (
	// CodeUnsafePath: an archive member named with "..", an absolute path,
	// a backslash or a path that is not clean.
	CodeUnsafePath Code = "bundle_path_unsafe"
	// CodeLink: a symlink or hard link member.
	CodeLink Code = "bundle_link"
	// CodeEntryType: a member that is not a regular file (directory,
	// device, FIFO, sparse file).
	CodeEntryType Code = "bundle_entry_type"
	// CodeDuplicate: two members with one path, or a file where another
	// member needs a directory.
	CodeDuplicate Code = "bundle_duplicate"
	// CodeTooLarge: a member, the member count or the archive over its limit.
	CodeTooLarge Code = "bundle_too_large"
	// CodeDigestMismatch: the archive's sha256 is not the digest recorded.
	CodeDigestMismatch Code = "bundle_digest_mismatch"
	// CodeMalformed: the bytes are not a readable tar archive, or a
	// record does not decode.
	CodeMalformed Code = "bundle_malformed"
	// CodeInvalid: the configuration in the bundle has problems (see
	// Error.Problems), or holds what only a worker's local rolecall.yaml
	// may (nats:, placeholders:).
	CodeInvalid Code = "bundle_invalid"
	// CodeRevisionConflict: current is not at the revision expected.
	CodeRevisionConflict Code = "revision_conflict"
	// CodeNotFound: no bundle at current, no such revision, or its archive
	// is missing from the object store.
	CodeNotFound Code = "bundle_not_found"
)

// Error is a typed bundle failure.
type Error struct {
	Code Code
	// Path is the archive member or file at fault, or "".
	Path    string
	Message string
	// Problems are the configuration's problems (CodeInvalid).
	Problems []*discover.Error
	// Revision is the revision the error is about, 0 when none.
	Revision uint64
}

func (e *Error) Error() string {
	s := string(e.Code) + ": "
	if e.Path != "" {
		s += e.Path + ": "
	}
	s += e.Message
	if len(e.Problems) > 0 {
		s += fmt.Sprintf(" (first: %v)", e.Problems[0])
	}
	return s
}

// Is matches another *Error by Code, so errors.Is(err, &Error{Code: c})
// works however err was made.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func errf(code Code, path, format string, args ...any) *Error {
	return &Error{Code: code, Path: path, Message: fmt.Sprintf(format, args...)}
}
