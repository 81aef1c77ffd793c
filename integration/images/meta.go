package images

import (
	"context"
	"os/exec"
	"strings"
)

// Meta is what an image says about itself: its OCI labels
// (org.opencontainers.image.*) and the version tag it gets besides the
// tag it was asked for.
type Meta struct {
	Version  string // a release version, or `git describe` of the checkout
	Revision string // the commit, or "unknown"
	Created  string // the commit's time (RFC 3339), so rebuilds are identical
}

// Source is org.opencontainers.image.source of every image.
const Source = "https://github.com/rolecall/rolecall"

// readMeta fills Meta from the checkout at root: version from want, else
// `git describe --tags --always --dirty`, else "dev".
func readMeta(ctx context.Context, root, want string) Meta {
	git := func(args ...string) string {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	m := Meta{Version: want, Revision: git("rev-parse", "HEAD"), Created: git("log", "-1", "--format=%cI")}
	if m.Version == "" {
		m.Version = git("describe", "--tags", "--always", "--dirty")
	}
	if m.Version == "" {
		m.Version = "dev"
	}
	if m.Revision == "" {
		m.Revision = "unknown"
	}
	return m
}

// buildArgs are the Dockerfiles' ARGs behind their LABELs.
func (m Meta) buildArgs(version string) map[string]*string {
	return map[string]*string{"VERSION": &version, "REVISION": &m.Revision, "CREATED": &m.Created}
}

// VersionTag turns a version into a Docker tag ([A-Za-z0-9_.-], at most
// 128 characters, not starting with . or -): "v1.2.0+meta" becomes
// "v1.2.0-meta".
func VersionTag(version string) string {
	b := []byte(version)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	tag := strings.TrimLeft(string(b), ".-")
	if len(tag) > 128 {
		tag = tag[:128]
	}
	if tag == "" {
		return "dev"
	}
	return tag
}
