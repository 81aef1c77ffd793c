package resolve

// Role is a built-in identity from the catalog.
type Role struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Body is the Role's Markdown prompt text.
	Body string `json:"body"`
	// Emits lists the emission types the Role may produce, in order.
	Emits []string `json:"emits"`
	// ArtifactDefaults is nil when the Role declares none.
	ArtifactDefaults map[string]any `json:"artifact_defaults"`
}

// Mode is a reasoning mode from the catalog.
type Mode struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Behaviors is the prompt text the Mode contributes.
	Behaviors string `json:"behaviors"`
	// ConflictsWith names Modes this one cannot be combined with. A pair
	// conflicts if either side lists the other.
	ConflictsWith []string `json:"conflicts_with"`
}

// Catalog is the set of built-in Roles and Modes, keyed by name.
type Catalog struct {
	Roles map[string]Role `json:"roles"`
	Modes map[string]Mode `json:"modes"`
	// Digest, when non-empty, is trusted as CatalogDigest(c) so that the
	// per-task inputs digest does not rehash the whole catalog. Set it only
	// through Seal.
	Digest string `json:"-"`
}

// PackEntry is a Pack's configuration for one Role: runtime config plus
// prompt directives, the model tiers the Role supports, the skills it
// admits, and variants chosen by the task's model.
type PackEntry struct {
	Model  *string `json:"model"`
	Effort *string `json:"effort"`
	// DefaultModes is used when the task names no Modes (nil = none).
	DefaultModes []string `json:"default_modes"`
	// ModesAllow restricts Modes when non-empty; empty means unrestricted.
	ModesAllow []string `json:"modes_allow"`
	// Active is nil when unset, which means true.
	Active      *bool    `json:"active"`
	Authority   []string `json:"authority"`
	Boundaries  []string `json:"boundaries"`
	Escalations []string `json:"escalations"`
	// Tiers lists the model tiers the Role supports; empty means any.
	Tiers []string `json:"tiers"`
	// Skills are glob patterns over skill names that admit skills (nil:
	// none).
	Skills []string `json:"skills"`
	// Variants are applied, in order, when their conditions hold.
	Variants []Variant `json:"variants"`
}

// Variant changes a pack entry for tasks whose selector matches When.
// Discovery compiles it; Resolve matches and applies it (step 4c).
type Variant struct {
	// When holds every condition; all must hold (an empty When always
	// matches).
	When []Condition `json:"when"`
	Set  VariantSet  `json:"set"`
}

// Condition keys: what a variant can be chosen by.
const (
	WhenModel = "model"
	WhenTier  = "tier"
	WhenPack  = "pack"
	WhenRole  = "role"
)

// Condition tests one key of the selector: equal to Value, or matching it
// as a path.Match pattern when Glob is set.
type Condition struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Glob  bool   `json:"glob"`
}

// VariantSet is what a variant sets; nil is "not set". It can never set
// the model or active.
type VariantSet struct {
	Effort       *string  `json:"effort"`
	DefaultModes []string `json:"default_modes"`
	ModesAllow   []string `json:"modes_allow"`
	Authority    []string `json:"authority"`
	Boundaries   []string `json:"boundaries"`
	Escalations  []string `json:"escalations"`
	Skills       []string `json:"skills"`
}

// TierPrefix marks a model value that names a tier of the model catalog
// ("tier:strong") instead of a model.
const TierPrefix = "tier:"

// ModelCatalog maps tier names to models (rolecall.yaml models:).
type ModelCatalog struct {
	// Tiers maps each tier to its model; nil is a tier with no model now.
	Tiers map[string]*string `json:"tiers"`
	// Fallback is the order in which tiers stand in for a tier without a
	// model, when AllowFallback is set.
	Fallback      []string `json:"fallback"`
	AllowFallback bool     `json:"allow_fallback"`
	// Digest, when non-empty, is trusted as ModelsDigest; see Catalog.Seal.
	Digest string `json:"-"`
}

// Skill is a skill that discovery found: its name, the source it came
// from, and the digest of its directory.
type Skill struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Digest string `json:"digest"`
}

// IsActive reports the entry's active flag with its default (true).
func (e PackEntry) IsActive() bool { return e.Active == nil || *e.Active }

// Pack is a named set of per-Role entries.
type Pack struct {
	Name  string               `json:"name"`
	Roles map[string]PackEntry `json:"roles"`
	// Digest, when non-empty, is trusted as PackDigest(p); see Catalog.Digest.
	Digest string `json:"-"`
}

// Disposition says how an external profile relates to the built-in Roles.
type Disposition string

const (
	// DispositionLegacy is a profile that declares no disposition.
	DispositionLegacy Disposition = ""
	// DispositionOverlay decorates a built-in Role (base_role required).
	DispositionOverlay Disposition = "overlay"
	// DispositionReplacement is a raw identity (base_role forbidden).
	DispositionReplacement Disposition = "replacement"
)

// ExternalProfile is a discovered Markdown profile, supplied explicitly.
type ExternalProfile struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Disposition Disposition `json:"disposition"`
	BaseRole    *string     `json:"base_role"`
	Model       *string     `json:"model"`
	Effort      *string     `json:"effort"`
	Yolo        *bool       `json:"yolo"`
	Bypass      *bool       `json:"bypass"`
	FastMode    *bool       `json:"fast_mode"`
	LionSystem  *bool       `json:"lion_system"`
	// ArtifactDefaults replaces the Role's whole mapping when non-nil.
	ArtifactDefaults map[string]any `json:"artifact_defaults"`
	// Timeout is a positive number of seconds, or nil for no deadline.
	Timeout         *int   `json:"timeout"`
	ResumeOnTimeout bool   `json:"resume_on_timeout"`
	Enabled         *bool  `json:"enabled"`
	Body            string `json:"body"`
	// Digest, when non-empty, is trusted as ProfileDigest; see
	// Catalog.Digest.
	Digest string `json:"-"`
}

// IsEnabled reports the profile's enabled flag with its default (true).
func (p *ExternalProfile) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// PermissionMode is the coarse mode of a PermissionPolicy.
type PermissionMode string

const (
	PermissionAllowAll PermissionMode = "allow_all"
	PermissionDenyAll  PermissionMode = "deny_all"
	PermissionRules    PermissionMode = "rules"
)

// PermissionPolicy maps tool names to glob patterns. The resolver only
// carries it (defensively copied); enforcement happens elsewhere.
type PermissionPolicy struct {
	Mode     PermissionMode      `json:"mode"`
	Allow    map[string][]string `json:"allow"`
	Deny     map[string][]string `json:"deny"`
	Escalate map[string][]string `json:"escalate"`
}

// TaskOverrides are the per-task values. A nil pointer or nil slice is
// absent; a non-nil empty slice is an explicit empty value.
type TaskOverrides struct {
	Model       *string           `json:"model"`
	Effort      *string           `json:"effort"`
	Modes       []string          `json:"modes"`
	ExtraPrompt *string           `json:"extra_prompt"`
	Tools       []string          `json:"tools"`
	Permissions *PermissionPolicy `json:"permissions"`
	Yolo        *bool             `json:"yolo"`
	Bypass      *bool             `json:"bypass"`
	FastMode    *bool             `json:"fast_mode"`
	LionSystem  *bool             `json:"lion_system"`
	// Skills are glob patterns that narrow the skills the pack entry
	// admits; nil admits them all, [] none.
	Skills []string `json:"skills"`
}

// RuntimeDefaults are the worker's own defaults, constructed explicitly by
// the caller (the resolver reads no ambient settings).
type RuntimeDefaults struct {
	Model       *string           `json:"model"`
	Effort      *string           `json:"effort"`
	Tools       []string          `json:"tools"`
	Permissions *PermissionPolicy `json:"permissions"`
	Yolo        bool              `json:"yolo"`
	Bypass      bool              `json:"bypass"`
	FastMode    bool              `json:"fast_mode"`
	LionSystem  bool              `json:"lion_system"`
}

// Policy holds resolver switches set by the deployment.
type Policy struct {
	// RejectLegacyProfiles turns a profile without disposition into
	// profile_disposition_required instead of a legacy replacement.
	RejectLegacyProfiles bool `json:"reject_legacy_profiles"`
}

// PackSelection records who chose the pack, for sources.pack.
type PackSelection string

const (
	PackFromTask          PackSelection = "task"
	PackFromWorkerDefault PackSelection = "worker_default"
)

// Inputs are everything Resolve reads. Catalog and Pack are required;
// Profile is the explicitly supplied external profile, if any.
type Inputs struct {
	Catalog       *Catalog         `json:"catalog"`
	Pack          *Pack            `json:"pack"`
	PackSelection PackSelection    `json:"pack_selection"`
	Profile       *ExternalProfile `json:"profile"`
	Task          TaskOverrides    `json:"task"`
	Defaults      RuntimeDefaults  `json:"defaults"`
	Policy        Policy           `json:"policy"`
	// Models is the model catalog tier symbols expand against (nil: none,
	// so every tier symbol is tier_unknown).
	Models *ModelCatalog `json:"models"`
	// Skills are every skill discovery found, by name (lexical).
	Skills []Skill `json:"skills"`
	// Explain asks Resolve to record each field's candidates
	// (ResolvedAgentSpec.Explain). It decides nothing.
	Explain bool `json:"-"`
}
