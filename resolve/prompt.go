package resolve

import (
	"strings"
	"unicode"
)

// BlockSeparator joins non-empty prompt blocks.
const BlockSeparator = "\n\n"

// JoinBlocks trims each block and joins the non-empty ones with exactly
// BlockSeparator; empty blocks add nothing.
func JoinBlocks(blocks ...string) string {
	n := 0
	for _, blk := range blocks {
		if t := strings.TrimSpace(blk); t != "" {
			n += len(BlockSeparator) + len(t)
		}
	}
	var b strings.Builder
	b.Grow(n) // one allocation for the whole prompt
	for _, blk := range blocks {
		if t := strings.TrimSpace(blk); t != "" {
			if b.Len() > 0 {
				b.WriteString(BlockSeparator)
			}
			b.WriteString(t)
		}
	}
	return b.String()
}

// DirectiveBlock renders a pack entry's directives: the non-empty sections
// among Authority, Boundaries and "Escalate when", joined by BlockSeparator.
func DirectiveBlock(d Directives) string {
	return JoinBlocks(
		section("## Authority", "", d.Authority),
		section("## Boundaries", "", d.Boundaries),
		section("## Escalate when", "Stop and emit an escalation request when any of these holds:", d.Escalations),
	)
}

// section renders a heading, an optional lead line and "- line" items; no
// lines, no section. Only the last line can carry trailing space into the
// block, and JoinBlocks trims it.
func section(heading, lead string, lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	n := len(heading) + len(lead) + 1
	for _, l := range lines {
		n += len(l) + 3
	}
	b.Grow(n)
	b.WriteString(heading)
	if lead != "" {
		b.WriteString("\n")
		b.WriteString(lead)
	}
	for _, l := range lines {
		b.WriteString("\n- ")
		b.WriteString(l)
	}
	return strings.TrimRightFunc(b.String(), unicode.IsSpace)
}

// CastsPrompt composes a casts or overlay prompt: the Role body, each
// Mode's behaviors in order, the directive block, then the overlays in
// order.
func CastsPrompt(roleBody string, modes []Mode, d Directives, overlays ...string) string {
	blocks := make([]string, 0, len(modes)+len(overlays)+2)
	blocks = append(blocks, roleBody)
	for _, m := range modes {
		blocks = append(blocks, m.Behaviors)
	}
	blocks = append(blocks, DirectiveBlock(d))
	blocks = append(blocks, overlays...)
	return JoinBlocks(blocks...)
}
