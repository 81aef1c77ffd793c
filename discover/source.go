package discover

import (
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rolecall/rolecall/resolve"
)

// Source serves the current snapshot of a config root and replaces it when
// the files change, without a restart. It is safe for concurrent use.
//
// Change detection is a stat sweep, not file notifications: the sweep
// re-stats every path a Load looked at (rolecall.yaml, packs/, agents/,
// catalog/, the profile roots, the preamble file), following symlinks
// inside the root, and compares kind, size, mtime, inode and ctime with the
// last load's. Only a difference reruns Load. A sweep sees Kubernetes
// ConfigMap updates (an atomic swap of a ..data symlink, where inotify on
// the file itself sees nothing) and works on network filesystems that
// deliver no events, at the cost of one stat per file per sweep. Because
// two edits within the filesystem's timestamp granularity can look
// identical to a stat, a sweep also reloads while any file's mtime is
// within racyWindow of the last load (git's "racily clean" rule); a reload
// whose digest is unchanged keeps the current snapshot pointer.
type Source struct {
	root string
	opts Options
	log  *slog.Logger
	base time.Time // monotonic origin for lastSweep

	cur       atomic.Pointer[Snapshot]
	err       atomic.Pointer[error]
	lastSweep atomic.Int64 // nanoseconds since base

	mu sync.Mutex // one sweep or load at a time
	// The last load attempt: its fingerprint, scan paths and start time.
	tried      [sha256.Size]byte
	triedAt    scanPaths
	triedStart int64
	triedErr   string
}

// racyWindow is how close to a load's start a file's mtime must be for the
// next sweep to reload anyway: a second edit within the filesystem's
// timestamp granularity (a few ms on ext4, 2 s on FAT) can leave size,
// mtime and inode unchanged (git calls these entries "racily clean").
const racyWindow = 2 * time.Second

// NewSource loads root; the first Load must succeed, else its error is
// returned. log may be nil (nothing is logged then).
func NewSource(root string, opts Options, log *slog.Logger) (*Source, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Source{root: root, opts: opts, log: log, base: time.Now()}
	l := load(root)
	if len(l.errs) > 0 {
		return nil, l.errs[0]
	}
	snap := l.snapshot()
	s.cur.Store(snap)
	s.tried, s.triedAt, s.triedStart = l.fp, l.scan, l.started
	s.logLegacy(nil, snap)
	s.lastSweep.Store(int64(time.Since(s.base)))
	return s, nil
}

// Snapshot returns the current snapshot. When ReloadInterval has elapsed
// since the last sweep it first sweeps (and reloads if something changed);
// a caller that finds another sweep in progress does not wait for it and
// gets the current snapshot. Within the interval it is an atomic load.
func (s *Source) Snapshot() *Snapshot {
	if s.opts.ReloadInterval > 0 {
		now := int64(time.Since(s.base))
		if now-s.lastSweep.Load() < int64(s.opts.ReloadInterval) {
			return s.cur.Load()
		}
	}
	if s.mu.TryLock() {
		s.reloadLocked(false)
		s.mu.Unlock()
	}
	return s.cur.Load()
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
	return s.reloadLocked(false), s.Err()
}

// ForceReload loads the root again whether or not the sweep sees a change
// (for filesystems whose timestamps are too coarse to show an edit).
func (s *Source) ForceReload() (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked(true), s.Err()
}

func (s *Source) reloadLocked(force bool) bool {
	defer func() { s.lastSweep.Store(int64(time.Since(s.base))) }()
	if !force {
		fp, newest := sweep(s.root, s.triedAt)
		racy := newest >= s.triedStart-int64(racyWindow) && newest <= time.Now().UnixNano()+int64(racyWindow)
		if fp == s.tried && !racy {
			return false
		}
	}
	l := load(s.root)
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

// sweep is the stat-only scan of root that Load also runs, hashed.
func sweep(root string, sp scanPaths) ([sha256.Size]byte, int64) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return fingerprint([]stamp{{kind: 'e', err: err.Error()}})
	}
	defer r.Close()
	t := tree{root: r}
	var sc scanner
	sc.scanFixed(t)
	conf := sc.scanConfigured(t, sp, ConfigFile, nil)
	for _, o := range conf.opened {
		o.Close()
	}
	return fingerprint(sc.stamps)
}
