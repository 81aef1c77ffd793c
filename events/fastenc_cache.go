package events

import (
	"bytes"
	"hash/maphash"
	"sync/atomic"
)

// A worker's prompt bodies repeat: one per role, Mode set and pack entry,
// rebuilt for every task. Quoting one (3 KB and more, a line break every
// line) was the largest part of encoding an outcome; hashing and comparing
// it costs a tenth of that. So the quoted contents of recent long prompt
// bodies are kept, in a small table indexed by the string's hash. An entry
// is used only for a string equal to its key, so the bytes are those the
// quoting would give; only valid UTF-8 is kept (the rest must go to the
// reflection encoder). A string is admitted the second time its slot sees
// it, so that a stream of distinct prompts costs a hash per outcome and no
// allocation. Entries are replaced, never removed: the table holds at most
// quotedSlots keys and their quoted forms, each under quotedMaxLen.
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

// strCached is str for strings that are likely to repeat.
func (e *fastEncoder) strCached(b []byte, s string) []byte {
	if len(s) < quotedMinLen || len(s) > quotedMaxLen {
		return e.str(b, s)
	}
	h := quotedHash(s)
	slot := h % quotedSlots
	if en := quotedTable[slot].Load(); en != nil && en.s == s {
		b = append(b, '"')
		b = append(b, en.q...)
		return append(b, '"')
	}
	var f fastEncoder
	start := len(b)
	if b = f.str(b, s); f.bad {
		e.bad = true
		return b
	}
	if quotedSeen[slot].Swap(h) == h {
		quotedTable[slot].Store(&quotedEntry{s: s, q: bytes.Clone(b[start+1 : len(b)-1])})
	}
	return b
}
