package discover_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/internal/bigroot"
	"pgregory.net/rapid"
)

// incrementalRoot is a small generated root with the features reuse must
// respect: a pack that extends another, a pack with a ${file:…}
// placeholder, both profile layouts and a catalog.
func incrementalRoot(t testing.TB) string {
	dir := copyRoot(t, "")
	if err := bigroot.Write(dir, bigroot.Size{Roles: 6, Packs: 4, Profiles: 8}); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "packs/team.yaml", "extends: [pack-000]\nroles:\n  role-0001:\n    effort: high\n")
	writeFile(t, dir, "packs/placed.yaml", "roles:\n  role-0002:\n    authority: ['${file:prompts/auth.txt}']\n")
	writeFile(t, dir, "prompts/auth.txt", "Approve releases")
	writeFile(t, dir, "agents/nested/nested.md", "---\ndisposition: replacement\n---\nNested.\n")
	return dir
}

// TestIncrementalReloadEqualsFullLoad is the property behind reusing
// parsed files: after any sequence of edits, additions, removals and
// breakages, what a Source serves after Reload equals what a fresh Load
// of the same files returns (or, when Load fails, the Source keeps its
// snapshot and reports the same error). Every touched file gets a new,
// old mtime, so the untouched ones really are served from the cache.
func TestIncrementalReloadEqualsFullLoad(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := incrementalRoot(t)
		ageFiles(t, dir, -2*time.Hour)
		src, err := discover.NewSource(dir, discover.Options{}, nil)
		if err != nil {
			rt.Fatal(err)
		}
		base := time.Now().Add(-time.Hour)
		for step := range rapid.IntRange(1, 12).Draw(rt, "steps") {
			rel, content := edit(rt, step)
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if content == "" {
				os.RemoveAll(p)
			} else {
				writeFile(t, dir, rel, content)
				when := base.Add(time.Duration(step) * time.Second)
				if err := os.Chtimes(p, when, when); err != nil {
					rt.Fatal(err)
				}
			}
			before := src.Snapshot()
			_, rerr := src.Reload()
			full, ferr := discover.Load(dir, discover.Options{})
			switch {
			case ferr != nil:
				if rerr == nil || rerr.Error() != ferr.Error() {
					rt.Fatalf("step %d (%s): Load failed with %v, Reload reported %v", step, rel, ferr, rerr)
				}
				if src.Snapshot() != before {
					rt.Fatalf("step %d (%s): a failed reload replaced the snapshot", step, rel)
				}
			case rerr != nil:
				rt.Fatalf("step %d (%s): Reload failed with %v, Load succeeded", step, rel, rerr)
			default:
				if got := src.Snapshot(); !reflect.DeepEqual(got, full) {
					rt.Fatalf("step %d (%s): the incremental snapshot differs from a full load (digests %s, %s)", step, rel, got.Digest, full.Digest)
				}
			}
		}
	})
}

// TestEventReloadEqualsFullLoad is the same property for a started
// Source whose only trigger is file events (the safety sweep is an hour
// away): after any sequence of edits, with or without a pause between
// them, it comes to serve what a fresh Load returns, or keeps its
// snapshot and reports Load's error. Events name what changed, and the
// load re-stats only that.
func TestEventReloadEqualsFullLoad(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dir := incrementalRoot(t)
		ageFiles(t, dir, -2*time.Hour)
		src, err := discover.NewSource(dir, discover.Options{ReloadInterval: time.Hour}, nil)
		if err != nil {
			rt.Fatal(err)
		}
		src.Start(t.Context())
		defer src.Stop()
		// Start's first sweep is what the events are relative to.
		waitConverged(rt, dir, src, "start")
		steps := rapid.IntRange(1, 8).Draw(rt, "steps")
		for step := range steps {
			rel, content := edit(rt, step)
			p := filepath.Join(dir, filepath.FromSlash(rel))
			if content == "" {
				os.RemoveAll(p)
			} else {
				writeFile(t, dir, rel, content)
			}
			if step == steps-1 || rapid.Bool().Draw(rt, "pause") {
				waitConverged(rt, dir, src, fmt.Sprintf("step %d (%s)", step, rel))
			}
		}
	})
}

// waitConverged waits until src serves what a fresh Load of dir returns
// (or reports the same error), failing after 5 s.
func waitConverged(rt *rapid.T, dir string, src *discover.Source, what string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		full, ferr := discover.Load(dir, discover.Options{})
		got, rerr := src.Snapshot(), src.Err()
		switch {
		case ferr != nil && rerr != nil && rerr.Error() == ferr.Error():
			return
		case ferr == nil && rerr == nil && reflect.DeepEqual(got, full):
			return
		}
		if time.Now().After(deadline) {
			want := "an error"
			if full != nil {
				want = full.Digest
			}
			rt.Fatalf("%s: after 5s the Source serves digest %s (error %v), a full load gives %s (error %v)", what, got.Digest, rerr, want, ferr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// edit draws one change: a path and its new content ("" removes it).
func edit(rt *rapid.T, step int) (string, string) {
	i := rapid.IntRange(0, 7).Draw(rt, "i")
	gen := step + 1
	switch rapid.IntRange(0, 11).Draw(rt, "kind") {
	case 0:
		return "catalog/roles/" + bigroot.RoleName(i%6) + ".md", bigroot.Role(i%6, gen)
	case 1:
		return "catalog/roles/" + bigroot.RoleName(i%6) + ".md", "---\nname: wrong\n---\nBroken.\n"
	case 2:
		return "packs/" + bigroot.PackName(i%4) + ".yaml", bigroot.Pack(i%4, 6, gen)
	case 3:
		return "packs/" + bigroot.PackName(i%4) + ".yaml", "roles: [not, a, mapping]\n"
	case 4:
		return "packs/" + bigroot.PackName(i%4) + ".yaml", ""
	case 5:
		return "packs/team.yaml", fmt.Sprintf("extends: [%s]\nroles:\n  role-0001:\n    effort: e%d\n", bigroot.PackName(i%4), gen)
	case 6:
		return "prompts/auth.txt", fmt.Sprintf("Approve release %d", gen)
	case 7:
		return "agents/" + bigroot.ProfileName(i) + ".md", bigroot.Profile(i, 6, gen)
	case 8:
		return "agents/" + bigroot.ProfileName(i) + ".md", ""
	case 9:
		return "agents/" + bigroot.ProfileName(i) + ".md", "---\ndisposition: sideways\n---\n"
	case 10:
		return "agents/nested/nested.md", fmt.Sprintf("---\ndisposition: replacement\ndescription: gen %d\n---\nNested.\n", gen)
	default:
		return "rolecall.yaml", fmt.Sprintf("default_pack: %s\n", bigroot.PackName(i%4))
	}
}

// After one file changes, a reload reads and decodes that file alone.
func TestReloadReadsOnlyChangedFiles(t *testing.T) {
	dir := incrementalRoot(t)
	ageFiles(t, dir, -2*time.Hour)
	src, err := discover.NewSource(dir, discover.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rel := "agents/" + bigroot.ProfileName(3) + ".md"
	writeFile(t, dir, rel, bigroot.Profile(3, 6, 9))
	when := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dir, rel), when, when); err != nil {
		t.Fatal(err)
	}
	if changed, err := src.Reload(); !changed || err != nil {
		t.Fatalf("Reload = %v, %v", changed, err)
	}
	reads, decodes := discover.CacheCounts(src)
	// The edited profile, plus the files every load reads afresh:
	// rolecall.yaml, ${file:…} targets and the placeholder pack.
	if reads > 4 || decodes > 2 {
		t.Errorf("one edited profile: %d files read, %d decoded; want the profile and the uncached few", reads, decodes)
	}
}

// A packs/ directory created after start is seen by the watcher, and
// Snapshot never sweeps by itself.
func TestWatcherSeesANewDirectory(t *testing.T) {
	dir := copyRoot(t, "")
	src, err := discover.NewSource(dir, discover.Options{ReloadInterval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := src.Snapshot()
	writeFile(t, dir, "packs/late.yaml", "roles:\n  architect:\n    model: late\n")
	time.Sleep(50 * time.Millisecond)
	if src.Snapshot() != first {
		t.Fatal("Snapshot swept without a watcher")
	}
	src.Start(t.Context())
	defer src.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for src.Snapshot().Packs["late"] == nil {
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not pick up packs/ created after start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	src.Stop()
	src.Stop() // a second Stop is harmless
}
