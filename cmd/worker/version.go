package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/alecthomas/kong"
)

// buildInfo is what the binary knows about its own build.
type buildInfo struct {
	Version  string // release version, else the module's, else "dev"
	Module   string // the main module's path
	Revision string // VCS revision, "" when the build was not stamped
	Time     string // VCS commit time (RFC 3339), or ""
	Modified bool   // the work tree had uncommitted changes
	Go       string // the Go version it was built with
}

// readBuildInfo reads the version from -ldflags "-X main.version=…" or,
// without it, from the module version and VCS stamps the go command
// records (go build in a git work tree stamps the revision; go run and
// test binaries are not stamped).
func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Module: "github.com/rolecall/rolecall"}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Go = info.GoVersion
	if info.Main.Path != "" {
		b.Module = info.Main.Path
	}
	if b.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `worker version` and `worker --version` print:
// the version, then the module, the revision (and whether the tree was
// modified) and the Go version.
func (b buildInfo) String() string {
	rev := "unknown"
	if b.Revision != "" {
		rev = b.Revision
		if b.Time != "" {
			rev += " " + b.Time
		}
		if b.Modified {
			rev += " modified"
		}
	}
	parts := []string{b.Module, "revision " + rev}
	if b.Go != "" {
		parts = append(parts, b.Go)
	}
	return fmt.Sprintf("worker %s (%s)", b.Version, strings.Join(parts, ", "))
}

type versionCmd struct{}

func (versionCmd) Run(g *globals) error {
	fmt.Fprintln(g.stdout, readBuildInfo())
	return nil
}

// versionFlag is --version, on the command line before any subcommand.
type versionFlag bool

// BeforeReset prints the version and ends the run with exit 0, before any
// required argument is checked.
func (versionFlag) BeforeReset(app *kong.Kong) error {
	fmt.Fprintln(app.Stdout, readBuildInfo())
	app.Exit(0)
	return nil
}
