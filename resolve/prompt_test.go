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

// checkAdapter is the ADR-0043 D6 adapter test: for casts and overlay
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

// The rendering rules of DESIGN.md §3 read literally, as a reference model
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
		if !resolve.CastsPromptMatches(want, body, modes, d, overlays...) {
			t.Fatalf("CastsPromptMatches(%q) = false for the prompt it composes", want)
		}
		// Any other text is a mismatch: one byte more, one less, one changed.
		other := []string{want + "x", want + "\n", "x" + want}
		if want != "" {
			other = append(other, want[:len(want)-1], want[1:], want[:len(want)/2]+"\x00"+want[len(want)/2+1:])
		}
		for _, o := range other {
			if resolve.CastsPromptMatches(o, body, modes, d, overlays...) {
				t.Fatalf("CastsPromptMatches(%q) = true; the prompt is %q", o, want)
			}
		}
	})
}

// TestPromptAllocations: composing a prompt is one allocation (a measuring
// pass sizes the builder), and checking one is none.
func TestPromptAllocations(t *testing.T) {
	modes := []resolve.Mode{{Name: "a", Behaviors: "  Step by step.\n"}, {Name: "b", Behaviors: "Assume it failed."}}
	d := resolve.Directives{Authority: []string{"Decide."}, Boundaries: []string{"No code.", "No merges.  "}, Escalations: []string{"Conflict."}}
	body := "\n# Role\n\nYou are the architect.\n"
	overlays := []string{"Prefer boring technology.", "Decide by Friday."}
	got := resolve.CastsPrompt(body, modes, d, overlays...)
	if n := testing.AllocsPerRun(100, func() { _ = resolve.CastsPrompt(body, modes, d, overlays...) }); n != 1 {
		t.Errorf("CastsPrompt: %v allocations, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _ = resolve.CastsPromptMatches(got, body, modes, d, overlays...) }); n != 0 {
		t.Errorf("CastsPromptMatches: %v allocations, want 0", n)
	}
}

// MessageHead is the rule of DESIGN.md's lion_system preamble: the trimmed
// preamble when lion_system is on, nothing when it is off or blank.
func TestMessageHead(t *testing.T) {
	cases := []struct {
		preamble string
		lion     bool
		want     string
	}{
		{"You are part of a fleet.", true, "You are part of a fleet."},
		{"\n  Padded.\n\n", true, "Padded."},
		{"You are part of a fleet.", false, ""},
		{"", true, ""},
		{" \n\t", true, ""},
	}
	for _, c := range cases {
		if got := resolve.MessageHead(c.preamble, c.lion); got != c.want {
			t.Errorf("MessageHead(%q, %v) = %q, want %q", c.preamble, c.lion, got, c.want)
		}
	}
}

// TestTextArena: a shared arena's texts equal those composed alone, stay
// as they were while later resolutions fill the block and move on to new
// ones, and cost far less than an allocation each.
func TestTextArena(t *testing.T) {
	role := resolve.Role{Name: "architect", Body: strings.Repeat("You decide how a system is structured. ", 60)}
	in := resolve.Inputs{
		Catalog: &resolve.Catalog{Roles: map[string]resolve.Role{"architect": role}, Modes: map[string]resolve.Mode{}},
		Pack:    &resolve.Pack{Name: "team", Roles: map[string]resolve.PackEntry{"architect": {Model: ptr("m")}}},
	}
	preamble := "You are part of a fleet."
	var arena resolve.TextArena
	// got is the arena's message; msg is a copy of the one composed alone.
	type text struct{ got, msg string }
	var texts []text
	for i := range 40 { // 40 × ~2.4 KB: three blocks and more
		in.Task.ExtraPrompt = ptr(fmt.Sprintf("Task %d: review the storage layer.", i))
		want, wantMsg, err := resolve.ResolveWithPreamble(resolve.RoleName("architect"), in, preamble)
		if err != nil {
			t.Fatal(err)
		}
		got, msg, err := resolve.ResolveShared(resolve.RoleName("architect"), in, preamble, &arena)
		if err != nil {
			t.Fatal(err)
		}
		if got.PromptBody != want.PromptBody || msg != wantMsg {
			t.Fatalf("task %d: the arena's prompt or message differs from one composed alone", i)
		}
		texts = append(texts, text{got: msg, msg: strings.Clone(wantMsg)})
		if got.PromptBody != msg[len(msg)-len(got.PromptBody):] {
			t.Fatalf("task %d: the prompt is not the message's tail", i)
		}
	}
	for i, tx := range texts {
		if tx.got != tx.msg {
			t.Errorf("task %d: its message changed after later resolutions used the arena", i)
		}
	}
	in.Task.ExtraPrompt = ptr("One more task.")
	n := testing.AllocsPerRun(200, func() {
		_, _, _ = resolve.ResolveShared(resolve.RoleName("architect"), in, preamble, &arena)
	})
	alone := testing.AllocsPerRun(200, func() {
		_, _, _ = resolve.ResolveShared(resolve.RoleName("architect"), in, preamble, nil)
	})
	// A block holds about a dozen of these messages, which share its one
	// allocation: close to one allocation fewer per resolution (at least
	// half of one, so that the block size may change).
	if n > alone-0.5 {
		t.Errorf("%.2f allocations per resolution with an arena, %.2f without: want almost one fewer", n, alone)
	}
}
