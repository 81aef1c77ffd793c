package bundle

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
)

// Where bundles live in NATS.
const (
	// Bucket is both the object store that holds the archives (by
	// digest) and the KV bucket whose key KeyCurrent names the bundle in
	// service.
	Bucket = "ROLECALL_CONFIG"
	// KeyCurrent is the key workers watch.
	KeyCurrent = "current"
	// HistoryPrefix starts the key of each revision's record
	// (history.<revision>): KV keeps at most 64 values per key, the
	// history must keep them all.
	HistoryPrefix = "history."
	// RosterBucket is the KV bucket of the rosters, key = pack.
	RosterBucket = "ROLECALL_ROSTER"
)

// Record is what current holds and what each history key keeps: which
// bundle, who moved current to it and why.
type Record struct {
	// Revision is the KV revision of current that carries this record:
	// the number workers cite and --expect-revision compares. It is 0 in
	// the value written to current (the revision is known only after the
	// write) and filled when read.
	Revision uint64 `json:"revision,omitzero"`
	// Digest names the archive in the object store.
	Digest string `json:"digest"`
	// ConfigDigest is the loaded configuration's digest
	// (discover.Snapshot.Digest), which outcomes and explain cite.
	ConfigDigest string `json:"config_digest"`
	// Parent is the bundle current held before, "" for the first.
	Parent         string `json:"parent,omitzero"`
	ParentRevision uint64 `json:"parent_revision,omitzero"`
	// Actor is who says they pushed (--actor); User is the NATS user of
	// the connection, where known.
	Actor   string `json:"actor"`
	User    string `json:"user,omitzero"`
	Message string `json:"message,omitzero"`
	// RollbackOf is the revision whose bundle a rollback restored.
	RollbackOf uint64    `json:"rollback_of,omitzero"`
	Time       time.Time `json:"time"`
	Files      int       `json:"files"`
	Size       int       `json:"size"`
	// Error is set on an entry of Log whose record cannot be read
	// (CodeMalformed): the entry has only Revision (from its key) and
	// Error, and the other entries are listed as usual. It is never
	// stored: a value that holds it is no record.
	Error *Error `json:"-"`
}

// MarshalJSON writes a Log entry with an Error as its revision and error
// alone ({"revision", "error": {"code", "message"}}).
func (r Record) MarshalJSON() ([]byte, error) {
	type plain Record
	if r.Error == nil {
		return json.Marshal(plain(r))
	}
	type entryError struct {
		Code    Code   `json:"code"`
		Message string `json:"message"`
	}
	return json.Marshal(struct {
		Revision uint64     `json:"revision"`
		Error    entryError `json:"error"`
	}{r.Revision, entryError{r.Error.Code, r.Error.Error()}})
}

// decodeRecord decodes strictly: unknown members, a member twice, a
// member in another case and trailing data are errors, so a record no one
// wrote is not half-read, nor read one way here and another elsewhere.
func decodeRecord(data []byte) (Record, *Error) {
	var r Record
	if err := jsonv2.Unmarshal(data, &r, jsonv2.RejectUnknownMembers(true)); err != nil {
		return r, errf(CodeMalformed, "", "the record does not decode: %v", err)
	}
	if h, ok := strings.CutPrefix(r.Digest, DigestPrefix); !ok || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		return r, errf(CodeMalformed, "", "the record's digest %q is not sha256:<64 lowercase hex digits>", r.Digest)
	}
	return r, nil
}

// Store is the bundles of one NATS account.
type Store struct {
	kv  jetstream.KeyValue
	obj jetstream.ObjectStore
}

// StoreOptions tune Open.
type StoreOptions struct {
	// Create makes the buckets when they are missing (push does; a worker
	// and the read-only commands do not need the right to).
	Create bool
	// Replicas of buckets created (0 = 1).
	Replicas int
}

// Open binds the buckets; with Create it makes missing ones.
func Open(ctx context.Context, js jetstream.JetStream, o StoreOptions) (*Store, error) {
	s := &Store{}
	var err error
	s.kv, err = bind(ctx, o.Create, Bucket, js.KeyValue, js.CreateKeyValue, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "rolecall config bundles: current and history", History: 1,
		Replicas: max(o.Replicas, 1), Storage: jetstream.FileStorage,
	})
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, errf(CodeNotFound, "", "no KV bucket %s: nothing was pushed yet (worker config push)", Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("KV %s: %w", Bucket, err)
	}
	s.obj, err = bind(ctx, o.Create, Bucket, js.ObjectStore, js.CreateObjectStore, jetstream.ObjectStoreConfig{
		Bucket: Bucket, Description: "rolecall config bundles: archives by digest",
		Replicas: max(o.Replicas, 1), Storage: jetstream.FileStorage,
	})
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, errf(CodeNotFound, "", "no object store %s: nothing was pushed yet (worker config push)", Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("object store %s: %w", Bucket, err)
	}
	return s, nil
}

// bind gets the bucket name; with create it makes a missing one from cfg,
// and gets the one another process made first.
func bind[B, C any](ctx context.Context, create bool, name string,
	get func(context.Context, string) (B, error), makeBucket func(context.Context, C) (B, error), cfg C,
) (B, error) {
	b, err := get(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		b, err = makeBucket(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
			b, err = get(ctx, name)
		}
	}
	return b, err
}

// created is when the KV bucket was made: one deleted and made again
// under its name is another.
func (s *Store) created(ctx context.Context) (time.Time, error) {
	st, err := s.kv.Status(ctx)
	if err != nil {
		return time.Time{}, err
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return time.Time{}, fmt.Errorf("KV %s: status of type %T", Bucket, st)
	}
	return bs.StreamInfo().Created, nil
}

// KV is the bucket of current and the history (for watching).
func (s *Store) KV() jetstream.KeyValue { return s.kv }

// Current is the record at current; CodeNotFound when there is none.
func (s *Store) Current(ctx context.Context) (Record, error) {
	return s.record(ctx, KeyCurrent, "no bundle at "+KeyCurrent+" yet")
}

// record reads the record at key; missing is the CodeNotFound message
// when there is none.
func (s *Store) record(ctx context.Context, key, missing string) (Record, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, errf(CodeNotFound, "", "%s", missing)
	}
	if err != nil {
		return Record{}, err
	}
	return entryRecord(e)
}

func entryRecord(e jetstream.KeyValueEntry) (Record, error) {
	r, err := decodeRecord(e.Value())
	if err != nil {
		err.Revision = e.Revision()
		return r, err
	}
	if e.Key() == KeyCurrent {
		r.Revision = e.Revision()
	}
	return r, nil
}

// moveFrom is the record a push or rollback moves current from. When
// current holds a value that is no record (bundle_malformed, which every
// worker refuses), it is the record of that value's revision alone, with
// no parent: the move replaces it by compare-and-swap, so the fleet can be
// repaired with push or rollback.
func (s *Store) moveFrom(ctx context.Context) (Record, error) {
	cur, err := s.Current(ctx)
	var be *Error
	if errors.As(err, &be) && be.Code == CodeMalformed {
		return Record{Revision: be.Revision}, nil
	}
	return cur, err
}

// PushOptions describe a push.
type PushOptions struct {
	Actor   string
	User    string
	Message string
	// ExpectRevision, when not nil, is the revision current must be at (0:
	// no bundle yet); another is CodeRevisionConflict. Without it the
	// revision read just before is expected, so two pushes never overwrite
	// each other unseen.
	ExpectRevision *uint64
	// Unchecked skips validation. Only tests set it, to push a bad
	// bundle and watch workers refuse it.
	Unchecked bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// PushResult is what Push did.
type PushResult struct {
	Record Record
	// Unchanged: current already held this bundle, and nothing moved.
	Unchanged bool
}

// Check refuses a bundle a worker would refuse or serve with problems:
// what Validate reports, loaded from memory with no environment, and a
// rolecall.yaml with nats: or placeholders: (they belong to each worker's
// local configuration). It returns the loaded snapshot.
func Check(a *Archive) (*discover.Snapshot, error) {
	snap, err := loadArchive(a, 0)
	if err != nil {
		return nil, err
	}
	if probs := discover.ValidateFS(a.FS, bundleOptions()); len(probs) > 0 {
		return nil, &Error{Code: CodeInvalid, Message: fmt.Sprintf("the configuration has %d problem(s); worker validate lists them", len(probs)), Problems: probs}
	}
	return snap, nil
}

// bundleOptions load a bundle without the worker's environment: a bundle
// is the same configuration on every worker.
func bundleOptions() discover.Options {
	return discover.Options{LookupEnv: func(string) (string, bool) { return "", false }}
}

// loadArchive loads a bundle through discover's loader and refuses an
// empty bundle and the keys only local configuration may hold.
func loadArchive(a *Archive, rev uint64) (*discover.Snapshot, error) {
	if len(a.FS.files) == 0 {
		// The loader would serve the defaults: a fleet with no packs.
		return nil, &Error{Code: CodeInvalid, Revision: rev, Message: "the bundle holds no file: an empty config root (dot-entries are not packed) is no configuration"}
	}
	snap, err := discover.LoadFS(a.FS, discover.Location{Root: "nats:" + Bucket, Source: discover.ConfigFromNATS, Revision: rev}, bundleOptions())
	if err != nil {
		var de *discover.Error
		if errors.As(err, &de) {
			// Error() adds the problem itself, once.
			return nil, &Error{Code: CodeInvalid, Path: de.File, Message: "the configuration does not load", Problems: []*discover.Error{de}, Revision: rev}
		}
		return nil, &Error{Code: CodeInvalid, Message: err.Error(), Revision: rev}
	}
	// The first such key in the file is named, whatever the map's order.
	first, line := "", 0
	for key, l := range snap.Config.KeyLines {
		top, _, _ := strings.Cut(key, ".")
		if (top == "nats" || top == "placeholders") && (first == "" || l < line || l == line && top < first) {
			first, line = top, l
		}
	}
	if first != "" {
		return nil, &Error{Code: CodeInvalid, Path: fmt.Sprintf("%s:%d", discover.ConfigFile, line), Revision: rev,
			Message: fmt.Sprintf("%s: belongs to each worker's local rolecall.yaml, not to a bundle", first)}
	}
	return snap, nil
}

// Push checks a (unless Unchecked), stores it and moves current to it by
// compare-and-swap.
func (s *Store) Push(ctx context.Context, a *Archive, o PushOptions) (PushResult, error) {
	var snap *discover.Snapshot
	if !o.Unchecked {
		var err error
		if snap, err = Check(a); err != nil {
			return PushResult{}, err
		}
	}
	// With no bundle at current yet, cur is the zero Record: revision 0,
	// no parent.
	cur, err := s.moveFrom(ctx)
	have := err == nil
	if err != nil && !errors.Is(err, &Error{Code: CodeNotFound}) {
		return PushResult{}, err
	}
	if err := expect(o.ExpectRevision, cur.Revision); err != nil {
		return PushResult{}, err
	}
	if have && cur.Digest == a.Digest {
		return PushResult{Record: cur, Unchanged: true}, nil
	}
	rec := Record{
		Digest: a.Digest, Parent: cur.Digest, ParentRevision: cur.Revision,
		Actor: o.Actor, User: o.User, Message: o.Message, Files: len(a.FS.files), Size: len(a.Data),
	}
	if snap != nil {
		rec.ConfigDigest = snap.Digest
	} else if snap, err := loadArchive(a, 0); err == nil {
		rec.ConfigDigest = snap.Digest
	}
	if err := s.putArchive(ctx, a); err != nil {
		return PushResult{}, err
	}
	rec, err = s.move(ctx, rec, cur.Revision, have, o.Now)
	return PushResult{Record: rec}, err
}

// expect refuses a push or rollback when current is at revision at and
// the caller wants another.
func expect(want *uint64, at uint64) error {
	if want != nil && *want != at {
		return &Error{Code: CodeRevisionConflict, Revision: at,
			Message: fmt.Sprintf("current is at revision %d, not %d: someone pushed since (worker config log)", at, *want)}
	}
	return nil
}

func (s *Store) putArchive(ctx context.Context, a *Archive) error {
	if _, err := s.obj.GetInfo(ctx, a.Digest); err == nil {
		return nil // content-addressed: already there
	}
	_, err := s.obj.Put(ctx, jetstream.ObjectMeta{Name: a.Digest, Description: "rolecall config bundle"}, bytes.NewReader(a.Data))
	if err != nil {
		return fmt.Errorf("store the archive in object store %s: %w", Bucket, err)
	}
	return nil
}

// move writes rec to current if current is still at rev, then its
// history record.
func (s *Store) move(ctx context.Context, rec Record, rev uint64, have bool, now func() time.Time) (Record, error) {
	if now == nil {
		now = time.Now
	}
	rec.Time = now().UTC()
	val, err := json.Marshal(rec)
	if err != nil {
		return rec, err
	}
	var n uint64
	if have {
		n, err = s.kv.Update(ctx, KeyCurrent, val, rev)
	} else {
		n, err = s.kv.Create(ctx, KeyCurrent, val)
	}
	// Create finds the key there, Update another revision: current
	// moved. (ErrKeyRevisionMismatch covers both codes a conflict has,
	// 10071 on one replica and 10164 on a replicated bucket.)
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return rec, &Error{Code: CodeRevisionConflict, Message: fmt.Sprintf("current moved from revision %d while this push ran: read worker config log and push again", rev)}
	}
	if err != nil {
		return rec, fmt.Errorf("move %s: %w", KeyCurrent, err)
	}
	rec.Revision = n
	if val, err = json.Marshal(rec); err == nil {
		_, err = s.kv.Put(ctx, HistoryPrefix+strconv.FormatUint(n, 10), val)
	}
	if err != nil {
		return rec, fmt.Errorf("current is at revision %d, but its history record was not written: %w", n, err)
	}
	return rec, nil
}

// Log lists the history, newest first (empty when nothing was pushed).
func (s *Store) Log(ctx context.Context) ([]Record, error) {
	lister, err := s.kv.ListKeysFiltered(ctx, HistoryPrefix+">")
	if err != nil {
		return nil, err
	}
	var out []Record
	for k := range lister.Keys() {
		r, err := listed(s.history(ctx, strings.TrimPrefix(k, HistoryPrefix)))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	// current is written before its history record: a push that died in
	// between still shows in the log, and so does a value there that is
	// no record (every worker refuses it).
	if cur, err := listed(s.Current(ctx)); err == nil && !slices.ContainsFunc(out, func(r Record) bool { return r.Revision == cur.Revision }) {
		out = append(out, cur)
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(b.Revision, a.Revision) })
	return out, nil
}

// listed is a Log entry: a record that cannot be read is listed at its
// revision with its error, so it hides neither the rest of the log nor
// itself.
func listed(r Record, err error) (Record, error) {
	var be *Error
	if errors.As(err, &be) && be.Code == CodeMalformed {
		return Record{Revision: be.Revision, Error: be}, nil
	}
	return r, err
}

// history is the record of the history key of revision rev. A record
// that does not decode, or is another revision's, is CodeMalformed about
// revision rev.
func (s *Store) history(ctx context.Context, rev string) (Record, error) {
	key := HistoryPrefix + rev
	n, perr := strconv.ParseUint(rev, 10, 64)
	r, err := s.record(ctx, key, "no revision "+rev+" in the history")
	var be *Error
	switch {
	case perr != nil:
		return r, errf(CodeMalformed, key, "the key names no revision")
	case errors.As(err, &be) && be.Code == CodeMalformed:
		be.Path, be.Revision = key, n
	case err == nil && r.Revision != n:
		return r, &Error{Code: CodeMalformed, Path: key, Revision: n, Message: fmt.Sprintf("holds the record of revision %d", r.Revision)}
	}
	return r, err
}

// Revision is the history record of revision rev.
func (s *Store) Revision(ctx context.Context, rev uint64) (Record, error) {
	return s.history(ctx, strconv.FormatUint(rev, 10))
}

// Rollback moves current back to the bundle of revision to (0: the
// parent of current's bundle) by compare-and-swap, as a new revision that
// records the rollback.
func (s *Store) Rollback(ctx context.Context, to uint64, o PushOptions) (Record, error) {
	// With current deleted, a rollback to a named revision restores it.
	cur, err := s.moveFrom(ctx)
	have := err == nil
	if err != nil && (to == 0 || !errors.Is(err, &Error{Code: CodeNotFound})) {
		return Record{}, err
	}
	if err := expect(o.ExpectRevision, cur.Revision); err != nil {
		return Record{}, err
	}
	if to == 0 {
		if cur.ParentRevision == 0 {
			return Record{}, errf(CodeNotFound, "", "revision %d has no parent to roll back to", cur.Revision)
		}
		to = cur.ParentRevision
	}
	target, err := s.Revision(ctx, to)
	if err != nil {
		return Record{}, err
	}
	if _, err := s.obj.GetInfo(ctx, target.Digest); err != nil {
		return Record{}, errf(CodeNotFound, "", "the archive %s of revision %d is not in object store %s: %v", target.Digest, to, Bucket, err)
	}
	msg := o.Message
	if msg == "" {
		msg = fmt.Sprintf("rollback to revision %d", to)
	}
	rec := Record{
		Digest: target.Digest, ConfigDigest: target.ConfigDigest, Files: target.Files, Size: target.Size,
		Parent: cur.Digest, ParentRevision: cur.Revision, RollbackOf: to,
		Actor: o.Actor, User: o.User, Message: msg,
	}
	return s.move(ctx, rec, cur.Revision, have, o.Now)
}

// Archive fetches and reads the archive rec names, checking its digest.
func (s *Store) Archive(ctx context.Context, rec Record) (*Archive, error) {
	info, err := s.obj.GetInfo(ctx, rec.Digest)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, &Error{Code: CodeNotFound, Revision: rec.Revision, Message: fmt.Sprintf("the archive %s is not in object store %s", rec.Digest, Bucket)}
	}
	if err != nil {
		return nil, err
	}
	if info.Size > MaxArchiveSize {
		return nil, &Error{Code: CodeTooLarge, Revision: rec.Revision, Message: fmt.Sprintf("the archive is %d bytes, more than the %d-byte limit", info.Size, MaxArchiveSize)}
	}
	// The chunks may hold more than the size recorded: the read stops one
	// byte past the limit.
	data, err := s.readObject(ctx, rec.Digest)
	if err == nil && len(data) > MaxArchiveSize {
		return nil, &Error{Code: CodeTooLarge, Revision: rec.Revision, Message: fmt.Sprintf("the archive holds more than the %d-byte limit (its recorded size is %d bytes)", MaxArchiveSize, info.Size)}
	}
	if errors.Is(err, jetstream.ErrDigestMismatch) {
		return nil, &Error{Code: CodeDigestMismatch, Revision: rec.Revision, Message: "the object store's checksum of the archive does not match"}
	}
	if err != nil {
		return nil, err
	}
	a, err := ReadArchive(data, rec.Digest)
	var be *Error
	if errors.As(err, &be) {
		be.Revision = rec.Revision
	}
	return a, err
}

// readObject reads the object name, at most MaxArchiveSize+1 bytes.
func (s *Store) readObject(ctx context.Context, name string) ([]byte, error) {
	r, err := s.obj.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, MaxArchiveSize+1))
}

// Load fetches rec's bundle and loads it as a snapshot citing rec's
// revision: what a worker serves for it (and what replay needs to decide
// again with the configuration of an old revision).
func (s *Store) Load(ctx context.Context, rec Record) (*discover.Snapshot, error) {
	a, err := s.Archive(ctx, rec)
	if err != nil {
		return nil, err
	}
	return loadArchive(a, rec.Revision)
}

// LoadRevision is Load of the bundle of history revision rev.
func (s *Store) LoadRevision(ctx context.Context, rev uint64) (*discover.Snapshot, error) {
	rec, err := s.Revision(ctx, rev)
	if err != nil {
		return nil, err
	}
	return s.Load(ctx, rec)
}
