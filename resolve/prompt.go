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
	n := 0
	for _, blk := range blocks {
		n += len(blk) + len(BlockSeparator)
	}
	var w blockWriter
	w.b.Grow(n)
	for _, blk := range blocks {
		w.block(blk)
	}
	return w.b.String()
}

// DirectiveBlock renders a pack entry's directives: the non-empty sections
// among Authority, Boundaries and "Escalate when", joined by BlockSeparator.
func DirectiveBlock(d Directives) string {
	var w blockWriter
	w.b.Grow(directiveSize(d))
	w.directives(d)
	return w.b.String()
}

// CastsPrompt composes a casts or overlay prompt: Role body, each Mode's
// behaviors in order, the directive block, then the overlays in order.
func CastsPrompt(roleBody string, modes []Mode, d Directives, overlays ...string) string {
	n := len(roleBody) + directiveSize(d) + len(BlockSeparator)
	for _, m := range modes {
		n += len(m.Behaviors) + len(BlockSeparator)
	}
	for _, o := range overlays {
		n += len(o) + len(BlockSeparator)
	}
	var w blockWriter
	w.b.Grow(n)
	w.block(roleBody)
	for _, m := range modes {
		w.block(m.Behaviors)
	}
	w.directives(d)
	for _, o := range overlays {
		w.block(o)
	}
	return w.b.String()
}

// blockWriter renders blocks straight into one builder, so a prompt costs
// one allocation however many blocks it has. Callers Grow it to an upper
// bound first.
type blockWriter struct{ b strings.Builder }

// block appends s trimmed, after a separator when something precedes it;
// a block that trims to nothing adds nothing.
func (w *blockWriter) block(s string) {
	s = strings.TrimSpace(s)
	if s == "" {
		return
	}
	w.sep()
	w.b.WriteString(s)
}

func (w *blockWriter) sep() {
	if w.b.Len() > 0 {
		w.b.WriteString(BlockSeparator)
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
	w.b.WriteString(heading)
	if lead != "" {
		w.b.WriteString("\n")
		w.b.WriteString(lead)
	}
	last := len(lines) - 1
	for _, l := range lines[:last] {
		w.b.WriteString("\n- ")
		w.b.WriteString(l)
	}
	if l := strings.TrimRightFunc(lines[last], unicode.IsSpace); l == "" {
		w.b.WriteString("\n-")
	} else {
		w.b.WriteString("\n- ")
		w.b.WriteString(l)
	}
}

// directiveSize bounds the rendered directive block, separators included.
func directiveSize(d Directives) int {
	n := 0
	for i, lines := range [][]string{d.Authority, d.Boundaries, d.Escalations} {
		if len(lines) == 0 {
			continue
		}
		n += len(BlockSeparator) + len("## Escalate when")
		if i == 2 {
			n += 1 + len(escalateLead)
		}
		for _, l := range lines {
			n += len("\n- ") + len(l)
		}
	}
	return n
}
