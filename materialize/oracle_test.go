package materialize_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/resolve"
)

// oracleMaterialize is Materialize as it was before it compared the prompt
// while composing it and before MaterializeSystemMessage: it builds the
// AgentSpec, rebuilds the whole prompt and compares the strings. It stays
// here as the reference the faster paths must equal.
func oracleMaterialize(r *resolve.ResolvedAgentSpec, preamble string) (materialize.Materialized, error) {
	if r == nil {
		return materialize.Materialized{}, &materialize.Error{Code: resolve.CodeMaterializeFailed, Message: "no resolved spec"}
	}
	m := materialize.Materialized{Envelope: materialize.RunEnvelope{
		Bypass:           r.Bypass,
		FastMode:         r.FastMode,
		ArtifactDefaults: resolve.CloneMap(r.ArtifactDefaults),
		Timeout:          clonePtr(r.Timeout),
		ResumeOnTimeout:  r.ResumeOnTimeout,
	}}
	switch r.PromptDisposition {
	case resolve.PromptReplacement:
		m.RawPrompt = r.PromptBody
	case resolve.PromptCasts, resolve.PromptOverlay:
		spec, err := oracleAgentSpec(r)
		if err != nil {
			return materialize.Materialized{}, err
		}
		if got := spec.BuildSystemMessage(); got != r.PromptBody {
			return materialize.Materialized{}, oracleFailed("rebuilt prompt for %q differs from the resolved prompt_body", r.Identity.Name)
		}
		m.Spec = spec
	default:
		return materialize.Materialized{}, oracleFailed("unknown prompt disposition %q", r.PromptDisposition)
	}
	m.SystemMessage = materialize.SystemMessage(preamble, r.LionSystem, r.PromptBody)
	return m, nil
}

// oracleAgentSpec is AgentSpecFromResolved as it was before its checks
// moved into a function of their own.
func oracleAgentSpec(r *resolve.ResolvedAgentSpec) (*materialize.AgentSpec, error) {
	if r == nil {
		return nil, oracleFailed("no resolved spec")
	}
	if r.PromptDisposition == resolve.PromptReplacement || r.Identity.Kind != resolve.IdentityCasts {
		return nil, oracleFailed("identity %q is a replacement; it has no Role-backed AgentSpec", r.Identity.Name)
	}
	if r.Role == nil || len(r.ModeDefs) != len(r.Identity.Modes) {
		return nil, oracleFailed("resolved spec for %q does not carry its Profile", r.Identity.Name)
	}
	if r.Role.Name != r.Identity.Name {
		return nil, oracleFailed("resolved spec names role %q but carries role %q", r.Identity.Name, r.Role.Name)
	}
	for i, m := range r.ModeDefs {
		if m.Name != r.Identity.Modes[i] {
			return nil, oracleFailed("resolved spec for %q names mode %q at %d but carries %q", r.Identity.Name, r.Identity.Modes[i], i, m.Name)
		}
	}
	role := *r.Role
	role.Emits = cloneStrings(role.Emits)
	role.ArtifactDefaults = resolve.CloneMap(role.ArtifactDefaults)
	modes := make([]resolve.Mode, len(r.ModeDefs))
	for i, m := range r.ModeDefs {
		m.ConflictsWith = cloneStrings(m.ConflictsWith)
		modes[i] = m
	}
	return &materialize.AgentSpec{
		Role:  role,
		Modes: modes,
		Pack:  r.Pack,
		Directives: resolve.Directives{
			Authority:   cloneStrings(r.Directives.Authority),
			Boundaries:  cloneStrings(r.Directives.Boundaries),
			Escalations: cloneStrings(r.Directives.Escalations),
		},
		Model:          r.Model,
		Effort:         clonePtr(r.Effort),
		Tools:          append([]string{}, r.Tools...),
		Permissions:    r.Permissions.Clone(),
		Yolo:           r.Yolo,
		LionSystem:     r.LionSystem,
		ExtraPrompt:    strings.Join(r.PromptOverlays, resolve.BlockSeparator),
		GrantEmissions: r.GrantRoleEmission,
	}, nil
}

func oracleFailed(format string, args ...any) *materialize.Error {
	return &materialize.Error{Code: resolve.CodeMaterializeFailed, Message: fmt.Sprintf(format, args...)}
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append(make([]string, 0, len(s)), s...)
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Texts with the whitespace cases the renderer trims (Unicode spaces
// included) and text that survives trimming.
var oracleTexts = []string{"", " ", "\n", "\t\n ", "\u00a0", "x", "x ", " x", "a\n\nb", "- item", "end\u0085", "\u2003wide\u2003"}

// drawSpec makes a resolved spec that is either what Resolve would make or
// one tampered with in one of the ways a hand-built or edited spec can be:
// an edited body, Profile or overlays, untrimmed or empty overlays (which
// Resolve never makes, and which the AgentSpec joins into one block).
func drawSpec(t *rapid.T) *resolve.ResolvedAgentSpec {
	text := rapid.SampledFrom(oracleTexts)
	lines := rapid.OneOf(rapid.Just[[]string](nil), rapid.SliceOfN(text, 0, 3))
	names := []string{"m0", "m1", "m2"}
	var modes []resolve.Mode
	var modeNames []string
	for i := range rapid.IntRange(0, 3).Draw(t, "modes") {
		modes = append(modes, resolve.Mode{Name: names[i], Behaviors: text.Draw(t, "behaviors"), ConflictsWith: lines.Draw(t, "conflicts")})
		modeNames = append(modeNames, names[i])
	}
	if modeNames == nil {
		modeNames = []string{}
	}
	role := &resolve.Role{Name: "architect", Body: text.Draw(t, "role body"), Emits: lines.Draw(t, "emits")}
	if rapid.Bool().Draw(t, "artifact defaults") {
		role.ArtifactDefaults = map[string]any{"format": "md", "list": []any{"a"}}
	}
	d := resolve.Directives{Authority: lines.Draw(t, "authority"), Boundaries: lines.Draw(t, "boundaries"), Escalations: lines.Draw(t, "escalations")}
	var overlays []string
	if rapid.Bool().Draw(t, "raw overlays") {
		overlays = rapid.SliceOfN(text, 0, 3).Draw(t, "overlays")
	} else {
		// the resolver's shape: non-empty, trimmed
		overlays = rapid.SliceOfN(rapid.SampledFrom([]string{"x", "a\n\nb", "- item", "wide"}), 0, 2).Draw(t, "overlays")
	}
	if overlays == nil {
		overlays = []string{}
	}
	spec := &resolve.ResolvedAgentSpec{
		Identity:          resolve.Identity{Kind: resolve.IdentityCasts, Name: "architect", Modes: modeNames},
		Pack:              resolve.PackRef{Name: "team", Digest: "sha256:x"},
		Active:            true,
		Model:             "m",
		Effort:            drawOpt(t, "effort"),
		Tools:             lines.Draw(t, "tools"),
		Yolo:              rapid.Bool().Draw(t, "yolo"),
		Bypass:            rapid.Bool().Draw(t, "bypass"),
		FastMode:          rapid.Bool().Draw(t, "fast_mode"),
		LionSystem:        rapid.Bool().Draw(t, "lion_system"),
		PromptDisposition: rapid.SampledFrom([]resolve.PromptDisposition{resolve.PromptCasts, resolve.PromptOverlay, resolve.PromptReplacement, "hybrid"}).Draw(t, "disposition"),
		PromptOverlays:    overlays,
		GrantRoleEmission: true,
		ResumeOnTimeout:   rapid.Bool().Draw(t, "resume"),
		Role:              role,
		ModeDefs:          modes,
		Directives:        d,
	}
	if rapid.Bool().Draw(t, "permissions") {
		spec.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Allow: map[string][]string{"read": {"**"}}}
	}
	if rapid.Bool().Draw(t, "timeout") {
		spec.Timeout = new(int)
		*spec.Timeout = 900
	}
	if rapid.Bool().Draw(t, "artifacts") {
		spec.ArtifactDefaults = map[string]any{"format": "adr", "owners": []any{"a", map[string]any{"k": "v"}}}
	}
	spec.PromptBody = resolve.CastsPrompt(role.Body, modes, d, strings.Join(overlays, resolve.BlockSeparator))
	switch rapid.IntRange(0, 9).Draw(t, "tamper") {
	case 0:
		spec.PromptBody += text.Draw(t, "appended")
	case 1:
		if n := len(spec.PromptBody); n > 0 {
			spec.PromptBody = spec.PromptBody[:rapid.IntRange(0, n-1).Draw(t, "cut")]
		}
	case 2:
		spec.Role.Body = text.Draw(t, "other role body")
	case 3:
		if len(modes) > 1 {
			modes[0], modes[1] = modes[1], modes[0]
		}
	case 4:
		spec.ModeDefs = nil
	case 5:
		spec.Role = nil
	case 6:
		spec.Identity.Kind = resolve.IdentityExternal
	case 7:
		spec.Role.Name = "reviewer"
	case 8:
		// overlays composed as blocks of their own: equal to their join
		// only when each is a non-empty trimmed block
		spec.PromptBody = resolve.CastsPrompt(role.Body, modes, d, overlays...)
	}
	return spec
}

func drawOpt(t *rapid.T, label string) *string {
	if rapid.Bool().Draw(t, label) {
		return nil
	}
	s := rapid.SampledFrom([]string{"high", "low"}).Draw(t, label+" value")
	return &s
}

// TestPropertyMaterializeMatchesOracle: Materialize and
// MaterializeSystemMessage give exactly what the old Materialize gave —
// the same value, or the same error — for specs as Resolve makes them and
// for tampered ones.
func TestPropertyMaterializeMatchesOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		spec := drawSpec(t)
		pre := rapid.SampledFrom([]string{"", " \n", "PREAMBLE", "\nPRE\n"}).Draw(t, "preamble")
		want, wantErr := oracleMaterialize(spec, pre)
		got, err := materialize.Materialize(spec, pre)
		if diff := cmp.Diff(fmt.Sprint(wantErr), fmt.Sprint(err)); diff != "" {
			t.Fatalf("Materialize error (-oracle +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Materialize (-oracle +got):\n%s", diff)
		}
		msg, err := materialize.MaterializeSystemMessage(spec, pre)
		if diff := cmp.Diff(fmt.Sprint(wantErr), fmt.Sprint(err)); diff != "" {
			t.Fatalf("MaterializeSystemMessage error (-oracle +got):\n%s", diff)
		}
		if msg != want.SystemMessage {
			t.Fatalf("MaterializeSystemMessage = %q, oracle %q", msg, want.SystemMessage)
		}
		// A composed message is used only when it is the right one:
		// whatever the caller offers, the answer is the oracle's.
		offered := rapid.SampledFrom([]string{"", want.SystemMessage, want.SystemMessage + " ", "PREAMBLE\n\n" + spec.PromptBody, spec.PromptBody}).Draw(t, "composed")
		msg, err = materialize.MaterializeSystemMessageFrom(spec, pre, offered)
		if diff := cmp.Diff(fmt.Sprint(wantErr), fmt.Sprint(err)); diff != "" {
			t.Fatalf("MaterializeSystemMessageFrom error (-oracle +got):\n%s", diff)
		}
		if msg != want.SystemMessage {
			t.Fatalf("MaterializeSystemMessageFrom(%q) = %q, oracle %q", offered, msg, want.SystemMessage)
		}
		wantSpec, wantErr := oracleAgentSpec(spec)
		gotSpec, err := materialize.AgentSpecFromResolved(spec)
		if diff := cmp.Diff(fmt.Sprint(wantErr), fmt.Sprint(err)); diff != "" {
			t.Fatalf("AgentSpecFromResolved error (-oracle +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantSpec, gotSpec); diff != "" {
			t.Fatalf("AgentSpecFromResolved (-oracle +got):\n%s", diff)
		}
	})
	if _, err := materialize.MaterializeSystemMessage(nil, "PRE"); err == nil {
		t.Errorf("MaterializeSystemMessage(nil) succeeded")
	}
}

// TestMaterializeSystemMessageFromAllocations: given the message
// ResolveWithPreamble composed, the system-message path builds nothing.
func TestMaterializeSystemMessageFromAllocations(t *testing.T) {
	overlay, replacement := fixture(), fixture()
	overlay.Profile, overlay.Task.ExtraPrompt = tunedOverlay(), ptr("Decide by Friday.")
	replacement.Profile = ghostwriter()
	cases := []struct {
		name string
		ref  resolve.RoleRef
		in   resolve.Inputs
	}{
		{"casts", resolve.RoleName("architect"), fixture()},
		{"overlay", resolve.RoleName("architect"), overlay},
		{"replacement", resolve.ExternalRef{Name: "ghostwriter"}, replacement},
	}
	for _, c := range cases {
		for _, lion := range []bool{false, true} {
			c.in.Defaults.LionSystem = lion
			c.in.Task.LionSystem = &lion
			spec, composed, err := resolve.ResolveWithPreamble(c.ref, c.in, preamble)
			if err != nil {
				t.Fatal(err)
			}
			if spec.LionSystem != lion {
				t.Fatalf("%s: lion_system %v, want %v", c.name, spec.LionSystem, lion)
			}
			if n := testing.AllocsPerRun(100, func() { _, _ = materialize.MaterializeSystemMessageFrom(&spec, preamble, composed) }); n != 0 {
				t.Errorf("%s, lion_system %v: %v allocations, want 0", c.name, lion, n)
			}
		}
	}
}

// TestMaterializeSystemMessageAllocations: the system-message path builds
// nothing but the message.
func TestMaterializeSystemMessageAllocations(t *testing.T) {
	for name, spec := range map[string]resolve.ResolvedAgentSpec{"casts": casts(t), "overlay": overlaid(t), "replacement": replaced(t)} {
		for _, lion := range []bool{false, true} {
			spec.LionSystem = lion
			want := 0.0
			if lion {
				want = 1 // preamble + "\n\n" + body
			}
			if n := testing.AllocsPerRun(100, func() { _, _ = materialize.MaterializeSystemMessage(&spec, preamble) }); n != want {
				t.Errorf("%s, lion_system %v: %v allocations, want %v", name, lion, n, want)
			}
		}
	}
}
