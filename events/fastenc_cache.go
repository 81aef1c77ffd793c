package events

import (
	"bytes"
	"hash/maphash"
	"strings"
	"sync/atomic"
)

// A worker's prompt bodies repeat but for their last block: the role's
// body, Modes and pack directives are the same for every task of a kind,
// the task's extra prompt (when there is one) comes last. Quoting the 3 KB
// and more (a line break every line) was the largest part of encoding an
// outcome; hashing samples and comparing costs a tenth of that. So the
// quoted contents of recent prompt heads — a body without its last block —
// are kept in a small table indexed by a hash; the last block is quoted
// each time. A string's quoted contents are its parts' (escaping is per
// rune, and the cut is at an ASCII '\n'), an entry is used only for a head
// equal to its key, so the bytes are those quoting would give. Only valid
// UTF-8 is kept (the rest must go to the reflection encoder). A head is
// admitted the second time its slot sees it, so that a stream of distinct
// prompts costs a hash per outcome and no allocation. Entries are
// replaced, never removed: the table holds at most quotedSlots keys and
// their quoted forms, each under quotedMaxLen.
const (
	quotedSlots  = 64
	quotedMinLen = 256
	quotedMaxLen = 16 << 10
)

type quotedEntry struct {
	s string
	q []byte // s's JSON string contents, without the quotes
}

var (
	quotedSeed  = maphash.MakeSeed()
	quotedSeen  [quotedSlots]atomic.Uint64
	quotedTable [quotedSlots]atomic.Pointer[quotedEntry]
)

// quotedHash hashes the length and three 64-byte samples of s (a string
// of at least quotedMinLen bytes): it only picks the slot and admits the
// second sighting, equality is checked in full, so strings that differ
// elsewhere merely share a slot. Hashing all of s cost as much as
// quoting a third of it.
func quotedHash(s string) uint64 {
	mid := len(s)/2 - 32
	h := maphash.String(quotedSeed, s[:64])
	h = h*31 + maphash.String(quotedSeed, s[mid:mid+64])
	h = h*31 + maphash.String(quotedSeed, s[len(s)-64:])
	return h*31 + uint64(len(s))
}

// promptHead is s without its last block (the text after the last blank
// line), or all of s when that would leave less than quotedMinLen.
func promptHead(s string) string {
	if cut := strings.LastIndex(s, "\n\n"); cut >= quotedMinLen {
		return s[:cut]
	}
	return s
}

// strCached is str for prompt bodies, with the head's quoted contents
// taken from the table when it is there.
func (e *fastEncoder) strCached(b []byte, s string) []byte {
	if len(s) < quotedMinLen || len(s) > quotedMaxLen {
		return e.str(b, s)
	}
	head := promptHead(s)
	b = e.contentsCached(append(b, '"'), head)
	if e.bad {
		return b
	}
	var ok bool
	b, ok = appendStringBody(b, s[len(head):])
	e.bad = e.bad || !ok
	return append(b, '"')
}

// contentsCached appends the quoted contents of s (without the quotes),
// taken from the table when s is there; a string shorter than
// quotedMinLen or longer than quotedMaxLen is quoted and never kept.
// Invalid UTF-8 sets e.bad.
func (e *fastEncoder) contentsCached(b []byte, s string) []byte {
	if len(s) < quotedMinLen || len(s) > quotedMaxLen {
		b, ok := appendStringBody(b, s)
		e.bad = e.bad || !ok
		return b
	}
	h := quotedHash(s)
	slot := h % quotedSlots
	if en := quotedTable[slot].Load(); en != nil && en.s == s {
		return append(b, en.q...)
	}
	start := len(b)
	b, ok := appendStringBody(b, s)
	if !ok {
		e.bad = true
		return b
	}
	if quotedSeen[slot].Swap(h) == h {
		quotedTable[slot].Store(&quotedEntry{s: s, q: bytes.Clone(b[start:])})
	}
	return b
}
