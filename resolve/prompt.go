package resolve

import (
	"strings"
	"unicode"
)

// BlockSeparator joins non-empty prompt blocks (DESIGN.md §3).
const BlockSeparator = "\n\n"

// JoinBlocks trims each block and joins the non-empty ones with exactly
// BlockSeparator; empty blocks add nothing.
func JoinBlocks(blocks ...string) string {
	s, _ := joinBlocksAfter(nil, "", blocks...)
	return s
}

// joinBlocksAfter is JoinBlocks(blocks...) and, when head is not empty,
// head + BlockSeparator + that text in the same allocation (the joined
// blocks are its tail); with an empty head both results are the same. The
// text is carved from arena when it is not nil.
func joinBlocksAfter(arena *TextArena, head string, blocks ...string) (text, withHead string) {
	var m blockWriter
	m.mode = measuring
	for _, blk := range blocks {
		m.block(blk)
	}
	w := blockWriter{}
	w.head(arena, head, m.n)
	for _, blk := range blocks {
		w.block(blk)
	}
	return w.result()
}

// IsBlock reports whether s is a non-blank, trimmed block: JoinBlocks
// writes it unchanged, and Resolve makes every prompt overlay one.
func IsBlock(s string) bool { return s != "" && strings.TrimSpace(s) == s }

// DirectiveBlock renders a pack entry's directives: the non-empty sections
// among Authority, Boundaries and "Escalate when", joined by BlockSeparator.
func DirectiveBlock(d Directives) string {
	var m blockWriter
	m.mode = measuring
	m.directives(d)
	var w blockWriter
	w.head(nil, "", m.n)
	w.directives(d)
	s, _ := w.result()
	return s
}

// CastsPrompt composes a casts or overlay prompt: Role body, each Mode's
// behaviors in order, the directive block, then the overlays in order.
func CastsPrompt(roleBody string, modes []Mode, d Directives, overlays ...string) string {
	s, _ := castsPromptAfter(nil, "", roleBody, modes, d, overlays)
	return s
}

// castsPromptAfter is CastsPrompt and, when head is not empty, head +
// BlockSeparator + the prompt in the same allocation (see
// joinBlocksAfter).
func castsPromptAfter(arena *TextArena, head, roleBody string, modes []Mode, d Directives, overlays []string) (prompt, withHead string) {
	// A measuring pass first sizes the builder exactly, so the prompt is
	// one allocation of its own length (and the head's), or one piece of
	// the arena's block.
	m := blockWriter{mode: measuring}
	m.casts(roleBody, modes, d, overlays)
	var w blockWriter
	w.head(arena, head, m.n)
	w.casts(roleBody, modes, d, overlays)
	return w.result()
}

// CastsPromptMatches reports whether CastsPrompt(roleBody, modes, d,
// overlays...) == want, comparing while it composes instead of building
// the prompt: it allocates nothing. The materializer uses it to check a
// resolved prompt_body.
func CastsPromptMatches(want, roleBody string, modes []Mode, d Directives, overlays ...string) bool {
	w := blockWriter{mode: comparing, want: want}
	w.casts(roleBody, modes, d, overlays)
	return w.match && w.n == len(want)
}

// writeMode selects what a blockWriter does with the text it renders.
type writeMode uint8

const (
	building  writeMode = iota // append to b
	measuring                  // count bytes in n
	comparing                  // match against want, counting matched bytes in n
)

// blockWriter renders blocks straight into one builder, so a prompt costs
// one allocation however many blocks it has. The same rendering code
// measures and compares, so the three can never disagree on the text.
type blockWriter struct {
	// building: the text goes to the arena's block, or to own without
	// one (a pointer to own kept in the writer would move it to the heap)
	arena *TextArena
	own   strings.Builder
	mode  writeMode
	start int    // building: where this text starts in the builder
	base  int    // building: where the blocks start (after a head)
	n     int    // bytes written (measuring, comparing)
	want  string // comparing: the expected text
	match bool   // comparing: false once a write differed from want
}

func (w *blockWriter) casts(roleBody string, modes []Mode, d Directives, overlays []string) {
	w.match = true
	w.block(roleBody)
	for _, m := range modes {
		w.block(m.Behaviors)
	}
	w.directives(d)
	for _, o := range overlays {
		w.block(o)
	}
}

func (w *blockWriter) write(s string) {
	switch w.mode {
	case building:
		w.builder().WriteString(s)
	case measuring:
		w.n += len(s)
	default:
		if !w.match {
			return
		}
		if len(w.want)-w.n < len(s) || w.want[w.n:w.n+len(s)] != s {
			w.match = false
			return
		}
		w.n += len(s)
	}
}

func (w *blockWriter) len() int {
	if w.mode == building {
		return w.builder().Len() - w.base
	}
	return w.n
}

// TextArena hands out the prompt texts of successive resolutions as
// pieces of shared blocks of arenaBlock bytes. Alone, each prompt is an
// allocation of its own of about 4 KB, which the Go allocator serves two
// to a span: in the worker's profile that allocation was half of composing
// the prompt. A block only ever grows at its end (strings.Builder), so a
// text handed out is never written again and stays valid after the arena
// moves on to a new block; a block is freed when no text in it is
// referenced any more. An arena serves one goroutine at a time; its zero
// value is ready to use.
type TextArena struct {
	b strings.Builder
}

// arenaBlock is the size of an arena's blocks: eight prompts of the bench's
// size share one allocation, and a prompt that outlives its neighbours
// keeps at most this much memory alive.
const arenaBlock = 32 << 10

// reserve makes room for n more bytes: in the current block when it has
// them, else in a new one (the old block is left to the texts already
// handed out from it, not copied).
func (a *TextArena) reserve(n int) {
	if a.b.Cap()-a.b.Len() < n {
		a.b.Reset()
		a.b.Grow(max(arenaBlock, n))
	}
}

// head sizes a building writer for n bytes of blocks — in arena's block
// when arena is not nil, else in a builder of its own — and, when head is
// not empty, writes head + BlockSeparator before them; the blocks are then
// separated as if nothing preceded them.
func (w *blockWriter) head(arena *TextArena, head string, n int) {
	if head != "" {
		n += len(head) + len(BlockSeparator)
	}
	w.arena = arena
	if arena != nil {
		arena.reserve(n)
	} else {
		w.own.Grow(n)
	}
	b := w.builder()
	w.start = b.Len()
	if head != "" {
		b.WriteString(head)
		b.WriteString(BlockSeparator)
	}
	w.base = b.Len()
}

// builder is where a building writer writes.
func (w *blockWriter) builder() *strings.Builder {
	if w.arena != nil {
		return &w.arena.b
	}
	return &w.own
}

// result is the blocks written and the whole text, head included: one
// string and its tail.
func (w *blockWriter) result() (blocks, all string) {
	s := w.builder().String()
	return s[w.base:], s[w.start:]
}

// block appends s trimmed, after a separator when something precedes it;
// a block that trims to nothing adds nothing.
func (w *blockWriter) block(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	w.sep()
	w.write(s)
}

func (w *blockWriter) sep() {
	if w.len() > 0 {
		w.write(BlockSeparator)
	}
}

// directives appends the directive block. Its sections are joined by the
// block separator too, so each section is written as a block of its own.
func (w *blockWriter) directives(d Directives) {
	w.section("## Authority", "", d.Authority)
	w.section("## Boundaries", "", d.Boundaries)
	w.section("## Escalate when", escalateLead, d.Escalations)
}

const escalateLead = "Stop and emit an escalation request when any of these holds:"

// section writes heading, lead and "- line" items, trimmed like a block.
// A section starts with its heading, so trimming can only remove trailing
// space, and the "-" of the last item stops it: only the last line is
// trimmed (and a blank last line leaves a bare "-").
func (w *blockWriter) section(heading, lead string, lines []string) {
	if len(lines) == 0 {
		return
	}
	w.sep()
	w.write(heading)
	if lead != "" {
		w.write("\n")
		w.write(lead)
	}
	last := len(lines) - 1
	for _, l := range lines[:last] {
		w.write("\n- ")
		w.write(l)
	}
	if l := strings.TrimRightFunc(lines[last], unicode.IsSpace); l == "" {
		w.write("\n-")
	} else {
		w.write("\n- ")
		w.write(l)
	}
}
