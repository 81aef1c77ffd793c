package discover

import (
	"fmt"
	"io/fs"

	"github.com/rolecall/rolecall/resolve"
)

// A hard link is the one way out of a root that os.Root cannot see: a
// second name, made inside the root, for a file whose other name may be
// anywhere on the same filesystem (a credentials file, another team's
// configuration). Neither the file nor its directory says where the other
// names are, so discovery refuses a regular file with more than one link
// unless Options.AllowHardLinks says every link is trusted. The count is
// read from the opened file, the one that is then read, so no rename
// between the check and the read can slip another file in.
func (t tree) checkLinks(display string, fi fs.FileInfo) *Error {
	if t.hardLinks {
		return nil
	}
	n := linkCount(fi)
	if n <= 1 {
		return nil
	}
	return &Error{
		Code: resolve.CodePathEscape, File: display,
		Extra: map[string]any{"reason": "hard_link", "links": n},
		Message: fmt.Sprintf("has %d hard links, and a hard link may give a file a name outside the trusted root that discovery cannot see: "+
			"copy the file instead, or allow hard links (ROLECALL_ALLOW_HARD_LINKS=true) where every link is trusted", n),
	}
}
