package resolve

// clone copies a slice, preserving nil (absent) versus empty.
func clone[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}

// CloneMap deep-copies a JSON-like mapping (nested maps, lists and
// scalars), preserving nil. The materializer uses it too, so one copy rule
// serves both pure packages.
func CloneMap(m map[string]any) map[string]any { return cloneMap(m) }

// cloneMap deep-copies a JSON-like mapping (maps, slices, scalars).
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return cloneMap(v)
	case []any:
		if v == nil {
			return v
		}
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	case []string:
		return clone(v)
	default:
		return v
	}
}

func cloneRules(m map[string][]string) map[string][]string {
	if m == nil {
		return nil
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = clone(v)
	}
	return out
}

// Clone returns a deep copy of the policy (nil stays nil).
func (p *PermissionPolicy) Clone() *PermissionPolicy {
	if p == nil {
		return nil
	}
	return &PermissionPolicy{
		Mode:     p.Mode,
		Allow:    cloneRules(p.Allow),
		Deny:     cloneRules(p.Deny),
		Escalate: cloneRules(p.Escalate),
	}
}
