package discover_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// count returns how many records have level and message msg.
func (r *recorder) count(level slog.Level, msg string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range r.records {
		if rec.Level == level && rec.Message == msg {
			n++
		}
	}
	return n
}

const (
	msgReloadFailed = "discover: reload failed; keeping the last good snapshot"
	msgLegacy       = "discover: legacy profile"
	msgBrokenPack   = "discover: pack is broken; tasks that select it fail"
)

func newSource(t *testing.T, dir string, interval time.Duration) (*discover.Source, *recorder) {
	t.Helper()
	rec := &recorder{}
	src, err := discover.NewSource(dir, discover.Options{ReloadInterval: interval}, slog.New(rec))
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	return src, rec
}

func TestSourceReloadsOnChange(t *testing.T) {
	dir := copyRoot(t, "full")
	src, _ := newSource(t, dir, 0)
	first := reloaded(t, src)
	if again := reloaded(t, src); again != first {
		t.Fatal("unchanged files gave a new snapshot pointer")
	}

	writeFile(t, dir, "packs/team.yaml", "roles:\n  architect:\n    model: edited-model\n")
	second := reloaded(t, src)
	if second == first || second.Digest == first.Digest {
		t.Fatal("an edited pack did not produce a new snapshot")
	}
	if got := *second.Packs["team"].Pack.Roles["architect"].Model; got != "edited-model" {
		t.Errorf("new snapshot has model %q", got)
	}
	if *first.Packs["team"].Pack.Roles["architect"].Model != "pack-architect-model" {
		t.Error("the old snapshot changed")
	}
	if src.Err() != nil {
		t.Errorf("Err() = %v after a good reload", src.Err())
	}

	// A new file in a listed directory is seen too.
	writeFile(t, dir, "agents/newcomer.md", "---\ndisposition: replacement\n---\nHi.\n")
	if _, ok := reloaded(t, src).Profiles["newcomer"]; !ok {
		t.Error("a new profile file was not picked up")
	}
	// So is a removed one.
	if err := os.Remove(filepath.Join(dir, "agents", "newcomer.md")); err != nil {
		t.Fatal(err)
	}
	if _, ok := reloaded(t, src).Profiles["newcomer"]; ok {
		t.Error("a removed profile file is still served")
	}
}

func TestSourceKeepsLastGoodSnapshot(t *testing.T) {
	dir := copyRoot(t, "full")
	src, rec := newSource(t, dir, 0)
	good := reloaded(t, src)

	writeFile(t, dir, "agents/scribe.md", "---\ndisposition: replacement\ntimeout: true\n---\nBroken.\n")
	for range 3 {
		if got := reloaded(t, src); got != good {
			t.Fatal("a broken edit replaced the last good snapshot")
		}
	}
	de := asError(t, src.Err())
	if de.Code != resolve.CodeProfileInvalid || de.File != "agents/scribe.md" || de.Line != 3 {
		t.Errorf("Err() = %v", de)
	}
	if n := rec.count(slog.LevelWarn, msgReloadFailed); n != 1 {
		t.Errorf("%d reload warnings for one broken edit, want 1", n)
	}

	changed, err := src.Reload()
	if changed || err == nil {
		t.Errorf("Reload on unchanged broken files = %v, %v; want false and the standing error", changed, err)
	}

	writeFile(t, dir, "agents/scribe.md", "---\ndisposition: replacement\ntimeout: 30\n---\nFixed.\n")
	fixed := reloaded(t, src)
	if src.Err() != nil {
		t.Errorf("Err() = %v after the fix", src.Err())
	}
	if fixed == good || *fixed.Profiles["scribe"].Timeout != 30 {
		t.Error("the fixed file was not loaded")
	}
}

func TestSourceRevertToLastGoodKeepsPointer(t *testing.T) {
	dir := copyRoot(t, "full")
	src, _ := newSource(t, dir, 0)
	good := reloaded(t, src)
	orig, err := os.ReadFile(filepath.Join(dir, "rolecall.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "rolecall.yaml", "defaults: [broken\n")
	reloaded(t, src)
	if src.Err() == nil {
		t.Fatal("broken rolecall.yaml not reported")
	}
	writeFile(t, dir, "rolecall.yaml", string(orig))
	if got := reloaded(t, src); got != good || src.Err() != nil {
		t.Errorf("reverting to the good content: pointer kept %v, Err %v", got == good, src.Err())
	}
}

func TestSourceIntervalAndReload(t *testing.T) {
	dir := copyRoot(t, "full")
	src, _ := newSource(t, dir, time.Hour)
	first := src.Snapshot()
	writeFile(t, dir, "packs/team.yaml", "roles:\n  architect:\n    model: later\n")
	if src.Snapshot() != first {
		t.Error("Snapshot swept before the reload interval elapsed")
	}
	changed, err := src.Reload()
	if !changed || err != nil {
		t.Fatalf("Reload = %v, %v; want true, nil", changed, err)
	}
	if src.Snapshot() == first {
		t.Error("Reload did not install the new snapshot")
	}
	if changed, _ := src.Reload(); changed {
		t.Error("a second Reload with no change reported a change")
	}
	if changed, err := src.ForceReload(); changed || err != nil {
		t.Errorf("ForceReload of identical files = %v, %v; want false, nil", changed, err)
	}
}

// A Kubernetes ConfigMap volume updates by swapping the ..data symlink;
// the files themselves are symlinks through it and never change.
func TestSourceSeesConfigMapSwap(t *testing.T) {
	dir := copyRoot(t, "")
	packs := filepath.Join(dir, "packs")
	writeFile(t, packs, "..v1/team.yaml", "roles:\n  architect:\n    model: v1\n")
	symlink(t, "..v1", packs, "..data")
	symlink(t, "..data/team.yaml", packs, "team.yaml")
	src, _ := newSource(t, dir, 0)
	if got := *reloaded(t, src).Packs["team"].Pack.Roles["architect"].Model; got != "v1" {
		t.Fatalf("model = %q", got)
	}

	writeFile(t, packs, "..v2/team.yaml", "roles:\n  architect:\n    model: v2\n")
	symlink(t, "..v2", packs, "..data_tmp")
	if err := os.Rename(filepath.Join(packs, "..data_tmp"), filepath.Join(packs, "..data")); err != nil {
		t.Fatal(err)
	}
	if got := *reloaded(t, src).Packs["team"].Pack.Roles["architect"].Model; got != "v2" {
		t.Errorf("after the ..data swap, model = %q, want v2", got)
	}
}

func TestSourceLogsLegacyProfilesOnce(t *testing.T) {
	dir := copyRoot(t, "full")
	src, rec := newSource(t, dir, 0)
	if n := rec.count(slog.LevelInfo, msgLegacy); n != 1 {
		t.Fatalf("%d legacy Info records at start, want 1 (old-bot)", n)
	}
	// Many tasks and an unrelated reload do not log it again.
	for range 5 {
		s := reloaded(t, src)
		if _, err := s.Inputs(discover.Request{Ref: resolve.ExternalRef{Name: "old-bot"}}); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, dir, "packs/team.yaml", "roles:\n  architect: {}\n")
	reloaded(t, src)
	if n := rec.count(slog.LevelInfo, msgLegacy); n != 1 {
		t.Errorf("%d legacy Info records after a reload, want still 1", n)
	}
	writeFile(t, dir, "agents/older.md", "---\nmodel: m\n---\nAlso legacy.\n")
	reloaded(t, src)
	if n := rec.count(slog.LevelInfo, msgLegacy); n != 2 {
		t.Errorf("%d legacy Info records after adding a legacy profile, want 2", n)
	}
}

func TestNewSourceNeedsAGoodFirstLoad(t *testing.T) {
	_, err := discover.NewSource(copyRoot(t, "profile-unknown-key"), discover.Options{}, nil)
	if de := asError(t, err); de.Code != resolve.CodeProfileInvalid {
		t.Errorf("NewSource on a broken root: %v", err)
	}
}

// Concurrent readers during edits: run with -race. Every reader sees a
// complete snapshot, never a torn one.
func TestSourceConcurrentUse(t *testing.T) {
	dir := copyRoot(t, "full")
	src, _ := newSource(t, dir, 0)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := reloaded(t, src)
				if _, ok := s.Packs["team"]; !ok {
					t.Error("a snapshot without the team pack was served")
					return
				}
				_ = src.Err()
			}
		})
	}
	for i := range 20 {
		model := "m" + string(rune('a'+i))
		writeFile(t, dir, "packs/team.yaml", "roles:\n  architect:\n    model: "+model+"\n")
		if _, err := src.Reload(); err != nil {
			t.Errorf("Reload: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	if got := *reloaded(t, src).Packs["team"].Pack.Roles["architect"].Model; got != "mt" {
		t.Errorf("final model = %q, want mt", got)
	}
}

// A Source sees the files composition reads: a mixin and a ${file:…}
// target (even one that did not exist) are inputs like the pack itself.
func TestSourceReloadsMixinsAndPlaceholderFiles(t *testing.T) {
	dir := writeRoot(t, files{
		"packs/base.yaml":       "roles:\n  architect:\n    model: base-one\n",
		"packs/team.yaml":       "extends: [base]\nroles:\n  architect:\n    authority: [\"${file:prompts/authority.txt}\"]\n",
		"packs/solo.yaml":       "roles:\n  architect:\n    model: m\n    boundaries: [\"${file:prompts/later.txt}\"]\n",
		"prompts/authority.txt": "Own the design\n",
		"rolecall.yaml":         "defaults:\n  effort: ${file:prompts/effort.txt}\n",
		"prompts/effort.txt":    "low\n",
	})
	// Every file is old, and every edit is dated in the past too, so only
	// a sweep that stats the edited file can see it (no racy-window
	// reload hides a file the sweep forgot).
	ageFiles(t, dir, -time.Hour)
	edits := 0
	edit := func(rel, content string) {
		t.Helper()
		writeFile(t, dir, rel, content)
		edits++
		when := time.Now().Add(-30*time.Minute + time.Duration(edits)*time.Second)
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(rel)), when, when); err != nil {
			t.Fatal(err)
		}
	}
	src, rec := newSource(t, dir, 0)
	model := func() string {
		t.Helper()
		pf, ok := reloaded(t, src).Packs["team"]
		if !ok {
			t.Fatalf("team is broken: %v", reloaded(t, src).PackErrors["team"])
		}
		return *pf.Pack.Roles["architect"].Model + " / " + pf.Pack.Roles["architect"].Authority[0]
	}
	if got := model(); got != "base-one / Own the design" {
		t.Fatalf("first snapshot: %s", got)
	}
	if e := reloaded(t, src).PackErrors["solo"]; e == nil || e.Code != resolve.CodePlaceholderUnresolved {
		t.Fatalf("solo reads a missing file: %v", e)
	}
	if n := rec.count(slog.LevelWarn, msgBrokenPack); n != 1 {
		t.Errorf("%d broken-pack warnings at start, want 1", n)
	}

	edit("packs/base.yaml", "roles:\n  architect:\n    model: base-two-edited\n")
	if got := model(); got != "base-two-edited / Own the design" {
		t.Errorf("after editing the mixin: %s", got)
	}
	edit("prompts/authority.txt", "Own the design and the budget\n")
	if got := model(); got != "base-two-edited / Own the design and the budget" {
		t.Errorf("after editing the ${file:…} target: %s", got)
	}
	edit("prompts/later.txt", "Stay in scope\n")
	edit("prompts/effort.txt", "medium\n")
	if got := *reloaded(t, src).Defaults.Effort; got != "medium" {
		t.Errorf("after editing rolecall.yaml's ${file:…} target: effort %q", got)
	}
	if pf, ok := reloaded(t, src).Packs["solo"]; !ok || pf.Pack.Roles["architect"].Boundaries[0] != "Stay in scope" {
		t.Errorf("creating the missing target did not mend solo: %v", reloaded(t, src).PackErrors["solo"])
	}

	// Breaking a mixin breaks what extends it, and only that: a new
	// snapshot is served, with one warning per newly broken pack.
	edit("packs/base.yaml", "roles:\n  architect:\n    model: [not, a, string]\n")
	s := reloaded(t, src)
	if src.Err() != nil {
		t.Errorf("Err() = %v: a broken pack is not a failed reload", src.Err())
	}
	if s.PackErrors["team"] == nil || s.PackErrors["base"] == nil || s.Packs["solo"] == nil {
		t.Errorf("after breaking base: errors %v, solo served %v", s.PackErrors, s.Packs["solo"] != nil)
	}
	if n := rec.count(slog.LevelWarn, msgBrokenPack); n != 3 {
		t.Errorf("%d broken-pack warnings, want 3 (solo at start, then base and team)", n)
	}
}

// waitFor polls until ok holds, failing after 5 s with what.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With the safety sweep an hour away, file events alone must show what
// is written into directories that did not exist when the watcher
// started: a packs/ created after start, and a profile directory, each
// filled right after it was made (before its watch can exist).
func TestEventsSeeNewDirectories(t *testing.T) {
	dir := copyRoot(t, "")
	src, _ := newSource(t, dir, time.Hour)
	src.Start(t.Context())
	defer src.Stop()
	time.Sleep(100 * time.Millisecond) // the watcher's first sweep
	writeFile(t, dir, "packs/late.yaml", "roles:\n  architect:\n    model: late\n")
	waitFor(t, "packs/late.yaml, created with packs/", func() bool { return src.Snapshot().Packs["late"] != nil })
	writeFile(t, dir, "packs/later.yaml", "roles:\n  architect:\n    model: later\n")
	waitFor(t, "packs/later.yaml, in the now watched packs/", func() bool { return src.Snapshot().Packs["later"] != nil })
	writeFile(t, dir, "agents/nested/nested.md", "---\ndisposition: replacement\n---\nNested.\n")
	waitFor(t, "agents/nested/nested.md", func() bool { return src.Snapshot().Profiles["nested"] != nil })
	writeFile(t, dir, "agents/nested/nested.md", "---\ndisposition: replacement\n---\nEdited.\n")
	waitFor(t, "the edit of agents/nested/nested.md", func() bool {
		p := src.Snapshot().Profiles["nested"]
		return p != nil && p.Body == "Edited.\n"
	})
	os.RemoveAll(filepath.Join(dir, "packs"))
	waitFor(t, "packs/ removed", func() bool { return len(src.Snapshot().Packs) > 0 && src.Snapshot().Packs["late"] == nil })
}

// A ConfigMap swap changes no name the load reads: only the ..data
// rename shows as an event. Once a scan has met a symbolic link, an
// event triggers a full sweep, so events alone still see the swap.
func TestEventsSeeConfigMapSwap(t *testing.T) {
	dir := copyRoot(t, "")
	packs := filepath.Join(dir, "packs")
	writeFile(t, packs, "..v1/team.yaml", "roles:\n  architect:\n    model: v1\n")
	symlink(t, "..v1", packs, "..data")
	symlink(t, "..data/team.yaml", packs, "team.yaml")
	src, _ := newSource(t, dir, time.Hour)
	src.Start(t.Context())
	defer src.Stop()
	time.Sleep(100 * time.Millisecond)
	writeFile(t, packs, "..v2/team.yaml", "roles:\n  architect:\n    model: v2\n")
	symlink(t, "..v2", packs, "..data_tmp")
	if err := os.Rename(filepath.Join(packs, "..data_tmp"), filepath.Join(packs, "..data")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the ..data swap", func() bool {
		p := src.Snapshot().Packs["team"]
		return p != nil && *p.Pack.Roles["architect"].Model == "v2"
	})
}

// A directory replaced by another renamed into its place (a deploy that
// builds packs.new and swaps it in) is watched again: an edit inside it
// afterwards is seen through events alone, the safety sweep an hour away.
// Its watch used to stay on the directory that was removed.
func TestEventsSeeReplacedDirectory(t *testing.T) {
	dir := copyRoot(t, "")
	src, _ := newSource(t, dir, time.Hour)
	src.Start(t.Context())
	defer src.Stop()
	writeFile(t, dir, "packs/team.yaml", "roles:\n  architect:\n    model: v1\n")
	model := func() string {
		p := src.Snapshot().Packs["team"]
		if p == nil || p.Pack == nil || p.Pack.Roles["architect"].Model == nil {
			return ""
		}
		return *p.Pack.Roles["architect"].Model
	}
	waitFor(t, "packs/team.yaml", func() bool { return model() == "v1" })
	writeFile(t, dir, "packs.new/team.yaml", "roles:\n  architect:\n    model: v2\n")
	if err := os.RemoveAll(filepath.Join(dir, "packs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "packs.new"), filepath.Join(dir, "packs")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the replaced packs/", func() bool { return model() == "v2" })
	writeFile(t, dir, "packs/team.yaml", "roles:\n  architect:\n    model: v3\n")
	waitFor(t, "an edit in the replaced packs/", func() bool { return model() == "v3" })
}

// An edit of the nats: block is loaded but not applied (it is read at
// start only): the reload says so, once per change, without the block's
// values. Other edits do not.
func TestSourceWarnsNATSBlockNeedsRestart(t *testing.T) {
	const msg = "discover: the nats: block of rolecall.yaml changed; it is read at start only, so the worker keeps the settings it started with until it is restarted"
	dir := copyRoot(t, "")
	writeFile(t, dir, "rolecall.yaml", "nats:\n  user: a\n")
	writeFile(t, dir, "packs/team.yaml", "roles:\n  architect:\n    model: v1\n")
	src, rec := newSource(t, dir, time.Hour)
	reload := func() {
		t.Helper()
		if _, err := src.Reload(); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, dir, "packs/team.yaml", "roles:\n  architect:\n    model: v22\n")
	reload()
	if n := rec.count(slog.LevelWarn, msg); n != 0 {
		t.Fatalf("%d warnings after an edit of a pack, want 0", n)
	}
	writeFile(t, dir, "rolecall.yaml", "nats:\n  user: a\n  password: s3cret\n")
	reload()
	if n := rec.count(slog.LevelWarn, msg); n != 1 {
		t.Fatalf("%d warnings after an edit of the nats: block, want 1", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.records {
		r.Attrs(func(a slog.Attr) bool {
			if strings.Contains(a.Value.String(), "s3cret") {
				t.Errorf("%q logs the password: %s", r.Message, a)
			}
			return true
		})
	}
}
