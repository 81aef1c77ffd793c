package discover

// Hooks for the external test package (fuzz targets drive the decoders
// directly, without a filesystem).
var (
	DecodeProfile = decodeProfile
	DecodePack    = decodePack
	DecodeConfig  = decodeConfig
)

// BuiltinErrors reports the embedded content's decoding problems.
func BuiltinErrors() []*Error { return builtins().errs }
