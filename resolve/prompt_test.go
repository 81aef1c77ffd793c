package resolve_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/resolve"
)

// The fixture architect's pack directive block, byte for byte.
const architectDirectives = "## Authority\n" +
	"- Choose the design.\n" +
	"- Record the decision.\n" +
	"\n" +
	"## Boundaries\n" +
	"- Do not write production code.\n" +
	"\n" +
	"## Escalate when\n" +
	"Stop and emit an escalation request when any of these holds:\n" +
	"- Requirements conflict."

func withRoleBody(role, body string) func(*resolve.Inputs) {
	return func(in *resolve.Inputs) {
		r := in.Catalog.Roles[role]
		r.Body = body
		in.Catalog.Roles[role] = r
	}
}

func extra(s string) func(*resolve.Inputs) {
	return withTask(func(t *resolve.TaskOverrides) { t.ExtraPrompt = ptr(s) })
}

func TestPromptShapes(t *testing.T) {
	cases := []struct {
		name     string
		ref      resolve.RoleRef
		in       resolve.Inputs
		body     string
		overlays []string
	}{
		{name: "casts: Role body, default Mode behaviors in order, then the directive block",
			ref: casts("architect"), in: inputs(),
			body:     "You are the architect.\n\nWork step by step.\n\nAssume the plan failed; explain why.\n\n" + architectDirectives,
			overlays: []string{}},
		{name: "casts: only the Role body when there are no Modes and no directives",
			ref: casts("scout"), in: inputs(),
			body: "You are the scout.", overlays: []string{}},
		{name: "casts+modes: requested Modes in the requested order",
			ref: casts("architect"), in: inputs(taskModes("premortem", "systematic")),
			body:     "You are the architect.\n\nAssume the plan failed; explain why.\n\nWork step by step.\n\n" + architectDirectives,
			overlays: []string{}},
		{name: "casts+modes: explicit empty Modes drop the default Mode blocks",
			ref: casts("architect"), in: inputs(taskModes()),
			body: "You are the architect.\n\n" + architectDirectives, overlays: []string{}},
		{name: "directives: only boundaries",
			ref: casts("reviewer"), in: inputs(),
			body: "You are the reviewer.\n\n## Boundaries\n- Do not merge.", overlays: []string{}},
		{name: "directives: only escalations, with the lead line",
			ref: casts("scout"), in: inputs(withEntry("scout", func(e *resolve.PackEntry) { e.Escalations = []string{"Lost.", "Out of budget."} })),
			body:     "You are the scout.\n\n## Escalate when\nStop and emit an escalation request when any of these holds:\n- Lost.\n- Out of budget.",
			overlays: []string{}},
		{name: "directives: an empty boundaries list between two sections adds nothing",
			ref: casts("scout"), in: inputs(withEntry("scout", func(e *resolve.PackEntry) {
				e.Authority, e.Boundaries, e.Escalations = []string{"Pick a path."}, []string{}, []string{"Lost."}
			})),
			body:     "You are the scout.\n\n## Authority\n- Pick a path.\n\n## Escalate when\nStop and emit an escalation request when any of these holds:\n- Lost.",
			overlays: []string{}},
		{name: "overlay: the profile body follows the directive block",
			ref: casts("architect"), in: inputs(withProfile(overlay("tuned", "architect")), taskModes()),
			body: "You are the architect.\n\n" + architectDirectives + "\n\nOverlay for architect.", overlays: []string{"Overlay for architect."}},
		{name: "overlay: the profile body is trimmed",
			ref: casts("scout"), in: inputs(withProfile(overlay("tuned", "scout", func(p *resolve.ExternalProfile) { p.Body = "\n\n  Tuned.\n  Really.  \n\n" }))),
			body: "You are the scout.\n\nTuned.\n  Really.", overlays: []string{"Tuned.\n  Really."}},
		{name: "overlay: a whitespace-only profile body adds no block and no overlay",
			ref: casts("scout"), in: inputs(withProfile(overlay("tuned", "scout", func(p *resolve.ExternalProfile) { p.Body = " \n\t\n" }))),
			body: "You are the scout.", overlays: []string{}},
		{name: "overlay+task: profile overlay, then the task extra_prompt",
			ref: casts("scout"), in: inputs(withProfile(overlay("tuned", "scout")), extra("Ship by Friday.")),
			body: "You are the scout.\n\nOverlay for scout.\n\nShip by Friday.", overlays: []string{"Overlay for scout.", "Ship by Friday."}},
		{name: "task overlay: casts with only an extra_prompt",
			ref: casts("reviewer"), in: inputs(extra("  Focus on tests.\n")),
			body: "You are the reviewer.\n\n## Boundaries\n- Do not merge.\n\nFocus on tests.", overlays: []string{"Focus on tests."}},
		{name: "task overlay: an empty extra_prompt \"\" has no rendered effect and selects nothing",
			ref: casts("scout"), in: inputs(extra("")),
			body: "You are the scout.", overlays: []string{}},
		{name: "task overlay: a whitespace-only extra_prompt is skipped",
			ref: casts("scout"), in: inputs(withProfile(overlay("tuned", "scout")), extra(" \n\n ")),
			body: "You are the scout.\n\nOverlay for scout.", overlays: []string{"Overlay for scout."}},
		{name: "blocks: a whitespace-only Mode behavior is skipped without separators",
			ref: casts("scout"), in: inputs(taskModes("blank", "systematic")),
			body: "You are the scout.\n\nWork step by step.", overlays: []string{}},
		{name: "blocks: each block is trimmed, inner blank lines are kept",
			ref: casts("scout"), in: inputs(withRoleBody("scout", "\n\n# Scout\n\n\nExplore.\n\n"), taskModes("systematic")),
			body: "# Scout\n\n\nExplore.\n\nWork step by step.", overlays: []string{}},
		{name: "blocks: an empty Role body starts the prompt at the first Mode",
			ref: casts("scout"), in: inputs(withRoleBody("scout", ""), taskModes("systematic")),
			body: "Work step by step.", overlays: []string{}},
		{name: "blocks: everything empty gives the empty prompt",
			ref: casts("scout"), in: inputs(withRoleBody("scout", "  ")),
			body: "", overlays: []string{}},
		{name: "replacement: the profile body verbatim (trimmed)",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.Body = "\nYou write.\n\nOnly that.\n" }))),
			body: "You write.\n\nOnly that.", overlays: []string{}},
		{name: "replacement: the task extra_prompt follows the body, and is no overlay",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter")), extra("Be brief.")),
			body: "You are ghostwriter, a raw identity.\n\nBe brief.", overlays: []string{}},
		{name: "replacement: an empty extra_prompt \"\" has no effect",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter")), extra("")),
			body: "You are ghostwriter, a raw identity.", overlays: []string{}},
		{name: "replacement: a whitespace-only body leaves only the task prompt",
			ref: external("ghostwriter"), in: inputs(withProfile(replacement("ghostwriter", func(p *resolve.ExternalProfile) { p.Body = "\n \n" })), extra("Be brief.")),
			body: "Be brief.", overlays: []string{}},
		{name: "replacement: a same-named Role's body, Modes and directives never appear",
			ref: external("architect"), in: inputs(withProfile(replacement("architect"))),
			body: "You are architect, a raw identity.", overlays: []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustResolve(t, tc.ref, tc.in)
			if got.PromptBody != tc.body {
				t.Errorf("prompt_body:\n got %q\nwant %q", got.PromptBody, tc.body)
			}
			if diff := cmp.Diff(tc.overlays, got.PromptOverlays); diff != "" {
				t.Errorf("prompt_overlays (-want +got):\n%s", diff)
			}
			checkAdapter(t, got)
		})
	}
}

// checkAdapter is the adapter test: for casts and overlay
// identities the Role-backed AgentSpec rebuilds prompt_body exactly, before
// any preamble; a replacement is rejected by the adapter.
func checkAdapter(t *testing.T, got resolve.ResolvedAgentSpec) {
	t.Helper()
	spec, err := materialize.AgentSpecFromResolved(&got)
	if got.PromptDisposition == resolve.PromptReplacement {
		if err == nil {
			t.Errorf("AgentSpecFromResolved accepted a replacement")
		}
		return
	}
	if err != nil {
		t.Fatalf("AgentSpecFromResolved: %v", err)
	}
	if rebuilt := spec.BuildSystemMessage(); rebuilt != got.PromptBody {
		t.Errorf("adapter rebuilt a different prompt:\n got %q\nwant %q", rebuilt, got.PromptBody)
	}
}

func TestDirectiveBlock(t *testing.T) {
	cases := []struct {
		name string
		d    resolve.Directives
		want string
	}{
		{"all three sections", resolve.Directives{
			Authority:   []string{"Choose the design.", "Record the decision."},
			Boundaries:  []string{"Do not write production code."},
			Escalations: []string{"Requirements conflict."},
		}, architectDirectives},
		{"only authority", resolve.Directives{Authority: []string{"a"}}, "## Authority\n- a"},
		{"only boundaries", resolve.Directives{Boundaries: []string{"b1", "b2"}}, "## Boundaries\n- b1\n- b2"},
		{"only escalations", resolve.Directives{Escalations: []string{"e"}},
			"## Escalate when\nStop and emit an escalation request when any of these holds:\n- e"},
		{"boundaries and escalations", resolve.Directives{Boundaries: []string{"b"}, Escalations: []string{"e"}},
			"## Boundaries\n- b\n\n## Escalate when\nStop and emit an escalation request when any of these holds:\n- e"},
		{"nil sections", resolve.Directives{}, ""},
		{"empty sections", resolve.Directives{Authority: []string{}, Boundaries: []string{}, Escalations: []string{}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve.DirectiveBlock(tc.d); got != tc.want {
				t.Errorf("DirectiveBlock:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestJoinBlocks(t *testing.T) {
	cases := []struct {
		name   string
		blocks []string
		want   string
	}{
		{"no blocks", nil, ""},
		{"one block", []string{"a"}, "a"},
		{"exactly two newlines between blocks", []string{"a", "b", "c"}, "a\n\nb\n\nc"},
		{"empty blocks add nothing", []string{"", "a", "", "", "b", ""}, "a\n\nb"},
		{"whitespace-only blocks add nothing", []string{" \n", "a", "\t\t", "b"}, "a\n\nb"},
		{"each block is trimmed", []string{"\n\na\n\n", "  b  "}, "a\n\nb"},
		{"inner whitespace is kept", []string{"a\n\n\nb", "c  d"}, "a\n\n\nb\n\nc  d"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := resolve.JoinBlocks(tc.blocks...); got != tc.want {
				t.Errorf("JoinBlocks(%q) = %q, want %q", tc.blocks, got, tc.want)
			}
		})
	}
}

// The rendering rules of docs/CONFIG.md read literally, as a reference model
// for the (single-buffer) renderer: trim every block, drop the empty ones,
// join with "\n\n"; a section is heading, optional lead, "- " items.
func refJoin(blocks ...string) string {
	var kept []string
	for _, b := range blocks {
		if b = strings.TrimSpace(b); b != "" {
			kept = append(kept, b)
		}
	}
	return strings.Join(kept, "\n\n")
}

func refSection(heading, lead string, lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	s := heading
	if lead != "" {
		s += "\n" + lead
	}
	for _, l := range lines {
		s += "\n- " + l
	}
	return s
}

func refDirectives(d resolve.Directives) string {
	return refJoin(
		refSection("## Authority", "", d.Authority),
		refSection("## Boundaries", "", d.Boundaries),
		refSection("## Escalate when", "Stop and emit an escalation request when any of these holds:", d.Escalations),
	)
}

// TestPropertyPromptMatchesSpec compares the renderer with the reference
// model on hostile text: blank and whitespace-only lines, Unicode spaces
// (NBSP, NEL), trailing whitespace and embedded newlines.
func TestPropertyPromptMatchesSpec(t *testing.T) {
	texts := []string{"", " ", "\n", "\t\n ", "\u00a0", "x", "x ", " x", "a\n\nb", "- item", "end\u0085", "\u2003wide\u2003", "#"}
	text := rapid.SampledFrom(texts)
	lines := rapid.OneOf(rapid.Just[[]string](nil), rapid.SliceOfN(text, 0, 4))
	rapid.Check(t, func(t *rapid.T) {
		d := resolve.Directives{Authority: lines.Draw(t, "authority"), Boundaries: lines.Draw(t, "boundaries"), Escalations: lines.Draw(t, "escalations")}
		if got, want := resolve.DirectiveBlock(d), refDirectives(d); got != want {
			t.Fatalf("DirectiveBlock:\n got %q\nwant %q", got, want)
		}
		blocks := rapid.SliceOfN(text, 0, 6).Draw(t, "blocks")
		if got, want := resolve.JoinBlocks(blocks...), refJoin(blocks...); got != want {
			t.Fatalf("JoinBlocks(%q):\n got %q\nwant %q", blocks, got, want)
		}
		body := text.Draw(t, "body")
		var modes []resolve.Mode
		behaviors := []string{body}
		for i, b := range rapid.SliceOfN(text, 0, 3).Draw(t, "behaviors") {
			modes = append(modes, resolve.Mode{Name: fmt.Sprint("m", i), Behaviors: b})
			behaviors = append(behaviors, b)
		}
		overlays := rapid.SliceOfN(text, 0, 2).Draw(t, "overlays")
		want := refJoin(append(append(behaviors, refDirectives(d)), overlays...)...)
		if got := resolve.CastsPrompt(body, modes, d, overlays...); got != want {
			t.Fatalf("CastsPrompt:\n got %q\nwant %q", got, want)
		}
	})
}
