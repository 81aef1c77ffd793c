package resolve

import "strings"

// BlockSeparator joins non-empty prompt blocks (DESIGN.md §3).
const BlockSeparator = "\n\n"

// JoinBlocks trims each block and joins the non-empty ones with exactly
// BlockSeparator; empty blocks add nothing.
func JoinBlocks(blocks ...string) string {
	var b strings.Builder
	for _, blk := range blocks {
		blk = strings.TrimSpace(blk)
		if blk == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(BlockSeparator)
		}
		b.WriteString(blk)
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

func section(heading, lead string, lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(heading)
	if lead != "" {
		b.WriteString("\n")
		b.WriteString(lead)
	}
	for _, l := range lines {
		b.WriteString("\n- ")
		b.WriteString(l)
	}
	return b.String()
}

// CastsPrompt composes a casts or overlay prompt: Role body, each Mode's
// behaviors in order, the directive block, then the overlays in order.
func CastsPrompt(roleBody string, modes []Mode, d Directives, overlays ...string) string {
	blocks := make([]string, 0, 2+len(modes)+len(overlays))
	blocks = append(blocks, roleBody)
	for _, m := range modes {
		blocks = append(blocks, m.Behaviors)
	}
	blocks = append(blocks, DirectiveBlock(d))
	blocks = append(blocks, overlays...)
	return JoinBlocks(blocks...)
}
