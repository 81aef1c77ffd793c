package discover

// Hooks for the external test package (fuzz targets drive the decoders
// directly, without a filesystem).
var (
	DecodeProfile = decodeProfile
	DecodePack    = decodePack
)

// DecodeConfig decodes rolecall.yaml on its own: no config root (so no
// ${file:…}) and no environment.
func DecodeConfig(file string, data []byte) (Config, *Error) {
	return decodeConfig(file, data, &expander{lookupEnv: func(string) (string, bool) { return "", false }})
}

// BuiltinErrors reports the embedded content's decoding problems.
func BuiltinErrors() []*Error { return builtins().errs }

// DecodeSkill decodes a SKILL.md (file is its display path, dir the
// skill directory's name).
var DecodeSkill = decodeSkill

// SweepMatchesLoad reports whether a stat sweep of an unchanged root
// gives the fingerprint of the load that read it (else every sweep would
// reload).
func SweepMatchesLoad(root string) bool {
	l := load(root, Options{})
	fp, _ := sweep(root, l.scan, nil)
	return fp == l.fp
}

// CacheCounts reports how many files the Source's last load read and
// decoded (not served from its cache).
func CacheCounts(s *Source) (reads, decodes int) { return s.cache.reads, s.cache.decodes }
