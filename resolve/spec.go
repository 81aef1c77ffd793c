package resolve

// IdentityKind says whether an identity is a catalog Role or a raw profile.
type IdentityKind string

const (
	IdentityCasts    IdentityKind = "casts"
	IdentityExternal IdentityKind = "external"
)

// Identity is the resolved identity: a casts Profile (Role + ordered Modes)
// or a raw external identity (no Modes).
type Identity struct {
	Kind  IdentityKind `json:"kind"`
	Name  string       `json:"name"`
	Modes []string     `json:"modes"`
}

// PackRef names the selected pack, its content digest and the indexes of
// its entry's variants that applied.
type PackRef struct {
	Name     string `json:"name"`
	Digest   string `json:"digest"`
	Variants []int  `json:"variants"`
}

// ModelTier records how a tier symbol became the model.
type ModelTier struct {
	// Symbol is the value as written: "tier:strong".
	Symbol string `json:"symbol"`
	// ResolvedVia is "tier" when the tier's own model was taken, else
	// "fallback:<tier>" for the tier that stood in.
	ResolvedVia string `json:"resolved_via"`
	// CatalogDigest identifies the model catalog the symbol expanded in.
	CatalogDigest string `json:"catalog_digest"`
}

// PromptDisposition is how the prompt was composed.
type PromptDisposition string

const (
	PromptCasts       PromptDisposition = "casts"
	PromptOverlay     PromptDisposition = "overlay"
	PromptReplacement PromptDisposition = "replacement"
)

// Source values recorded in Sources.
const (
	SourceTask                = "task"
	SourceExternalProfile     = "external_profile"
	SourcePack                = "pack"
	SourcePackVariant         = "pack_variant"
	SourceRuntimeDefault      = "runtime_default"
	SourceProviderDefault     = "provider_default"
	SourceNone                = "none"
	SourceRole                = "role"
	SourceWorkerDefault       = "worker_default"
	SourceCasts               = "casts"
	SourceExternalOverlay     = "external_overlay"
	SourceExternalReplacement = "external_replacement"
)

// Sources records where every effective value came from. It is a struct,
// not a map, so every key is always present.
type Sources struct {
	Identity         string `json:"identity"`
	Pack             string `json:"pack"`
	Model            string `json:"model"`
	Effort           string `json:"effort"`
	Modes            string `json:"modes"`
	Tools            string `json:"tools"`
	Permissions      string `json:"permissions"`
	Yolo             string `json:"yolo"`
	Bypass           string `json:"bypass"`
	FastMode         string `json:"fast_mode"`
	LionSystem       string `json:"lion_system"`
	Prompt           string `json:"prompt"`
	ArtifactDefaults string `json:"artifact_defaults"`
	Timeout          string `json:"timeout"`
	Active           string `json:"active"`
	Skills           string `json:"skills"`
}

// Fields returns the sources as ordered (key, value) pairs, in the order of
// the precedence table (used by explain output).
func (s Sources) Fields() [][2]string {
	return [][2]string{
		{"identity", s.Identity}, {"pack", s.Pack}, {"model", s.Model},
		{"effort", s.Effort}, {"modes", s.Modes}, {"tools", s.Tools},
		{"permissions", s.Permissions}, {"yolo", s.Yolo}, {"bypass", s.Bypass},
		{"fast_mode", s.FastMode}, {"lion_system", s.LionSystem},
		{"prompt", s.Prompt}, {"artifact_defaults", s.ArtifactDefaults},
		{"timeout", s.Timeout}, {"active", s.Active}, {"skills", s.Skills},
	}
}

// Diagnostic is a non-fatal compatibility fact; it never alters behavior.
type Diagnostic struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// DiagnosticLegacyProfileReplacement is the resolver's only diagnostic
// code.
const DiagnosticLegacyProfileReplacement = "legacy_profile_replacement"

// Directives is the selected pack entry's prompt directive block input.
type Directives struct {
	Authority   []string `json:"authority"`
	Boundaries  []string `json:"boundaries"`
	Escalations []string `json:"escalations"`
}

// ResolvedAgentSpec is the effective configuration with provenance. No
// slice, map or pointer in a result of Resolve is shared with its inputs
// or with another result.
type ResolvedAgentSpec struct {
	Identity          Identity          `json:"identity"`
	Pack              PackRef           `json:"pack"`
	Active            bool              `json:"active"`
	Model             string            `json:"model"`
	ModelTier         *ModelTier        `json:"model_tier"`
	Effort            *string           `json:"effort"`
	Tools             []string          `json:"tools"`
	Permissions       *PermissionPolicy `json:"permissions"`
	Yolo              bool              `json:"yolo"`
	Bypass            bool              `json:"bypass"`
	FastMode          bool              `json:"fast_mode"`
	LionSystem        bool              `json:"lion_system"`
	PromptDisposition PromptDisposition `json:"prompt_disposition"`
	PromptBody        string            `json:"prompt_body"`
	PromptOverlays    []string          `json:"prompt_overlays"`
	GrantRoleEmission bool              `json:"grant_role_emissions"`
	Emits             []string          `json:"emits"`
	ArtifactDefaults  map[string]any    `json:"artifact_defaults"`
	Timeout           *int              `json:"timeout"`
	ResumeOnTimeout   bool              `json:"resume_on_timeout"`
	Skills            []Skill           `json:"skills"`
	Sources           Sources           `json:"sources"`
	Diagnostics       []Diagnostic      `json:"diagnostics"`
	// Explain is each field's candidate chain, when Inputs.Explain asked
	// for it; not part of the event payload.
	Explain []FieldExplain `json:"-"`

	// The resolved Profile and the selected pack's directives, kept (as
	// copies) for the materializer so it never looks anything up again.
	// Not part of the event payload: Identity and Pack name them there.
	Role       *Role      `json:"-"`
	ModeDefs   []Mode     `json:"-"`
	Directives Directives `json:"-"`
}
