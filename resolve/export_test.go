package resolve

// AppendJSON exposes the digest's JSON writer to the external tests.
func AppendJSON(b []byte, v any) ([]byte, bool) { return appendJSON(b, v, 0) }

// PlanKeepsState reports whether p finishes digests from a kept hash
// state (rather than hashing its whole encoding again).
func PlanKeepsState(p *Plan) bool { return p.state != nil }
