package discover_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// Load a config root once, then build each task's resolver inputs from the
// snapshot: map lookups only, no file access.
func ExampleLoad() {
	snap, err := discover.Load("testdata/roots/full", discover.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ref, _ := resolve.ParseRoleToken("architect")
	profile := "arch-notes"
	in, err := snap.Inputs(discover.Request{Ref: ref, Profile: &profile})
	if err != nil {
		fmt.Println(err)
		return
	}
	in.Explain = true // record each field's candidates, for Origin
	spec, err := resolve.Resolve(ref, in)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(spec.Identity.Name, spec.PromptDisposition, spec.Model, spec.Sources.Model)
	fmt.Println("model from", snap.Origin(in, &spec, "model"))
	// Output:
	// architect overlay overlay-model external_profile
	// model from agents/arch-notes.md:5
}

// Load reports the first problem with its file, line and key.
func ExampleLoad_strict() {
	_, err := discover.Load("testdata/roots/profile-timeout-bool", discover.Options{})
	fmt.Println(err)
	// Output:
	// agents/bot.md:3: profile_invalid: key "timeout": must be a positive integer, got boolean "true"
}

// Validate lists every problem, in `worker validate` form.
func ExampleValidate() {
	for _, e := range discover.Validate("testdata/roots/default-pack-missing") {
		fmt.Println(e)
	}
	// Output:
	// rolecall.yaml:1: pack_not_found: default_pack "ghost" does not exist (known: "default")
}

func ExampleSnapshot_Roster() {
	snap, err := discover.Load("testdata/roots/full", discover.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	roster, _ := snap.Roster("")
	fmt.Println(roster)
	// Output:
	// [architect implementer reviewer external:architect external:old-bot external:scribe]
}

// A worker keeps one Source, starts its watcher (a stat sweep every
// interval, on the Source's own goroutine) and asks it for the snapshot per
// task, which never waits for a sweep.
func ExampleNewSource() {
	src, err := discover.NewSource("testdata/roots/full", discover.Options{ReloadInterval: 2 * time.Second}, slog.Default())
	if err != nil {
		fmt.Println(err)
		return
	}
	src.Start(context.Background())
	defer src.Stop()
	snap := src.Snapshot()
	fmt.Println(len(snap.Packs), "packs;", len(snap.Profiles), "profiles; reload error:", src.Err())
	// Output:
	// 2 packs; 6 profiles; reload error: <nil>
}
