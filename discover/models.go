package discover

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

var modelsKeys = []string{"tiers", "fallback", "allow_fallback"}

// models decodes rolecall.yaml's models: block, the model catalog tier
// symbols expand against:
//
//	models:
//	  tiers: {strong: claude-opus-4-1, balanced: null, cheap: claude-haiku}
//	  fallback: [strong, balanced, cheap]
//	  allow_fallback: true
//
// tiers is required and names at least one tier; a tier's value is a
// literal model or null (no model now), never a tier symbol, so expansion
// is one step. fallback lists tiers of the catalog, each once. The result
// is sealed: its digest is what model_tier.catalog_digest records.
func (d *ydoc) models(n *yaml.Node, at string, lines map[string]int) (*resolve.ModelCatalog, *Error) {
	m := resolve.ModelCatalog{}
	var fallback *yaml.Node
	err := d.fields(n, at, modelsKeys, nil, lines, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "tiers":
			m.Tiers, err = d.tiers(f.v, key, lines)
		case "fallback":
			fallback = f.v
			m.Fallback, err = d.names(f.v, key)
		case "allow_fallback":
			m.AllowFallback, err = d.boolean(f.v, key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if m.Tiers == nil {
		return nil, d.errLine(lines[at], join(at, "tiers"), "is required: a model catalog maps each tier to a model or null")
	}
	for i, t := range m.Fallback {
		key := fmt.Sprintf("%s.fallback[%d]", at, i)
		if _, ok := m.Tiers[t]; !ok {
			return nil, d.errAt(fallback.Content[i], key, "tier %q is not in models.tiers (tiers: %s)", t, quoteNames(sortedKeys(m.Tiers)))
		}
		if slices.Contains(m.Fallback[:i], t) {
			return nil, d.errAt(fallback.Content[i], key, "tier %q is listed twice", t)
		}
	}
	if m.AllowFallback && len(m.Fallback) == 0 {
		return nil, d.errLine(lines[join(at, "allow_fallback")], join(at, "allow_fallback"), "is true but fallback lists no tier to fall back to")
	}
	sealed := m.Seal()
	return &sealed, nil
}

// tiers decodes models.tiers: tier name → literal model or null.
func (d *ydoc) tiers(n *yaml.Node, at string, lines map[string]int) (map[string]*string, *Error) {
	ps, err := d.pairs(n, at)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, d.errAt(n, at, "names no tier (leave models: out for no catalog)")
	}
	out := make(map[string]*string, len(ps))
	for _, p := range ps {
		key := join(at, p.key)
		if verr := resolve.ValidateName("tier", p.key); verr != nil {
			return nil, d.errAt(p.k, key, "invalid tier name: %s", nameMsg(verr))
		}
		lines[key] = p.k.Line + d.off
		if isNull(p.v) {
			out[p.key] = nil
			continue
		}
		model, err := d.str(p.v, key)
		if err != nil {
			return nil, d.errAt(p.v, key, "must be a model name or null, got %s", describeNode(p.v))
		}
		if err := d.unsafe(p.v, key, model); err != nil {
			return nil, err
		}
		if strings.HasPrefix(model, resolve.TierPrefix) {
			return nil, d.errAt(p.v, key, "%q is a tier symbol; a tier maps to a model name (or null), so that expansion takes one step", model)
		}
		out[p.key] = &model
	}
	return out, nil
}

// TierOrigin is where rolecall.yaml maps tier to its model
// (models.tiers.<tier>), or the zero Origin.
func (s *Snapshot) TierOrigin(tier string) Origin {
	line, ok := s.Config.KeyLines["models.tiers."+tier]
	if !ok {
		return Origin{}
	}
	return Origin{File: s.Config.Origin.File, Line: line}
}

// tierNames decodes a pack entry's tiers: the tiers the Role supports,
// each a valid name, each once. Whether the catalog holds them is
// Validate's business (and the resolver's per task).
func (d *ydoc) tierNames(n *yaml.Node, key string) ([]string, *Error) {
	names, err := d.names(n, key)
	if err != nil {
		return nil, err
	}
	for i, t := range names {
		if slices.Contains(names[:i], t) {
			return nil, d.errAt(n.Content[i], fmt.Sprintf("%s[%d]", key, i), "tier %q is listed twice", t)
		}
	}
	return names, nil
}
