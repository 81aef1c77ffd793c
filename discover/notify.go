package discover

import (
	"errors"
	"io/fs"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// maxChanges bounds the paths one load on file events re-stats; a burst of
// events beyond it (a checkout, a copy of a whole tree) gets a full sweep.
const maxChanges = 256

// notifier watches the directories the last scan read and turns their
// file events into the display paths those events name (files.go,
// changes). It only says where to look: the load still stats what it
// names, and a full sweep still runs now and then as the safety net.
type notifier struct {
	w *fsnotify.Watcher
	// dirs maps each watched directory on disk to its display path.
	dirs map[string]string
	// paths are the display paths named since the last take; full asks
	// for a full sweep (an event that cannot be narrowed down).
	paths map[string]bool
	full  bool
	// links: the last scan met a symbolic link (note).
	links bool
}

func newNotifier() (*notifier, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	return &notifier{w: w, dirs: map[string]string{}, paths: map[string]bool{}}, nil
}

func (n *notifier) close() {
	if n != nil {
		n.w.Close()
	}
}

// events and errors are nil channels for a nil notifier, so a select
// over them waits forever when file events are off.
func (n *notifier) events() chan fsnotify.Event {
	if n == nil {
		return nil
	}
	return n.w.Events
}

func (n *notifier) errors() chan error {
	if n == nil {
		return nil
	}
	return n.w.Errors
}

// sync makes the watched set the directories want names, and returns the
// display paths of the directories it began to watch: what changed in
// them before the watch existed produced no event, so the caller sweeps
// them once more. An error (inotify's watch limit, for one) means events
// cannot be trusted to name every change.
func (n *notifier) sync(want map[string]string) ([]string, error) {
	for dir := range n.dirs {
		if _, ok := want[dir]; !ok {
			// The directory may be gone already, which removed the watch.
			_ = n.w.Remove(dir)
			delete(n.dirs, dir)
		}
	}
	var added []string
	for dir, display := range want {
		if _, ok := n.dirs[dir]; ok {
			continue
		}
		if err := n.w.Add(dir); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the sweep; its parent's event says so
			}
			return nil, err
		}
		n.dirs[dir] = display
		added = append(added, display)
	}
	return added, nil
}

// note records what ev names. When the last scan met a symbolic link,
// an edit may show only as an event on something the scan never reads
// (the ..data swap of a Kubernetes ConfigMap volume): then any event asks
// for a full sweep.
func (n *notifier) note(ev fsnotify.Event) {
	links := n.links
	display, ok := n.dirs[ev.Name]
	if ok && ev.Op.Has(fsnotify.Remove|fsnotify.Rename) {
		// A watched directory left its path (another may be renamed into
		// it): forget its watch, so the next sync watches what is there.
		_ = n.w.Remove(ev.Name)
		delete(n.dirs, ev.Name)
	}
	if !ok {
		dir, found := n.dirs[filepath.Dir(ev.Name)]
		if !found {
			return // from a directory no longer watched
		}
		base := filepath.Base(ev.Name)
		if strings.HasPrefix(base, ".") && !links {
			// Dot-entries are not configuration (listings skip them); an
			// editor's temporary renamed into place gets its own event.
			return
		}
		display = path.Join(dir, base)
	}
	if links || display == "." || len(n.paths) >= maxChanges {
		n.full = true
		return
	}
	n.paths[display] = true
}

// take returns and clears what was noted.
func (n *notifier) take() (c *changes, full bool) {
	full = n.full
	if !full && len(n.paths) > 0 {
		c = newChanges(slices.Collect(maps.Keys(n.paths)))
	}
	clear(n.paths)
	n.full = false
	return c, full
}
