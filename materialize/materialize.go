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
// AgentSpec fields (docs/CONFIG.md, materialization).
type RunEnvelope struct {
	Bypass           bool           `json:"bypass"`
	FastMode         bool           `json:"fast_mode"`
	ArtifactDefaults map[string]any `json:"artifact_defaults"`
	Timeout          *int           `json:"timeout"`
	ResumeOnTimeout  bool           `json:"resume_on_timeout"`
	// Skills are the selected skills (lexical), each with the digest of
	// its directory, so a run mounts exactly the content that was decided.
	Skills []resolve.Skill `json:"skills"`
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
// The AgentSpec shares no slice, map or pointer with r (adapters keep the
// defensive-copy rule).
func AgentSpecFromResolved(r *resolve.ResolvedAgentSpec) (*AgentSpec, error) {
	if err := checkProfile(r); err != nil {
		return nil, err
	}
	role := *r.Role
	role.Emits = slices.Clone(role.Emits)
	role.ArtifactDefaults = resolve.CloneMap(role.ArtifactDefaults)
	modes := make([]resolve.Mode, len(r.ModeDefs))
	for i, m := range r.ModeDefs {
		m.ConflictsWith = slices.Clone(m.ConflictsWith)
		modes[i] = m
	}
	return &AgentSpec{
		Role:  role,
		Modes: modes,
		Pack:  resolve.PackRef{Name: r.Pack.Name, Digest: r.Pack.Digest, Variants: slices.Clone(r.Pack.Variants)},
		Directives: resolve.Directives{
			Authority:   slices.Clone(r.Directives.Authority),
			Boundaries:  slices.Clone(r.Directives.Boundaries),
			Escalations: slices.Clone(r.Directives.Escalations),
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

// check is the validation SystemMessage and Materialize share: a spec
// Resolve could produce, whose carried Profile is the one its identity
// names. It rebuilds nothing.
func check(r *resolve.ResolvedAgentSpec) error {
	if r == nil {
		return failed("no resolved spec")
	}
	switch r.PromptDisposition {
	case resolve.PromptReplacement:
		return nil
	case resolve.PromptCasts, resolve.PromptOverlay:
		return checkProfile(r)
	default:
		return failed("unknown prompt disposition %q", r.PromptDisposition)
	}
}

// SystemMessage is the system message of r: the trimmed preamble, a
// blank line and prompt_body when lion_system is set and the preamble is
// not blank, else prompt_body itself. Like any empty block, an empty
// prompt_body adds nothing, not even the blank line. It fails with
// materialize_failed where Materialize would, and builds nothing else.
func SystemMessage(r *resolve.ResolvedAgentSpec, preamble string) (string, error) {
	if err := check(r); err != nil {
		return "", err
	}
	head := strings.TrimSpace(preamble)
	switch {
	case !r.LionSystem || head == "":
		return r.PromptBody, nil
	case r.PromptBody == "":
		return head, nil
	}
	return head + resolve.BlockSeparator + r.PromptBody, nil
}

// Materialize converts a resolved spec into construction inputs. The
// preamble is an input (the caller reads it); nothing is looked up again.
// For casts and overlays it checks that the AgentSpec rebuilds
// prompt_body. The worker publishes only the system message
// (SystemMessage) and does not rebuild the prompt per task; tests hold
// Resolve's every result to that equality.
func Materialize(r *resolve.ResolvedAgentSpec, preamble string) (Materialized, error) {
	msg, err := SystemMessage(r, preamble)
	if err != nil {
		return Materialized{}, err
	}
	m := Materialized{SystemMessage: msg, Envelope: RunEnvelope{
		Bypass:           r.Bypass,
		FastMode:         r.FastMode,
		ArtifactDefaults: resolve.CloneMap(r.ArtifactDefaults),
		Timeout:          clonePtr(r.Timeout),
		ResumeOnTimeout:  r.ResumeOnTimeout,
		Skills:           slices.Clone(r.Skills),
	}}
	if r.PromptDisposition == resolve.PromptReplacement {
		m.RawPrompt = r.PromptBody
		return m, nil
	}
	if m.Spec, err = AgentSpecFromResolved(r); err != nil {
		return Materialized{}, err
	}
	// A provider builds its agent from the AgentSpec, so the spec must
	// rebuild the resolved prompt exactly: a materializer never silently
	// reinterprets resolution.
	if m.Spec.BuildSystemMessage() != r.PromptBody {
		return Materialized{}, failed("rebuilt prompt for %q differs from the resolved prompt_body", r.Identity.Name)
	}
	return m, nil
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
