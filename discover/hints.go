package discover

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/rolecall/rolecall/resolve"
)

// packHints holds what pack_not_found messages need of a snapshot: its
// pack names, sorted once, on the first miss, instead of once per failing
// task; and the answers for the names asked lately, since a misconfigured
// planner sends one wrong name many times.
type packHints struct {
	once  sync.Once
	names []string

	mu     sync.Mutex
	recent map[string]packHint // at most maxRecentHints
}

type packHint struct {
	msg     string
	closest []string
}

const maxRecentHints = 256

func (s *Snapshot) packNames() []string {
	s.hints.once.Do(func() { s.hints.names = sortedKeys(s.Packs) })
	return s.hints.names
}

// packHint is unknownPack for a task's pack name, remembered.
func (s *Snapshot) packHint(name string) packHint {
	h := &s.hints
	h.mu.Lock()
	ph, ok := h.recent[name]
	h.mu.Unlock()
	if ok {
		return ph
	}
	ph.msg, ph.closest = unknownPack("pack", name, s.packNames())
	h.mu.Lock()
	if len(h.recent) >= maxRecentHints {
		clear(h.recent) // names that keep coming back are soon in again
	}
	if h.recent == nil {
		h.recent = map[string]packHint{}
	}
	h.recent[name] = ph
	h.mu.Unlock()
	return ph
}

// Bounds of a pack_not_found message: however many packs there are, it
// names at most maxClosest close ones, and lists every pack only when
// there are at most listAllPacks.
const (
	maxClosest   = 3
	listAllPacks = 8
)

// unknownPack builds the pack_not_found error for name among the sorted
// pack names: what to type instead (the closest names, which details
// carries as "closest"), then all the names when there are few, else
// their number.
func unknownPack(what, name string, names []string) (msg string, closest []string) {
	closest = closestNames(name, names, maxClosest)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q does not exist%s", what, name, didYouMean(closest))
	switch {
	case len(names) <= listAllPacks:
		fmt.Fprintf(&b, " (known: %s)", quoteNames(names))
	case len(closest) == 0:
		fmt.Fprintf(&b, " (%d packs, none with a similar name)", len(names))
	default:
		fmt.Fprintf(&b, " (%d packs)", len(names))
	}
	return b.String(), closest
}

// closestNames returns up to n names that are a small edit away from name
// (Levenshtein distance at most a third of its length, at least 1, at
// most 3) or that start with it or it with them (for names of 3 bytes or
// more, counted as the largest distance), nearest first, then in name
// order. names must be sorted. Once n are found, only a nearer name can
// enter, so the bound shrinks; a name whose length alone puts it out of
// reach costs one comparison.
func closestNames(name string, names []string, n int) []string {
	return closestNamesOf(name, len(names), func(i int) string { return names[i] }, n)
}

// closestNamesOf is closestNames over count sorted names read by at.
func closestNamesOf(name string, count int, at func(int) string, n int) []string {
	type hit struct {
		name string
		d    int
	}
	reach := min(max(len(name)/3, 1), 3)
	limit := reach // shrinks once n names are found
	best := make([]hit, 0, n+1)
	var rows distanceRows
	for i := range count {
		c := at(i)
		short, long := name, c
		if len(short) > len(long) {
			short, long = long, short
		}
		prefix := len(short) >= 3 && strings.HasPrefix(long, short)
		if len(long)-len(short) > limit && !prefix {
			continue
		}
		d, ok := editDistance(&rows, name, c, limit)
		switch {
		case ok:
		case prefix && reach <= limit:
			d = reach
		default:
			continue
		}
		// Insert in (distance, name) order; names come sorted, so a
		// later name of equal distance goes after the earlier ones.
		i := len(best)
		for i > 0 && best[i-1].d > d {
			i--
		}
		best = slices.Insert(best, i, hit{c, d})
		if len(best) > n {
			best = best[:n]
		}
		if len(best) == n {
			limit = min(limit, best[n-1].d-1)
			if limit < 0 {
				break
			}
		}
	}
	out := make([]string, len(best))
	for i, h := range best {
		out[i] = h.name
	}
	return out
}

// distanceRows are editDistance's three rows, reused from name to name.
type distanceRows [3 * (resolve.MaxNameLen + 1)]int

// editDistance is the edit distance of a and b when it is at most limit
// (ok is false otherwise): insertions, deletions, substitutions and
// swaps of two neighbouring bytes (the optimal string alignment distance;
// names are ASCII), so "ghots" is one edit from "ghost". It stops as soon
// as a row's minimum exceeds limit.
func editDistance(rows *distanceRows, a, b string, limit int) (d int, ok bool) {
	const w = resolve.MaxNameLen + 1
	prev2, prev, cur := rows[:len(b)+1:len(b)+1], rows[w:][:len(b)+1:len(b)+1], rows[2*w:][:len(b)+1:len(b)+1]
	if len(b) >= w {
		prev2, prev, cur = make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	}
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		low := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
			low = min(low, cur[j])
		}
		if low > limit {
			return 0, false
		}
		prev2, prev, cur = prev, cur, prev2
	}
	if prev[len(b)] > limit {
		return 0, false
	}
	return prev[len(b)], true
}

// closestProfiles are the profile names closest to name (the snapshot's
// profile list is sorted already, so nothing is built per task).
func (s *Snapshot) closestProfiles(name string) []string {
	return closestNamesOf(name, len(s.profileList), func(i int) string { return s.profileList[i].Name }, maxClosest)
}
