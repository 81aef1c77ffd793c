package discover

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolecall/rolecall/resolve"
)

// Source serves the current snapshot of a config root and replaces it when
// the files change, without a restart. It is safe for concurrent use.
//
// Snapshot is an atomic load and nothing else: change detection runs on
// the Source's own goroutine (Start), so a task never waits for a sweep
// or a reload, and a reload that takes long only delays when an edit is
// seen. Without Start, the snapshot changes only on Reload or
// ForceReload (one-shot commands and tests).
//
// Change detection has two parts. File events (inotify, through
// fsnotify) on every directory the last scan read name what changed; a
// load then re-stats only those paths, re-reads the listings only of
// their directories, and takes every other stat and listing from the
// last scan (notify.go). A full stat sweep stays as the safety net, every
// DefaultSafetySweep: it re-stats every path a Load looked at
// (rolecall.yaml, packs/, agents/, catalog/, the profile roots, the
// preamble file, ${file:…} targets), following symlinks inside the root,
// and compares kind, size, mtime, inode and ctime with the last load's;
// only a difference reruns Load. The sweep alone (every
// DefaultReloadInterval) runs where events are off (Options.PollOnly),
// unavailable, or cannot cover the tree (the watch limit). Events cannot
// see an edit made behind a symbolic link (the ..data swap of a
// Kubernetes ConfigMap volume) nor on a network file system: once a scan
// meets a symbolic link, any event triggers a full sweep instead, and
// the periodic sweep finds what sent no event. Because two edits within
// the filesystem's timestamp granularity can look identical to a stat,
// a sweep also reloads while any file's mtime is within racyWindow of
// the last load (git's "racily clean" rule); a reload whose digest is
// unchanged keeps the current snapshot pointer.
//
// A reload is incremental: files whose stamp is unchanged are neither
// read nor decoded again (cache.go), and the result equals a full Load.
type Source struct {
	root string
	opts Options
	log  *slog.Logger

	cur atomic.Pointer[Snapshot]
	err atomic.Pointer[error]

	mu sync.Mutex // one sweep or load at a time
	// The last load attempt: its fingerprint, scan paths and start time.
	tried      [sha256.Size]byte
	triedAt    scanPaths
	triedStart int64
	triedErr   string
	cache      *parseCache
	// scan is the last scan's stats and listings (a sweep's, or the load's
	// on file events): what the next load on file events starts from.
	scan *scanMemo

	run sync.Mutex // guards stop and done
	// stop ends the watcher that Start began; done is closed when it has.
	stop context.CancelFunc
	done chan struct{}
}

// racyWindow is how close to a load's start a file's mtime must be for the
// next sweep to reload anyway: a second edit within the filesystem's
// timestamp granularity (a few ms on ext4, 2 s on FAT) can leave size,
// mtime and inode unchanged (git calls these entries "racily clean").
const racyWindow = 2 * time.Second

// DefaultReloadInterval is the watcher's sweep period when
// Options.ReloadInterval is 0 and file events are off or unavailable.
// Half a second keeps an edit visible within a second even when a sweep
// or a reload takes a while.
const DefaultReloadInterval = 500 * time.Millisecond

// NewSource loads root; the first Load must succeed, else its error is
// returned. log may be nil (nothing is logged then). The Source does not
// watch the files until Start.
func NewSource(root string, opts Options, log *slog.Logger) (*Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{root: root, opts: opts, log: log, cache: newParseCache()}
	s.cache.begin()
	l := loadFrom(root, nil, opts, s.cache)
	s.cache.commit()
	if len(l.errs) > 0 {
		return nil, l.errs[0]
	}
	snap := l.snapshot()
	s.cur.Store(snap)
	s.tried, s.triedAt, s.triedStart = l.fp, l.scan, l.started
	s.logLegacy(nil, snap)
	s.logSkills(nil, snap)
	s.logBrokenPacks(nil, snap)
	return s, nil
}

// Snapshot returns the current snapshot: an atomic load, never a sweep.
func (s *Source) Snapshot() *Snapshot {
	return s.cur.Load()
}

// Start begins watching the files on a goroutine of the Source's own: a
// full sweep at once and then every Options.ReloadInterval, file events
// in between, and a reload when either sees a change. It stops when ctx
// ends or Stop is called. A second Start while one runs does nothing.
func (s *Source) Start(ctx context.Context) {
	s.run.Lock()
	defer s.run.Unlock()
	if s.done != nil {
		return
	}
	ctx, s.stop = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.watch(ctx, s.done)
}

// Stop ends the watcher and waits for a sweep or reload in progress to
// finish, so nothing touches the files once it returns. It is safe to call
// without Start, and more than once.
func (s *Source) Stop() {
	s.run.Lock()
	stop, done := s.stop, s.done
	s.stop, s.done = nil, nil
	s.run.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
}

func (s *Source) watch(ctx context.Context, done chan struct{}) {
	defer close(done)
	var n *notifier
	if !s.opts.PollOnly {
		var err error
		if n, err = newNotifier(); err != nil {
			s.log.Warn("discover: file events unavailable; sweeping only", "root", s.root, "error", err.Error())
		}
	}
	defer func() { n.close() }()
	// A first full sweep takes the stats the events will be relative to
	// (and sees any change since the first load).
	n = s.sweepAndWatch(n, nil)
	// A timer re-armed after each sweep, not a ticker: a sweep slower than
	// the interval must not queue the next one behind it.
	t := time.NewTimer(s.sweepEvery(n))
	defer t.Stop()
	var batch <-chan time.Time
	gather := func() {
		if batch == nil {
			batch = time.After(eventBatch)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-n.events():
			n.note(ev)
			gather()
			continue
		case err := <-n.errors():
			// An overflowed queue lost events: only a full sweep is sure.
			s.log.Debug("discover: file event error; sweeping everything", "root", s.root, "error", err.Error())
			n.full = true
			gather()
			continue
		case <-batch:
			batch = nil
			c, full := n.take() // c is nil when full
			if c == nil && !full {
				continue
			}
			n = s.sweepAndWatch(n, c)
		case <-t.C:
			n = s.sweepAndWatch(n, nil)
		}
		t.Reset(s.sweepEvery(n))
	}
}

// eventBatch is how long file events gather before a sweep: an editor's
// save is several events, and one sweep should see them all.
const eventBatch = 20 * time.Millisecond

// DefaultSafetySweep is the full sweep's period while file events work
// and Options.ReloadInterval is 0: events name what changed, and the
// sweep is the net for what they miss (an edit behind a symbolic link on
// another mount, a network file system).
const DefaultSafetySweep = 10 * time.Second

func (s *Source) sweepEvery(n *notifier) time.Duration {
	switch {
	case s.opts.ReloadInterval > 0:
		return s.opts.ReloadInterval
	case n != nil:
		return DefaultSafetySweep
	}
	return DefaultReloadInterval
}

// sweepAndWatch sweeps and reloads on a change (or, when c names what
// changed, loads re-statting only that), and points the watches at the
// directories that scan read. Directories it begins to watch are scanned
// once more, as what changed in them before the watch existed sent no
// event. It returns n, or nil when the watches cannot be set (the sweep
// then carries on alone).
func (s *Source) sweepAndWatch(n *notifier, c *changes) *notifier {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := time.Now()
	if s.reloadLocked(false, c) {
		s.log.Debug("discover: reload took", "root", s.root, "duration", time.Since(start))
	}
	for range 3 {
		if n == nil || s.scan == nil {
			return n
		}
		n.links = s.scan.links
		added, err := n.sync(s.scan.dirs)
		if err != nil {
			s.log.Warn("discover: cannot watch the config directories; sweeping only", "root", s.root,
				"every", s.sweepEvery(nil).String(), "error", err.Error())
			n.close()
			return nil
		}
		if len(added) == 0 {
			return n
		}
		c = newChanges(added)
		s.reloadLocked(false, c)
	}
	return n
}

// Err is the last reload's error: nil when the last load succeeded (or
// nothing changed since it did), else the *Error that kept the previous
// snapshot in place.
func (s *Source) Err() error {
	if p := s.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Reload sweeps now, waiting for a sweep in progress, and reloads if the
// files changed. changed reports whether a new snapshot replaced the
// current one (a reload whose digest equals the current one's keeps the
// current pointer); err is Err() afterwards.
func (s *Source) Reload() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked(false, nil), s.Err()
}

// ForceReload loads the root again whether or not the sweep sees a change
// (for filesystems whose timestamps are too coarse to show an edit). It
// still reuses files whose stamps are unchanged and old enough.
func (s *Source) ForceReload() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked(true, nil), s.Err()
}

// reloadLocked sweeps and loads if the sweep saw a change (always, with
// force). c, when not nil, names all that changed since the last scan:
// then there is no sweep, and the load stats and lists only that, taking
// the rest from the last scan (unless that scan met a symbolic link).
func (s *Source) reloadLocked(force bool, c *changes) bool {
	switch {
	case !force && c != nil && s.scan != nil && !s.scan.links:
		// The events named what changed: no sweep, the load scans only
		// that and takes the rest from the last scan.
		s.cache.memo, s.cache.memoAt = s.scan.withChanges(c), time.Now().UnixNano()
		s.scan = newScanMemo()
		s.cache.save = s.scan
	case !force:
		memo, at := newScanMemo(), time.Now().UnixNano()
		fp, newest := sweep(s.root, s.triedAt, memo)
		s.scan = memo
		racy := newest >= s.triedStart-int64(racyWindow) && newest <= time.Now().UnixNano()+int64(racyWindow)
		if fp == s.tried && !racy {
			return false
		}
		s.cache.memo, s.cache.memoAt = memo, at
	}
	s.cache.begin()
	l := loadFrom(s.root, nil, s.opts, s.cache)
	s.cache.commit()
	sameFiles := l.fp == s.tried
	s.tried, s.triedAt, s.triedStart = l.fp, l.scan, l.started
	if len(l.errs) > 0 {
		err := error(l.errs[0])
		s.err.Store(&err)
		// A racy re-check of the same broken files is not a new failure.
		if sameFiles && err.Error() == s.triedErr {
			return false
		}
		s.triedErr = err.Error()
		cur := s.cur.Load()
		attrs := []any{"root", s.root, "error", err.Error(), "kept_digest", cur.Digest}
		var de *Error
		if errors.As(err, &de) {
			attrs = append(attrs, "code", string(de.Code))
		}
		s.log.Warn("discover: reload failed; keeping the last good snapshot", attrs...)
		return false
	}
	s.err.Store(nil)
	s.triedErr = ""
	prev := s.cur.Load()
	snap := l.snapshot()
	if snap.Digest == prev.Digest {
		return false
	}
	s.cur.Store(snap)
	s.log.Info("discover: configuration reloaded", "root", s.root, "digest", snap.Digest, "previous_digest", prev.Digest)
	s.logLegacy(prev, snap)
	s.logSkills(prev, snap)
	s.logBrokenPacks(prev, snap)
	if !reflect.DeepEqual(prev.Config.NATS, snap.Config.NATS) {
		// Not its values: the block may hold a password.
		s.log.Warn("discover: the nats: block of rolecall.yaml changed; it is read at start only, so the worker keeps the settings it started with until it is restarted", "root", s.root)
	}
	return true
}

// logLegacy logs one Info per legacy profile that prev did not have.
func (s *Source) logLegacy(prev, snap *Snapshot) {
	seen := map[string]bool{}
	if prev != nil {
		for _, w := range prev.Warnings {
			seen[w.File+"\x00"+string(w.Code)] = true
		}
	}
	for _, w := range snap.Warnings {
		if seen[w.File+"\x00"+string(w.Code)] {
			continue
		}
		if w.Code == resolve.Code(resolve.DiagnosticLegacyProfileReplacement) || w.Code == resolve.CodeProfileDispositionRequired {
			s.log.Info("discover: legacy profile", "code", string(w.Code), "profile", w.Subject, "file", w.File, "message", w.Message)
		}
	}
}

// logBrokenPacks logs one warning per broken pack that prev did not have
// broken the same way: the worker serves the other packs, and tasks that
// select this one fail with its error.
func (s *Source) logBrokenPacks(prev, snap *Snapshot) {
	for _, name := range sortedKeys(snap.PackErrors) {
		e := snap.PackErrors[name]
		if prev != nil {
			if old, ok := prev.PackErrors[name]; ok && old.Error() == e.Error() {
				continue
			}
		}
		s.log.Warn("discover: pack is broken; tasks that select it fail", "pack", name, "code", string(e.Code), "file", e.File, "line", e.Line, "error", e.Error())
	}
}

// sweep is the stat-only scan of root that Load also runs, hashed. When
// memo is not nil it keeps the scan's stats and listings in it.
func sweep(root string, sp scanPaths, memo *scanMemo) ([sha256.Size]byte, int64) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return fingerprint([]stamp{{kind: 'e', err: err.Error()}})
	}
	defer r.Close()
	t := tree{root: r}
	sc := scanner{save: memo, stamps: make([]stamp, 0, sp.stamps)}
	sc.scanFixed(t)
	conf := sc.scanConfigured(t, sp, nil)
	conf.opened.close()
	sc.scanSkills(t, sp.sources).opened.close()
	return fingerprint(sc.stamps)
}
