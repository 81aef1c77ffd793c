package resolve

// Candidate statuses in an explain chain.
const (
	// StatusSelected: this candidate's value is the field's value (for
	// the prompt, each block that went into it).
	StatusSelected = "selected"
	// StatusShadowed: it has a value, but a candidate of higher precedence
	// was selected.
	StatusShadowed = "shadowed"
	// StatusAbsent: its layer gives no value.
	StatusAbsent = "absent"
	// StatusExcluded: it has a value that a rule keeps out (an explicit
	// empty list above it, a profile's false flag, a pack entry a
	// replacement identity does not have).
	StatusExcluded = "excluded"
)

// Candidate is one layer's offer for a field.
type Candidate struct {
	// Source is the layer, as the sources object names it (task,
	// external_profile, pack, pack_variant, runtime_default, role, …).
	Source string `json:"source"`
	Status string `json:"status"`
	// Value is what the layer offers (absent: nil).
	Value any `json:"value"`
	// Reason says why the candidate has its status.
	Reason string `json:"reason"`
	// Key is where the value is written in its layer's input: a task
	// field ("overrides.model"), a profile key ("model"), a pack key
	// ("roles.architect.model", "roles.architect.variants[1].set.effort"),
	// a rolecall.yaml key ("defaults.model"), a catalog key. Discovery
	// maps it to a file and line.
	Key string `json:"key,omitzero"`
}

// FieldExplain is one field's decision: its value and source as the spec
// holds them, and every candidate in precedence order.
type FieldExplain struct {
	Field      string      `json:"field"`
	Value      any         `json:"value"`
	Source     string      `json:"source"`
	Candidates []Candidate `json:"candidates"`
}

// chain collects a resolution's explain chains; it does nothing unless on,
// so a resolution that does not explain allocates nothing for it.
type chain struct {
	on     bool
	fields []FieldExplain
}

func (c *chain) add(field string, value any, source string, cands ...Candidate) {
	if c.on {
		for i := range cands {
			cands[i].Value = cloneAny(cands[i].Value)
		}
		c.fields = append(c.fields, FieldExplain{Field: field, Value: cloneAny(value), Source: source, Candidates: cands})
	}
}

// cloneAny copies a value an explain chain holds, so a chain shares no
// memory with the inputs or the rest of the result.
func cloneAny(v any) any {
	if p, ok := v.(*PermissionPolicy); ok {
		return p.Clone()
	}
	return cloneValue(v)
}

// offer is one layer of a precedence chain: its source, its value (nil:
// absent) and where it is written.
type offer struct {
	src string
	v   any // nil when the layer gives nothing
	key string
	// excluded, when not "", keeps the offer out whatever its rank, for
	// this reason.
	excluded string
}

// rank turns offers, highest first, into candidates: the first offer with
// a value that no rule excludes is selected, later ones with a value are
// shadowed by it, and offers without one are absent.
func rank(offers ...offer) []Candidate {
	out := make([]Candidate, len(offers))
	winner := ""
	for i, o := range offers {
		c := Candidate{Source: o.src, Value: o.v, Key: o.key}
		switch {
		case o.excluded != "":
			c.Status, c.Reason = StatusExcluded, o.excluded
		case o.v == nil:
			c.Status, c.Reason = StatusAbsent, "not set"
		case winner == "":
			c.Status, c.Reason, winner = StatusSelected, "highest precedence that sets a value", o.src
		default:
			c.Status, c.Reason = StatusShadowed, "shadowed by "+winner
		}
		out[i] = c
	}
	return out
}

// val is a pointer's value for an offer (nil for nil).
func val[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// orNil is a list, map or policy as an offer's value: nil stays absent
// (a typed nil in an any would read as a value), empty is a value.
func orNil[T []string | map[string]any | *PermissionPolicy](v T) any {
	if v == nil {
		return nil
	}
	return v
}
