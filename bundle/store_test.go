package bundle_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/bundle"
	"github.com/rolecall/rolecall/internal/natstest"
)

// exampleRoot copies examples/ so a test can edit it.
func exampleRoot(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "examples")
	dst := filepath.Join(t.TempDir(), "root")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func edit(t *testing.T, root, file, old, new string) {
	t.Helper()
	p := filepath.Join(root, file)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pack(t *testing.T, root string) *bundle.Archive {
	t.Helper()
	a, err := bundle.Pack(root)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func openStore(t *testing.T) (*bundle.Store, jetstream.JetStream) {
	t.Helper()
	nc := natstest.Connect(t, natstest.Start(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := bundle.Open(ctx, js, bundle.StoreOptions{}); !errors.Is(err, &bundle.Error{Code: bundle.CodeNotFound}) {
		t.Fatalf("Open without buckets: %v", err)
	}
	s, err := bundle.Open(ctx, js, bundle.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	return s, js
}

func rev(n uint64) *uint64 { return &n }

func TestPushLogRollback(t *testing.T) {
	ctx := context.Background()
	s, js := openStore(t)
	root := exampleRoot(t)

	r1, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "ana", Message: "first", ExpectRevision: rev(0)})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Record.Revision == 0 || r1.Record.Parent != "" || r1.Record.ConfigDigest == "" {
		t.Fatalf("first push: %+v", r1.Record)
	}
	again, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "ana"})
	if err != nil || !again.Unchanged || again.Record.Revision != r1.Record.Revision {
		t.Fatalf("same bundle again: %+v, %v", again, err)
	}

	edit(t, root, "rolecall.yaml", "model: claude-sonnet-4-5", "model: claude-opus-4-1")
	if _, err := s.Push(ctx, pack(t, root), bundle.PushOptions{ExpectRevision: rev(r1.Record.Revision + 100)}); !errors.Is(err, &bundle.Error{Code: bundle.CodeRevisionConflict}) {
		t.Fatalf("stale --expect-revision: %v", err)
	}
	r2, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "bo", Message: "opus", ExpectRevision: rev(r1.Record.Revision)})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Record.Parent != r1.Record.Digest || r2.Record.ParentRevision != r1.Record.Revision {
		t.Fatalf("parent: %+v", r2.Record)
	}

	// A bundle with problems is refused, and one with nats: too.
	edit(t, root, "packs/research.yaml", "default_modes: [probabilistic]", "default_modes: [nosuchmode]")
	if _, err := s.Push(ctx, pack(t, root), bundle.PushOptions{}); !errors.Is(err, &bundle.Error{Code: bundle.CodeInvalid}) {
		t.Fatalf("bundle with problems: %v", err)
	} else if len(err.(*bundle.Error).Problems) == 0 {
		t.Fatal("no problems listed")
	}
	edit(t, root, "packs/research.yaml", "default_modes: [nosuchmode]", "default_modes: [probabilistic]")
	edit(t, root, "rolecall.yaml", "default_pack: default", "default_pack: default\nnats:\n  url: nats://elsewhere:4222")
	if _, err := s.Push(ctx, pack(t, root), bundle.PushOptions{}); !errors.Is(err, &bundle.Error{Code: bundle.CodeInvalid}) || !strings.Contains(err.Error(), "nats") {
		t.Fatalf("bundle with nats: %v", err)
	}

	log, err := s.Log(ctx)
	if err != nil || len(log) != 2 || log[0].Revision != r2.Record.Revision || log[1].Actor != "ana" {
		t.Fatalf("log: %+v, %v", log, err)
	}

	rb, err := s.Rollback(ctx, 0, bundle.PushOptions{Actor: "cy", ExpectRevision: rev(r2.Record.Revision)})
	if err != nil {
		t.Fatal(err)
	}
	if rb.Digest != r1.Record.Digest || rb.RollbackOf != r1.Record.Revision || rb.Revision <= r2.Record.Revision {
		t.Fatalf("rollback: %+v", rb)
	}
	if _, err := s.Rollback(ctx, 0, bundle.PushOptions{ExpectRevision: rev(r2.Record.Revision)}); !errors.Is(err, &bundle.Error{Code: bundle.CodeRevisionConflict}) {
		t.Fatalf("stale rollback: %v", err)
	}
	snap, err := s.LoadRevision(ctx, rb.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if snap.ConfigSource != "nats" || snap.Revision != rb.Revision || snap.Digest != r1.Record.ConfigDigest {
		t.Fatalf("snapshot %s/%d %s", snap.ConfigSource, snap.Revision, snap.Digest)
	}

	// Roster values land in ROLECALL_ROSTER once; a second write is a no-op.
	rw, err := bundle.NewRosterWriter(ctx, js, 1, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := rw.Write(ctx, snap); err != nil || n == 0 {
		t.Fatalf("roster write: %d, %v", n, err)
	}
	if n, err := rw.Write(ctx, snap); err != nil || n != 0 {
		t.Fatalf("second roster write: %d, %v", n, err)
	}
	kv, _ := js.KeyValue(ctx, bundle.RosterBucket)
	e, err := kv.Get(ctx, "research")
	if err != nil {
		t.Fatal(err)
	}
	var v bundle.RosterValue
	if err := json.Unmarshal(e.Value(), &v); err != nil || v.Pack != "research" || len(v.Entries) == 0 {
		t.Fatalf("roster value %s: %v", e.Value(), err)
	}
}

// A watching source serves the bundle in current, refuses a bad one and
// keeps serving the last good snapshot, and takes the next good one.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, js := openStore(t)
	root := exampleRoot(t)
	r1, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	src := bundle.Follow(ctx, js, bundle.StoreOptions{}, bundle.WatchOptions{})
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := src.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	if got := src.Snapshot(); got.Revision != r1.Record.Revision || got.ConfigSource != "nats" {
		t.Fatalf("serving %s/%d", got.ConfigSource, got.Revision)
	}

	edit(t, root, "rolecall.yaml", "default_pack: default", "default_pack: default\nunknown_key: 1")
	bad, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Unchecked: true})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return src.Status().LastErrorRevision == bad.Record.Revision })
	st := src.Status()
	if !st.Degraded || src.Snapshot().Revision != r1.Record.Revision || !errors.Is(st.LastError, &bundle.Error{Code: bundle.CodeInvalid}) {
		t.Fatalf("after a bad bundle: %+v, serving %d", st, src.Snapshot().Revision)
	}

	edit(t, root, "rolecall.yaml", "\nunknown_key: 1", "")
	edit(t, root, "rolecall.yaml", "model: claude-sonnet-4-5", "model: claude-opus-4-1")
	r3, err := s.Push(ctx, pack(t, root), bundle.PushOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return src.Snapshot().Revision == r3.Record.Revision })
	if st := src.Status(); st.Degraded || st.LastError != nil {
		t.Fatalf("after a good bundle: %+v", st)
	}
}

// A worker that may not create the buckets and starts before the first
// push waits, not ready and saying why, and serves the first bundle once
// an operator has pushed it.
func TestFollowBeforeTheFirstPush(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc := natstest.Connect(t, natstest.Start(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	src := bundle.Follow(ctx, js, bundle.StoreOptions{}, bundle.WatchOptions{OpenEvery: 20 * time.Millisecond})
	waitFor(t, func() bool { return errors.Is(src.Status().LastError, &bundle.Error{Code: bundle.CodeNotFound}) })
	if src.Snapshot() != nil {
		t.Fatal("a snapshot serves before anything was pushed")
	}
	select {
	case <-src.Ready():
		t.Fatal("ready before anything was pushed")
	default:
	}
	if _, err := js.KeyValue(ctx, bundle.Bucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("a follower without Create made the bucket: %v", err)
	}

	op, err := bundle.Open(ctx, js, bundle.StoreOptions{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := op.Push(ctx, pack(t, exampleRoot(t)), bundle.PushOptions{Actor: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := src.Wait(wctx); err != nil {
		t.Fatal(err)
	}
	if st := src.Status(); st.Revision != r1.Record.Revision || st.LastError != nil || src.Snapshot().Revision != r1.Record.Revision {
		t.Fatalf("after the first push: %+v", st)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A hostile archive in the object store, whatever put it there, is
// refused by a watching worker with its typed code; the last good
// snapshot keeps serving.
func TestWatchRefusesHostileArchives(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, js := openStore(t)
	good, err := s.Push(ctx, pack(t, exampleRoot(t)), bundle.PushOptions{Actor: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	src := bundle.Follow(ctx, js, bundle.StoreOptions{}, bundle.WatchOptions{RetryFor: 100 * time.Millisecond})
	if err := src.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctx, bundle.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, bundle.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	evil := tarOf(t, &tar.Header{Name: "../../etc/cron.d/x", Size: 5})
	cases := []struct {
		name, object string
		data         []byte
		code         bundle.Code
	}{
		{"dotdot", bundle.Digest(evil), evil, bundle.CodeUnsafePath},
		{"digest", "sha256:" + strings.Repeat("ab", 32), tarOf(t, &tar.Header{Name: "rolecall.yaml", Size: 1}), bundle.CodeDigestMismatch},
		{"symlink", "", tarOf(t, &tar.Header{Name: "rolecall.yaml", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}), bundle.CodeLink},
		{"missing", "sha256:" + strings.Repeat("cd", 32), nil, bundle.CodeNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := c.object
			if name == "" {
				name = bundle.Digest(c.data)
			}
			if c.data != nil {
				if _, err := obj.PutBytes(ctx, name, c.data); err != nil {
					t.Fatal(err)
				}
			}
			cur, _ := kv.Get(ctx, bundle.KeyCurrent)
			rec, _ := json.Marshal(bundle.Record{Digest: name, Actor: "mallory"})
			n, err := kv.Update(ctx, bundle.KeyCurrent, rec, cur.Revision())
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return src.Status().LastErrorRevision == n })
			st := src.Status()
			if !errors.Is(st.LastError, &bundle.Error{Code: c.code}) || !st.Degraded || src.Snapshot().Revision != good.Record.Revision {
				t.Fatalf("status %+v, serving %d", st, src.Snapshot().Revision)
			}
		})
	}
}

// TestRecordDecodesStrictly: a record at current that is not exactly a
// record, read one way here and maybe another by another reader, is
// bundle_malformed: a member twice, a member in another case, an unknown
// member, data after it, a digest that is not sha256:<64 hex digits>.
func TestRecordDecodesStrictly(t *testing.T) {
	ctx := context.Background()
	s, js := openStore(t)
	kv, err := js.KeyValue(ctx, bundle.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	const digest = `"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"`
	const rest = `"config_digest":"","actor":"ana","time":"2026-12-03T09:00:00Z","files":1,"size":1`
	if _, err := kv.Put(ctx, bundle.KeyCurrent, []byte(`{"digest":`+digest+`,`+rest+`}`)); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Current(ctx); err != nil || rec.Actor != "ana" {
		t.Fatalf("a well-formed record: %+v, %v", rec, err)
	}
	for _, tc := range []struct{ name, value string }{
		{"member twice", `{"digest":` + digest + `,"digest":"sha256:ff",` + rest + `}`},
		{"member in another case", `{"Digest":` + digest + `,` + rest + `}`},
		{"member in another case beside it", `{"digest":` + digest + `,"DIGEST":"sha256:ff",` + rest + `}`},
		{"unknown member", `{"digest":` + digest + `,"colour":"red",` + rest + `}`},
		{"data after it", `{"digest":` + digest + `,` + rest + `} {}`},
		// A digest no archive can have: it was looked up, and retried
		// for seconds as a missing archive (bundle_not_found).
		{"digest not hex", `{"digest":"sha256:zz",` + rest + `}`},
		{"digest too short", `{"digest":"sha256:0123456789abcdef",` + rest + `}`},
		{"digest in upper case", `{"digest":` + strings.ToUpper(digest) + `,` + rest + `}`},
		{"digest of another hash", `{"digest":"md5:0123456789abcdef0123456789abcdef",` + rest + `}`},
	} {
		if _, err := kv.Put(ctx, bundle.KeyCurrent, []byte(tc.value)); err != nil {
			t.Fatal(err)
		}
		if rec, err := s.Current(ctx); !errors.Is(err, &bundle.Error{Code: bundle.CodeMalformed}) {
			t.Errorf("%s: %+v, %v; want bundle_malformed", tc.name, rec, err)
		}
	}
}

// TestRepairMalformedCurrent: when current holds a value that is no
// record (every worker refuses it as bundle_malformed), a push or a
// rollback to a revision replaces it by compare-and-swap, and the
// following worker serves the bundle again; a stale expected revision is
// still a conflict.
func TestRepairMalformedCurrent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		value    string
		rollback bool
	}{
		{"garbage, push", `garbage`, false},
		{"unknown member, push", `{"digest":"sha256:00","colour":"red"}`, false},
		{"garbage, rollback", `garbage`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, js := openStore(t)
			root := exampleRoot(t)
			r1, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "ana"})
			if err != nil {
				t.Fatal(err)
			}
			src := bundle.Follow(ctx, js, bundle.StoreOptions{}, bundle.WatchOptions{})
			if err := src.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			kv, err := js.KeyValue(ctx, bundle.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			bad, err := kv.Put(ctx, bundle.KeyCurrent, []byte(tc.value))
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return src.Status().LastErrorRevision == bad })
			if _, err := s.Push(ctx, pack(t, root), bundle.PushOptions{ExpectRevision: rev(r1.Record.Revision)}); !errors.Is(err, &bundle.Error{Code: bundle.CodeRevisionConflict}) {
				t.Fatalf("push expecting the revision before the bad value: %v", err)
			}
			var want uint64
			if tc.rollback {
				rec, err := s.Rollback(ctx, r1.Record.Revision, bundle.PushOptions{Actor: "bo", ExpectRevision: rev(bad)})
				if err != nil {
					t.Fatalf("rollback over a malformed current: %v", err)
				}
				want = rec.Revision
			} else {
				edit(t, root, "rolecall.yaml", "model: claude-sonnet-4-5", "model: claude-opus-4-1")
				res, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "bo", ExpectRevision: rev(bad)})
				if err != nil {
					t.Fatalf("push over a malformed current: %v", err)
				}
				if res.Record.Parent != "" || res.Record.ParentRevision != bad {
					t.Errorf("parent of the repair: %q at %d, want none at %d", res.Record.Parent, res.Record.ParentRevision, bad)
				}
				want = res.Record.Revision
			}
			waitFor(t, func() bool { return src.Status().Revision == want })
			if st := src.Status(); st.Degraded || st.LastError != nil {
				t.Fatalf("after the repair: %+v", st)
			}
		})
	}
}

// TestWatchCurrentDeleted: deleting or purging current leaves the last
// good snapshot in service and says so (degraded, bundle_not_found), as a
// refused bundle does; it said nothing, and the worker went on citing a
// revision no longer current. The next push, or a rollback to a named
// revision, clears it.
func TestWatchCurrentDeleted(t *testing.T) {
	for _, tc := range []struct {
		name            string
		purge, rollback bool
	}{{"delete, push", false, false}, {"purge, push", true, false}, {"delete, rollback", false, true}, {"purge, rollback", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, js := openStore(t)
			root := exampleRoot(t)
			r1, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "ana"})
			if err != nil {
				t.Fatal(err)
			}
			src := bundle.Follow(ctx, js, bundle.StoreOptions{}, bundle.WatchOptions{})
			if err := src.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			kv, err := js.KeyValue(ctx, bundle.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			if tc.purge {
				err = kv.Purge(ctx, bundle.KeyCurrent)
			} else {
				err = kv.Delete(ctx, bundle.KeyCurrent)
			}
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return src.Status().LastErrorRevision > r1.Record.Revision })
			st := src.Status()
			if !st.Degraded || !errors.Is(st.LastError, &bundle.Error{Code: bundle.CodeNotFound}) || src.Snapshot().Revision != r1.Record.Revision {
				t.Fatalf("after %s: %+v, serving %d", tc.name, st, src.Snapshot().Revision)
			}
			var r2 uint64
			if tc.rollback {
				// Rolling back to a named revision restores current (it
				// said bundle_not_found: no bundle at current yet).
				if _, err := s.Rollback(ctx, 0, bundle.PushOptions{}); !errors.Is(err, &bundle.Error{Code: bundle.CodeNotFound}) {
					t.Fatalf("rollback to the parent of no bundle: %v", err)
				}
				rec, err := s.Rollback(ctx, r1.Record.Revision, bundle.PushOptions{Actor: "bo", ExpectRevision: rev(0)})
				if err != nil {
					t.Fatalf("%s: rollback to revision %d: %v", tc.name, r1.Record.Revision, err)
				}
				if rec.Digest != r1.Record.Digest || rec.RollbackOf != r1.Record.Revision || rec.Parent != "" {
					t.Fatalf("rollback record: %+v", rec)
				}
				r2 = rec.Revision
			} else {
				edit(t, root, "rolecall.yaml", "model: claude-sonnet-4-5", "model: claude-opus-4-1")
				res, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "ana"})
				if err != nil {
					t.Fatal(err)
				}
				r2 = res.Record.Revision
			}
			waitFor(t, func() bool { return src.Status().Revision == r2 })
			if st := src.Status(); st.Degraded || st.LastError != nil {
				t.Fatalf("after the next move: %+v", st)
			}
		})
	}
}

// TestArchiveReadIsBounded: an archive whose chunks hold more than its
// recorded size (chunks published after it under its NUID) is read no
// further than MaxArchiveSize and refused as bundle_too_large; it was read
// whole into memory, however large, before any limit was checked.
func TestArchiveReadIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes more than MaxArchiveSize to the object store")
	}
	ctx := context.Background()
	s, js := openStore(t)
	r1, err := s.Push(ctx, pack(t, exampleRoot(t)), bundle.PushOptions{Actor: "ana"})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := js.ObjectStore(ctx, bundle.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := obj.GetInfo(ctx, r1.Record.Digest)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 512<<10)
	for range bundle.MaxArchiveSize/len(chunk) + 1 {
		if _, err := js.PublishAsync("$O."+bundle.Bucket+".C."+info.NUID, chunk); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		t.Fatal("chunks not acknowledged within a minute")
	}
	if a, err := s.Archive(ctx, r1.Record); !errors.Is(err, &bundle.Error{Code: bundle.CodeTooLarge}) {
		t.Fatalf("archive with chunks beyond its size: %v, %v; want bundle_too_large", a != nil, err)
	}
}

// TestPushEmptyRoot: a config root with no file (or only dot-entries,
// which are not packed) is bundle_invalid; push stored a bundle of 0
// files, which every worker would have served as an empty configuration.
func TestPushEmptyRoot(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := pack(t, root)
	if _, err := bundle.Check(a); !errors.Is(err, &bundle.Error{Code: bundle.CodeInvalid}) {
		t.Fatalf("check of an empty root: %v", err)
	}
	if res, err := s.Push(ctx, a, bundle.PushOptions{Actor: "ana"}); !errors.Is(err, &bundle.Error{Code: bundle.CodeInvalid}) {
		t.Fatalf("push of an empty root: %+v, %v", res, err)
	}
	if log, err := s.Log(ctx); err != nil || len(log) != 0 {
		t.Fatalf("log after the refused push: %+v, %v", log, err)
	}
}

// TestLogMalformedRecord: a history record that cannot be read (it does
// not decode, it is another revision's, its key names no revision), or a
// value at current that is no record, is listed at its revision with a
// bundle_malformed error; the other revisions are listed as usual. One
// such record made the whole log fail.
func TestLogMalformedRecord(t *testing.T) {
	ctx := context.Background()
	s, js := openStore(t)
	root := exampleRoot(t)
	var revs []uint64
	models := []string{"claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"}
	for i, model := range models {
		if i > 0 {
			edit(t, root, "rolecall.yaml", "model: "+models[i-1], "model: "+model)
		}
		res, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "ana", Message: model})
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, res.Record.Revision)
	}
	kv, err := js.KeyValue(ctx, bundle.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	key := func(n uint64) string { return bundle.HistoryPrefix + strconv.FormatUint(n, 10) }
	if _, err := kv.PutString(ctx, key(revs[1]), "garbage"); err != nil {
		t.Fatal(err)
	}
	// The record of revs[0] copied under the key of revs[2].
	first, err := kv.Get(ctx, key(revs[0]))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key(revs[2]), first.Value()); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, bundle.HistoryPrefix+"x", "{}"); err != nil {
		t.Fatal(err)
	}
	bad, err := kv.PutString(ctx, bundle.KeyCurrent, `{"colour":"red"}`)
	if err != nil {
		t.Fatal(err)
	}

	log, err := s.Log(ctx)
	if err != nil {
		t.Fatalf("log: %v", err)
	}
	want := []struct {
		rev uint64
		bad bool
	}{{bad, true}, {revs[2], true}, {revs[1], true}, {revs[0], false}, {0, true}}
	if len(log) != len(want) {
		t.Fatalf("log: %d entries, want %d: %+v", len(log), len(want), log)
	}
	for i, w := range want {
		e := log[i]
		if e.Revision != w.rev || (e.Error != nil) != w.bad {
			t.Errorf("entry %d: revision %d, error %v; want revision %d, error %v", i, e.Revision, e.Error, w.rev, w.bad)
			continue
		}
		if !w.bad {
			if e.Message != models[0] || e.Digest == "" {
				t.Errorf("entry %d: %+v", i, e)
			}
			continue
		}
		if !errors.Is(e.Error, &bundle.Error{Code: bundle.CodeMalformed}) || e.Error.Revision != w.rev || e.Digest != "" {
			t.Errorf("entry %d: %+v, error %+v", i, e, e.Error)
		}
		var got map[string]any
		if data, err := json.Marshal(e); err != nil || json.Unmarshal(data, &got) != nil || len(got) != 2 || got["error"].(map[string]any)["code"] != "bundle_malformed" {
			t.Errorf("entry %d as JSON: %v, %v", i, got, err)
		}
	}
	// Rollback to a revision whose record cannot be read says so.
	if _, err := s.Rollback(ctx, revs[1], bundle.PushOptions{}); !errors.Is(err, &bundle.Error{Code: bundle.CodeMalformed}) || err.(*bundle.Error).Revision != revs[1] {
		t.Fatalf("rollback to a malformed record: %v", err)
	}
}

// TestWatchBucketRecreated: when the whole ROLECALL_CONFIG bucket (KV
// and object store) is deleted and created again, a following worker says
// so (degraded, bundle_not_found, the last good snapshot serving), watches
// the new bucket and serves the next push. Its watch stayed on the deleted
// bucket and missed every push after.
func TestWatchBucketRecreated(t *testing.T) {
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("create=%v", create), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, js := openStore(t)
			root := exampleRoot(t)
			r1, err := s.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "ana"})
			if err != nil {
				t.Fatal(err)
			}
			src := bundle.Follow(ctx, js, bundle.StoreOptions{Create: create}, bundle.WatchOptions{OpenEvery: 20 * time.Millisecond})
			if err := src.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if err := js.DeleteKeyValue(ctx, bundle.Bucket); err != nil {
				t.Fatal(err)
			}
			if err := js.DeleteObjectStore(ctx, bundle.Bucket); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return errors.Is(src.Status().LastError, &bundle.Error{Code: bundle.CodeNotFound}) })
			if st := src.Status(); !st.Degraded || st.Digest != r1.Record.Digest || src.Snapshot().Revision != r1.Record.Revision {
				t.Fatalf("after the bucket was deleted: %+v, serving %d", st, src.Snapshot().Revision)
			}

			op, err := bundle.Open(ctx, js, bundle.StoreOptions{Create: true})
			if err != nil {
				t.Fatal(err)
			}
			edit(t, root, "rolecall.yaml", "model: claude-sonnet-4-5", "model: claude-opus-4-1")
			r2, err := op.Push(ctx, pack(t, root), bundle.PushOptions{Actor: "bo"})
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return src.Status().Digest == r2.Record.Digest })
			if st := src.Status(); st.Degraded || st.LastError != nil || st.Revision != r2.Record.Revision || src.Snapshot().Revision != r2.Record.Revision {
				t.Fatalf("after the next push: %+v, serving %d", st, src.Snapshot().Revision)
			}
		})
	}
}
