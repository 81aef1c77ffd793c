package bundle

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
)

// Status is what a watching worker reports about its configuration.
type Status struct {
	// Revision and Digest are those of the snapshot in service (0 and ""
	// before the first bundle loaded).
	Revision     uint64
	Digest       string
	ConfigDigest string
	// Degraded: the newest bundle was refused and an older one serves.
	Degraded bool
	// LastError is why the last bundle was refused (nil when the newest
	// loaded), and LastErrorRevision its revision.
	LastError         error
	LastErrorRevision uint64
	// Loaded is when the snapshot in service was swapped in.
	Loaded time.Time
}

// Source follows current and serves the last good snapshot. It implements
// the worker's snapshot source; it is safe for concurrent use.
type Source struct {
	store *Store
	log   *slog.Logger
	// onSwap runs, in the watch goroutine, after each swap.
	onSwap   func(*discover.Snapshot)
	retryFor time.Duration

	cur    atomic.Pointer[discover.Snapshot]
	status atomic.Pointer[Status]
	ready  chan struct{}
	once   sync.Once
	done   chan struct{}
}

// WatchOptions tune Follow.
type WatchOptions struct {
	Logger *slog.Logger
	// OnSwap runs after each new snapshot is swapped in (the roster
	// writer); it must not block for long.
	OnSwap func(*discover.Snapshot)
	// RetryFor is how long a bundle whose archive cannot be read yet (a
	// replica behind, a broker fault) is retried before it is refused
	// (0: 5 s).
	RetryFor time.Duration
	// OpenEvery is how often Follow tries again to bind the buckets while
	// they do not exist yet (0: 2 s).
	OpenEvery time.Duration
}

// Follow follows current until ctx ends, binding the buckets itself. The
// first value comes from the watch's initial state, so a worker that
// starts while current holds a bundle has it loaded as soon as Ready is
// closed. While the buckets do not exist and so.Create is off (a
// least-privilege worker started before the first push), it keeps trying
// every o.OpenEvery instead of failing. Until a bundle serves, Snapshot is
// nil, Ready is open and Status().LastError says why: the worker takes no
// task and /readyz answers 503 with the reason. Every o.OpenEvery it also
// checks that the KV bucket is still the one it watches: one deleted (and
// maybe made again) is refused as CodeNotFound, the last good snapshot
// serving, and bound and watched anew.
func Follow(ctx context.Context, js jetstream.JetStream, so StoreOptions, o WatchOptions) *Source {
	src := &Source{
		log: cmp.Or(o.Logger, slog.New(slog.DiscardHandler)), onSwap: o.OnSwap, retryFor: cmp.Or(o.RetryFor, 5*time.Second),
		ready: make(chan struct{}), done: make(chan struct{}),
	}
	src.status.Store(&Status{})
	go func() {
		defer close(src.done)
		every := cmp.Or(o.OpenEvery, 2*time.Second)
		for ctx.Err() == nil {
			s, err := Open(ctx, js, so)
			var created time.Time
			if err == nil {
				// Before the watch: a bucket made again after it is
				// another, and the next check finds it.
				created, err = s.created(ctx)
			}
			var w jetstream.KeyWatcher
			if err == nil {
				w, err = s.kv.Watch(ctx, KeyCurrent)
			}
			if err == nil {
				src.store = s
				if src.Snapshot() == nil {
					src.status.Store(&Status{})
				}
				src.run(ctx, w, created, every)
			} else {
				// A worker that serves a snapshot keeps it, degraded.
				st, serving := src.Status(), src.Snapshot() != nil
				if st.LastError == nil || st.LastError.Error() != err.Error() {
					msg := "config buckets not bound yet; retrying (not ready until a bundle serves)"
					if serving {
						msg = "config buckets not bound; retrying (the last good snapshot serves, degraded)"
					}
					src.log.Warn(msg, "bucket", Bucket, "error", err.Error(), "serving_revision", st.Revision)
				}
				st.Degraded, st.LastError, st.LastErrorRevision = serving, err, 0
				src.status.Store(&st)
			}
			select {
			case <-ctx.Done():
			case <-time.After(every):
			}
		}
	}()
	return src
}

// Snapshot is the snapshot in service (nil before Ready).
func (s *Source) Snapshot() *discover.Snapshot { return s.cur.Load() }

// Ready is closed once a bundle is in service.
func (s *Source) Ready() <-chan struct{} { return s.ready }

// Done is closed when the watch has stopped.
func (s *Source) Done() <-chan struct{} { return s.done }

// Status says what serves and what was last refused.
func (s *Source) Status() Status { return *s.status.Load() }

// Err is the last refusal, nil when the newest bundle serves.
func (s *Source) Err() error { return s.Status().LastError }

// Wait blocks until a bundle is in service or ctx ends.
func (s *Source) Wait(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run follows w until ctx ends, w closes or the bucket is no longer the
// one made at created (checked every every).
func (s *Source) run(ctx context.Context, w jetstream.KeyWatcher, created time.Time, every time.Duration) {
	defer func() { _ = w.Stop() }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// The watch of a deleted bucket says nothing, and misses every
			// value of one made again under its name.
			c, err := s.store.created(ctx)
			if errors.Is(err, jetstream.ErrStreamNotFound) || err == nil && !c.Equal(created) {
				s.refuse(0, &Error{Code: CodeNotFound, Message: "the bucket " + Bucket + " was deleted: no bundle is in service at " + KeyCurrent + " (worker config push restores one)"})
				return
			}
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			switch {
			case e == nil: // the end of the initial values
			case e.Operation() != jetstream.KeyValuePut:
				// A delete or purge names no bundle: the last good
				// snapshot stays in service, and the status says so.
				s.refuse(e.Revision(), &Error{Code: CodeNotFound, Revision: e.Revision(),
					Message: "current was deleted: no bundle is in service at " + KeyCurrent + " (worker config push or rollback REV restores one)"})
			default:
				s.apply(ctx, e)
			}
		}
	}
}

// apply loads the bundle of one value of current and swaps it in, or
// keeps the last good one and records why.
func (s *Source) apply(ctx context.Context, e jetstream.KeyValueEntry) {
	rev := e.Revision()
	snap, rec, err := s.load(ctx, e)
	st := s.Status()
	if err != nil {
		s.refuse(rev, err)
		return
	}
	s.cur.Store(snap)
	s.status.Store(&Status{Revision: rev, Digest: rec.Digest, ConfigDigest: snap.Digest, Loaded: time.Now()})
	s.once.Do(func() { close(s.ready) })
	s.log.Info("config bundle in service", "revision", rev, "digest", rec.Digest, "config_digest", snap.Digest, "previous_revision", st.Revision, "actor", rec.Actor)
	if s.onSwap != nil {
		s.onSwap(snap)
	}
}

// refuse keeps the last good snapshot in service and records why the
// value of current at revision rev is not.
func (s *Source) refuse(rev uint64, err error) {
	st := s.Status()
	st.Degraded, st.LastError, st.LastErrorRevision = true, err, rev
	s.status.Store(&st)
	attrs := []any{"revision", rev, "error", err.Error(), "serving_revision", st.Revision}
	var be *Error
	if errors.As(err, &be) {
		attrs = append(attrs, "code", string(be.Code))
	}
	s.log.Warn("config bundle refused; keeping the last good snapshot (degraded)", attrs...)
}

func (s *Source) load(ctx context.Context, e jetstream.KeyValueEntry) (*discover.Snapshot, Record, error) {
	rec, err := entryRecord(e)
	if err != nil {
		return nil, rec, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The archive is stored before current moves, but in a cluster a
	// replica that serves the read (direct get) may not have it yet: a
	// missing archive or a transient fault is retried for a while before
	// the bundle counts as bad. A bundle that is hostile or invalid is
	// final at once.
	wait := 50 * time.Millisecond
	deadline := time.Now().Add(s.retryFor)
	for {
		snap, err := s.store.Load(ctx, rec)
		var be *Error
		final := errors.As(err, &be) && be.Code != CodeNotFound
		if err == nil || final || time.Now().After(deadline) || ctx.Err() != nil {
			return snap, rec, err
		}
		s.log.Debug("config bundle not readable yet; retrying", "revision", rec.Revision, "error", err.Error())
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}
