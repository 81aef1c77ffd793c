package materialize

import (
	"fmt"
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
func AgentSpecFromResolved(r *resolve.ResolvedAgentSpec) (*AgentSpec, error) {
	if r.PromptDisposition == resolve.PromptReplacement || r.Identity.Kind != resolve.IdentityCasts {
		return nil, failed("identity %q is a replacement; it has no Role-backed AgentSpec", r.Identity.Name)
	}
	if r.Role == nil || len(r.ModeDefs) != len(r.Identity.Modes) {
		return nil, failed("resolved spec for %q does not carry its Profile", r.Identity.Name)
	}
	role := *r.Role
	role.Emits = append([]string(nil), role.Emits...)
	modes := make([]resolve.Mode, len(r.ModeDefs))
	copy(modes, r.ModeDefs)
	return &AgentSpec{
		Role:  role,
		Modes: modes,
		Pack:  r.Pack,
		Directives: resolve.Directives{
			Authority:   append([]string(nil), r.Directives.Authority...),
			Boundaries:  append([]string(nil), r.Directives.Boundaries...),
			Escalations: append([]string(nil), r.Directives.Escalations...),
		},
		Model:          r.Model,
		Effort:         r.Effort,
		Tools:          append([]string{}, r.Tools...),
		Permissions:    r.Permissions.Clone(),
		Yolo:           r.Yolo,
		LionSystem:     r.LionSystem,
		ExtraPrompt:    strings.Join(r.PromptOverlays, resolve.BlockSeparator),
		GrantEmissions: r.GrantRoleEmission,
	}, nil
}

// SystemMessage prepends the preamble when lion_system is set:
// preamble + "\n\n" + body. An empty preamble adds nothing.
func SystemMessage(preamble string, lionSystem bool, body string) string {
	preamble = strings.TrimSpace(preamble)
	if !lionSystem || preamble == "" {
		return body
	}
	return preamble + resolve.BlockSeparator + body
}

// Materialize converts a resolved spec into construction inputs. The
// preamble is an input (the caller reads it); nothing is looked up again.
// For casts and overlays it checks that the rebuilt prompt equals
// prompt_body, so a materializer can never silently reinterpret resolution.
func Materialize(r *resolve.ResolvedAgentSpec, preamble string) (Materialized, error) {
	m := Materialized{Envelope: RunEnvelope{
		Bypass:           r.Bypass,
		FastMode:         r.FastMode,
		ArtifactDefaults: r.ArtifactDefaults,
		Timeout:          r.Timeout,
		ResumeOnTimeout:  r.ResumeOnTimeout,
	}}
	switch r.PromptDisposition {
	case resolve.PromptReplacement:
		m.RawPrompt = r.PromptBody
	case resolve.PromptCasts, resolve.PromptOverlay:
		spec, err := AgentSpecFromResolved(r)
		if err != nil {
			return Materialized{}, err
		}
		if got := spec.BuildSystemMessage(); got != r.PromptBody {
			return Materialized{}, failed("rebuilt prompt for %q differs from the resolved prompt_body", r.Identity.Name)
		}
		m.Spec = spec
	default:
		return Materialized{}, failed("unknown prompt disposition %q", r.PromptDisposition)
	}
	m.SystemMessage = SystemMessage(preamble, r.LionSystem, r.PromptBody)
	return m, nil
}
