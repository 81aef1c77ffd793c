package images

import (
	"context"
	"strings"
	"testing"
)

func TestVersionTag(t *testing.T) {
	tests := map[string]string{
		"v1.2.0": "v1.2.0",
		"v0.0.0-20260504100000-0123456789ab+dirty": "v0.0.0-20260504100000-0123456789ab-dirty",
		"d98c7fe-dirty":          "d98c7fe-dirty",
		"2.15.3":                 "2.15.3",
		".hidden":                "hidden",
		"":                       "dev",
		"a/b c":                  "a-b-c",
		strings.Repeat("x", 200): strings.Repeat("x", 128),
	}
	for in, want := range tests {
		if got := VersionTag(in); got != want {
			t.Errorf("VersionTag(%q) = %q, want %q", in, got, want)
		}
	}
}

// readMeta outside a git checkout still yields a version and a revision.
func TestReadMetaWithoutGit(t *testing.T) {
	m := readMeta(context.Background(), t.TempDir(), "")
	if m.Version != "dev" || m.Revision != "unknown" {
		t.Errorf("meta %+v, want version dev and revision unknown", m)
	}
	if m := readMeta(context.Background(), t.TempDir(), "v1.0.0"); m.Version != "v1.0.0" {
		t.Errorf("meta %+v, want the version given", m)
	}
}
