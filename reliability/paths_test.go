package reliability_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// assertNoHostPath fails when an outcome (or failure JSON) names a file
// system path other than a config-root-relative one. Paths only the worker
// could know (the config root, the temp and build directories) must not
// appear at all, and details.file / details.paths must be root-relative
// (or "builtin:…"). Values echoed from the task itself ("/etc/passwd" as a
// role) are the planner's own input, not a disclosure.
func assertNoHostPath(t testing.TB, body []byte, root string) {
	t.Helper()
	s := string(body)
	for _, p := range []string{root, bin.dir, filepath.Clean(os.TempDir()) + string(filepath.Separator)} {
		if p != "" && strings.Contains(s, p) {
			t.Errorf("outcome names the host path %q: %s", p, tail(s, 600))
		}
	}
	var doc struct {
		Data    *failureDetails `json:"data"`
		Details map[string]any  `json:"details"` // a bare failure JSON (worker resolve)
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return // not JSON (validate output); the substring check above is what applies
	}
	details := doc.Details
	if doc.Data != nil {
		details = doc.Data.Details
	}
	var files []string
	if f, ok := details["file"].(string); ok {
		files = append(files, f)
	}
	if ps, ok := details["paths"].([]any); ok {
		for _, p := range ps {
			if f, ok := p.(string); ok {
				files = append(files, f)
			}
		}
	}
	for _, f := range files {
		if !strings.HasPrefix(f, "builtin:") && !filepath.IsLocal(filepath.FromSlash(f)) {
			t.Errorf("details names %q, which is not relative to the config root", f)
		}
	}
}

type failureDetails struct {
	Details map[string]any `json:"details"`
}
