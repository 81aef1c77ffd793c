package resolve

// AppendJSON exposes the digest's JSON writer to the external tests.
func AppendJSON(b []byte, v any) ([]byte, bool) { return appendJSON(b, v, 0) }
