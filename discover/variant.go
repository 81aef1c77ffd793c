package discover

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

// Variants are compiled here and matched by the resolver, because what
// selects them (the model, the tier symbol, the pack, the role) depends on
// the task.

var (
	variantKeys = []string{"when", "set"}
	whenKeys    = []string{resolve.WhenModel, resolve.WhenTier, resolve.WhenPack, resolve.WhenRole}
	// setKeys lists what a variant may set; model and active are listed
	// so that they get their own message.
	setKeys = []string{"effort", "default_modes", "modes_allow", "authority", "boundaries", "escalations", "skills", "model", "active"}
)

// variants decodes a role entry's variants: [{when: {...}, set: {...}}].
func (d *ydoc) variants(n *yaml.Node, key string) ([]resolve.Variant, *Error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errAt(n, key, "must be a list of {when, set} mappings, got %s", describeNode(n))
	}
	out := make([]resolve.Variant, 0, len(n.Content))
	for i, item := range n.Content {
		ikey := fmt.Sprintf("%s[%d]", key, i)
		if item.Kind != yaml.MappingNode {
			return nil, d.errAt(item, ikey, "must be a mapping with when and set, got %s", describeNode(item))
		}
		var v resolve.Variant
		err := d.fields(item, ikey, variantKeys, nil, nil, func(f pair, key string) *Error {
			var err *Error
			if f.key == "when" {
				v.When, err = d.when(f.v, key)
			} else {
				v.Set, err = d.variantSet(f.v, key)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// when decodes a variant's conditions. Each value is an exact string or
// {matches: <path.Match glob>}. Every condition must hold, so their order
// means nothing: they are kept in the order of whenKeys, and an empty
// when is nil like an absent one, so that neither the key order of the
// mapping nor {} against absent changes the pack's digest.
func (d *ydoc) when(n *yaml.Node, key string) ([]resolve.Condition, *Error) {
	var conds []resolve.Condition
	err := d.fields(n, key, whenKeys, nil, nil, func(f pair, key string) *Error {
		c := resolve.Condition{Key: f.key}
		if f.v.Kind == yaml.MappingNode {
			c.Glob = true
			found := false
			err := d.fields(f.v, key, []string{"matches"}, nil, nil, func(g pair, gkey string) *Error {
				s, err := d.ident(g.v, gkey)
				if err != nil {
					return err
				}
				if _, perr := path.Match(s, ""); perr != nil {
					return d.errAt(g.v, gkey, "invalid glob pattern %q (path.Match syntax)", s)
				}
				c.Value, found = s, true
				return nil
			})
			if err != nil {
				return err
			}
			if !found {
				return d.errAt(f.v, key, "must be a string or {matches: <glob>}")
			}
			conds = append(conds, c)
			return nil
		}
		s, err := d.str(f.v, key)
		if err != nil {
			return d.errAt(f.v, key, "must be a string or {matches: <glob>}, got %s", describeNode(f.v))
		}
		if err := d.unsafe(f.v, key, s); err != nil {
			return err
		}
		switch f.key {
		case resolve.WhenTier:
			if !strings.HasPrefix(s, resolve.TierPrefix) || len(s) == len(resolve.TierPrefix) {
				return d.errAt(f.v, key, "must be a tier symbol as a model names it, such as %q; got %q", resolve.TierPrefix+"cheap", s)
			}
		case resolve.WhenPack, resolve.WhenRole:
			if verr := resolve.ValidateName(f.key, s); verr != nil {
				return d.errAt(f.v, key, "invalid name: %s", nameMsg(verr))
			}
		}
		c.Value = s
		conds = append(conds, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(conds, func(a, b resolve.Condition) int {
		return slices.Index(whenKeys, a.Key) - slices.Index(whenKeys, b.Key)
	})
	return conds, nil
}

// variantSet decodes what a variant sets. It may not set the model (which
// is part of what selects variants) or active (a variant never takes a
// Role off the roster).
func (d *ydoc) variantSet(n *yaml.Node, key string) (resolve.VariantSet, *Error) {
	var s resolve.VariantSet
	err := d.fields(n, key, setKeys, nil, nil, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "model":
			err = d.errAt(f.k, key, "a variant cannot set the model: the model is part of what selects variants")
		case "active":
			err = d.errAt(f.k, key, "a variant cannot set active: whether a Role is on the roster does not depend on the task")
		case "effort":
			s.Effort, err = opt(d.ident(f.v, key))
		case "default_modes":
			s.DefaultModes, err = d.names(f.v, key)
		case "modes_allow":
			s.ModesAllow, err = d.names(f.v, key)
		case "authority":
			s.Authority, err = d.strs(f.v, key)
		case "boundaries":
			s.Boundaries, err = d.strs(f.v, key)
		case "escalations":
			s.Escalations, err = d.strs(f.v, key)
		case "skills":
			s.Skills, err = d.skillPatterns(f.v, key)
		}
		return err
	})
	return s, err
}
