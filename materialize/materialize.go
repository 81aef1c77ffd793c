package materialize

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rolecall/rolecall/resolve"
)

// AgentSpec is the Role-backed construction input for casts and overlay
// identities. It is built from a ResolvedAgentSpec without re-running any
// precedence: every value is copied from the resolved snapshot.
type AgentSpec struct {
	// Role and Modes are the resolved Profile (Role + ordered Modes).
	Role  resolve.Role
	Modes []resolve.Mode
	// Pack is the exact selected pack (name and digest) and Directives its
	// entry for Role; the materializer never consults another pack.
	Pack        resolve.PackRef
	Directives  resolve.Directives
	Model       string
	Effort      *string
	Tools       []string
	Permissions *resolve.PermissionPolicy
	Yolo        bool
	LionSystem  bool
	// ExtraPrompt is the resolved prompt_overlays joined by "\n\n".
	ExtraPrompt    string
	GrantEmissions bool
}

// BuildSystemMessage rebuilds the prompt body from the Profile, the pack
// directives and ExtraPrompt, without the preamble. For a spec made by
// AgentSpecFromResolved it equals the resolved prompt_body.
func (s *AgentSpec) BuildSystemMessage() string {
	return resolve.CastsPrompt(s.Role.Body, s.Modes, s.Directives, s.ExtraPrompt)
}

// RunEnvelope carries the provider/orchestration-only values that are not
// AgentSpec fields (ADR-0043 D6).
type RunEnvelope struct {
	Bypass           bool           `json:"bypass"`
	FastMode         bool           `json:"fast_mode"`
	ArtifactDefaults map[string]any `json:"artifact_defaults"`
	Timeout          *int           `json:"timeout"`
	ResumeOnTimeout  bool           `json:"resume_on_timeout"`
}

// Materialized is everything the provider layer needs to construct an agent.
type Materialized struct {
	// Spec is set for casts and overlay identities; nil for a replacement.
	Spec *AgentSpec
	// RawPrompt is the verbatim prompt_body of a replacement identity.
	RawPrompt string
	// SystemMessage is the final system message, preamble included when
	// lion_system is set.
	SystemMessage string
	Envelope      RunEnvelope
}

// Error is the materializer's typed failure (code materialize_failed).
type Error struct {
	Code    resolve.Code
	Message string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

func failed(format string, args ...any) *Error {
	return &Error{Code: resolve.CodeMaterializeFailed, Message: fmt.Sprintf(format, args...)}
}

// AgentSpecFromResolved is the pure adapter for casts and overlay
// identities; a replacement identity is rejected with materialize_failed.
// The AgentSpec shares no slice, map or pointer with r (ADR-0043: adapters
// keep the defensive-copy rule).
func AgentSpecFromResolved(r *resolve.ResolvedAgentSpec) (*AgentSpec, error) {
	if err := checkProfile(r); err != nil {
		return nil, err
	}
	role := *r.Role
	role.Emits = cloneStrings(role.Emits)
	role.ArtifactDefaults = resolve.CloneMap(role.ArtifactDefaults)
	modes := make([]resolve.Mode, len(r.ModeDefs))
	for i, m := range r.ModeDefs {
		m.ConflictsWith = cloneStrings(m.ConflictsWith)
		modes[i] = m
	}
	return &AgentSpec{
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

// checkProfile is AgentSpecFromResolved's validation: r is a casts or
// overlay identity that carries its own Profile (Role + Modes, in order).
func checkProfile(r *resolve.ResolvedAgentSpec) error {
	if r == nil {
		return failed("no resolved spec")
	}
	if r.PromptDisposition == resolve.PromptReplacement || r.Identity.Kind != resolve.IdentityCasts {
		return failed("identity %q is a replacement; it has no Role-backed AgentSpec", r.Identity.Name)
	}
	if r.Role == nil || len(r.ModeDefs) != len(r.Identity.Modes) {
		return failed("resolved spec for %q does not carry its Profile", r.Identity.Name)
	}
	// The Profile must be the one the identity names, in order; otherwise
	// the AgentSpec would describe an agent other than the resolved one.
	if r.Role.Name != r.Identity.Name {
		return failed("resolved spec names role %q but carries role %q", r.Identity.Name, r.Role.Name)
	}
	for i, m := range r.ModeDefs {
		if m.Name != r.Identity.Modes[i] {
			return failed("resolved spec for %q names mode %q at %d but carries %q", r.Identity.Name, r.Identity.Modes[i], i, m.Name)
		}
	}
	return nil
}

// rebuildsPrompt reports whether the AgentSpec that AgentSpecFromResolved
// makes from r would rebuild r.PromptBody (BuildSystemMessage), without
// making it: the text is compared as it is composed.
func rebuildsPrompt(r *resolve.ResolvedAgentSpec) bool {
	// BuildSystemMessage composes the overlays as one block, their join.
	// When each overlay is a non-empty trimmed block (always, from
	// Resolve), that block is the overlays as blocks of their own, and
	// nothing need be joined.
	overlays := r.PromptOverlays
	if slices.ContainsFunc(overlays, notBlock) {
		overlays = []string{strings.Join(r.PromptOverlays, resolve.BlockSeparator)}
	}
	return resolve.CastsPromptMatches(r.PromptBody, r.Role.Body, r.ModeDefs, r.Directives, overlays...)
}

func notBlock(s string) bool { return !resolve.IsBlock(s) }

// check is Materialize's validation of r, building nothing.
func check(r *resolve.ResolvedAgentSpec) error {
	if r == nil {
		return failed("no resolved spec")
	}
	switch r.PromptDisposition {
	case resolve.PromptReplacement:
		return nil
	case resolve.PromptCasts, resolve.PromptOverlay:
		if err := checkProfile(r); err != nil {
			return err
		}
		if !rebuildsPrompt(r) {
			return failed("rebuilt prompt for %q differs from the resolved prompt_body", r.Identity.Name)
		}
		return nil
	default:
		return failed("unknown prompt disposition %q", r.PromptDisposition)
	}
}

// SystemMessage prepends the preamble when lion_system is set:
// preamble + "\n\n" + body. An empty preamble adds nothing.
func SystemMessage(preamble string, lionSystem bool, body string) string {
	head := resolve.MessageHead(preamble, lionSystem)
	if head == "" {
		return body
	}
	return head + resolve.BlockSeparator + body
}

// Materialize converts a resolved spec into construction inputs. The
// preamble is an input (the caller reads it); nothing is looked up again.
// For casts and overlays it checks that the rebuilt prompt equals
// prompt_body, so a materializer can never silently reinterpret resolution.
func Materialize(r *resolve.ResolvedAgentSpec, preamble string) (Materialized, error) {
	if err := check(r); err != nil {
		return Materialized{}, err
	}
	m := Materialized{Envelope: RunEnvelope{
		Bypass:           r.Bypass,
		FastMode:         r.FastMode,
		ArtifactDefaults: resolve.CloneMap(r.ArtifactDefaults),
		Timeout:          clonePtr(r.Timeout),
		ResumeOnTimeout:  r.ResumeOnTimeout,
	}}
	if r.PromptDisposition == resolve.PromptReplacement {
		m.RawPrompt = r.PromptBody
	} else {
		spec, err := AgentSpecFromResolved(r)
		if err != nil {
			return Materialized{}, err
		}
		m.Spec = spec
	}
	m.SystemMessage = SystemMessage(preamble, r.LionSystem, r.PromptBody)
	return m, nil
}

// MaterializeSystemMessage is Materialize(r, preamble).SystemMessage, with
// the same error, for a caller that needs only the system message: it runs
// every check Materialize runs but builds neither the AgentSpec nor the
// envelope, so it allocates only the message (none when lion_system is
// off or the preamble is empty).
func MaterializeSystemMessage(r *resolve.ResolvedAgentSpec, preamble string) (string, error) {
	if err := check(r); err != nil {
		return "", err
	}
	return SystemMessage(preamble, r.LionSystem, r.PromptBody), nil
}

// MaterializeSystemMessageFrom is MaterializeSystemMessage(r, preamble)
// for a caller that holds the message resolve.ResolveWithPreamble composed
// with r: it runs the same checks and returns composed when it is exactly
// the system message, building nothing; any other text is not trusted and
// the message is built as MaterializeSystemMessage builds it.
func MaterializeSystemMessageFrom(r *resolve.ResolvedAgentSpec, preamble, composed string) (string, error) {
	if err := check(r); err != nil {
		return "", err
	}
	if isSystemMessage(composed, preamble, r.LionSystem, r.PromptBody) {
		return composed, nil
	}
	return SystemMessage(preamble, r.LionSystem, r.PromptBody), nil
}

// isSystemMessage reports whether msg == SystemMessage(preamble,
// lionSystem, body) without building the right-hand side. When body is
// msg's own tail, as ResolveWithPreamble makes it, comparing it is a
// pointer check.
func isSystemMessage(msg, preamble string, lionSystem bool, body string) bool {
	head := resolve.MessageHead(preamble, lionSystem)
	if head == "" {
		return msg == body
	}
	n := len(head) + len(resolve.BlockSeparator)
	return len(msg) == n+len(body) && strings.HasPrefix(msg, head) &&
		strings.HasPrefix(msg[len(head):], resolve.BlockSeparator) && msg[n:] == body
}

// cloneStrings copies a slice, keeping nil (absent) apart from empty.
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
