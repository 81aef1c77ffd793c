package resolve

// InputRecord is one input a decision read, as its decision record lists
// it: discovery builds these once per configuration snapshot, and each
// decision lists the ones it read. It lives here, with
// the other types outcomes carry, so that discovery and the event codecs
// share one definition without importing each other.
type InputRecord struct {
	// Kind is one of the Input* constants.
	Kind string `json:"kind"`
	// Name is the input's name: a Role, Mode, pack, profile or skill name,
	// a file path for a placeholder file, a variable name for an
	// environment placeholder, the file name for the worker config.
	Name string `json:"name"`
	// Origin is the file it was read from ("builtin:…" when embedded);
	// for an environment placeholder, the file that names the variable.
	Origin string `json:"origin"`
	// Digest is "sha256:" and the hex digest of its bytes; nil for an
	// environment placeholder, whose value is never recorded in any form.
	Digest *string `json:"digest"`
}

// Kinds of decision inputs (InputRecord.Kind).
const (
	InputCatalogRole     = "catalog_role"
	InputCatalogMode     = "catalog_mode"
	InputPack            = "pack"
	InputMixin           = "mixin"
	InputProfile         = "profile"
	InputConfig          = "config"
	InputPreamble        = "preamble"
	InputSkill           = "skill"
	InputPlaceholderFile = "placeholder_file"
	InputPlaceholderEnv  = "placeholder_env"
)
