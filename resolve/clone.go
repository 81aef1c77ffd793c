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

// Clone returns a deep copy of s: no list, map or pointer in it is s's,
// so either may be modified without changing the other.
func (s *ResolvedAgentSpec) Clone() ResolvedAgentSpec {
	c := *s
	c.Identity.Modes = clone(s.Identity.Modes)
	c.Effort = clonePtr(s.Effort)
	c.Tools = clone(s.Tools)
	c.Permissions = s.Permissions.Clone()
	c.PromptOverlays = clone(s.PromptOverlays)
	c.Emits = clone(s.Emits)
	c.ArtifactDefaults = cloneMap(s.ArtifactDefaults)
	c.Timeout = clonePtr(s.Timeout)
	c.Diagnostics = clone(s.Diagnostics)
	if s.Role != nil {
		r := *s.Role
		r.Emits = clone(r.Emits)
		r.ArtifactDefaults = cloneMap(r.ArtifactDefaults)
		c.Role = &r
	}
	c.ModeDefs = clone(s.ModeDefs)
	for i := range c.ModeDefs {
		c.ModeDefs[i].ConflictsWith = clone(c.ModeDefs[i].ConflictsWith)
	}
	d := s.Directives
	c.Directives = Directives{Authority: clone(d.Authority), Boundaries: clone(d.Boundaries), Escalations: clone(d.Escalations)}
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// strArena hands out disjoint pieces of one []string allocation, so a
// result's many small lists cost one allocation. Each piece is capped at
// its length: an append to it reallocates rather than writing into the
// next piece. The caller sizes it exactly; taking more panics.
type strArena []string

// take returns the next n elements (a non-nil list, also for n == 0).
func (a *strArena) take(n int) []string {
	out := (*a)[:n:n]
	*a = (*a)[n:]
	return out
}

// copy returns a copy of s carved from the arena, keeping nil apart from
// empty.
func (a *strArena) copy(s []string) []string {
	if s == nil {
		return nil
	}
	out := a.take(len(s))
	copy(out, s)
	return out
}
