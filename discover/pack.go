package discover

import (
	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

var (
	packKeys      = []string{"name", "roles"}
	packEntryKeys = []string{"model", "effort", "default_modes", "modes_allow", "active", "authority", "boundaries", "escalations", "tiers", "skills", "variants"}
)

// decodePack decodes one pack file on its own: no config root (so no
// ${file:…}), no environment variable allowed and no mixin. The returned
// pack is sealed.
func decodePack(path, stem string, data []byte) (*PackFile, *Error) {
	o := newNodeOrigins()
	src := prepareSource(stem, path, data, &expander{}, o)
	if src.err != nil {
		return nil, src.err
	}
	c := &composer{o: o, lookup: func(*packSource, string) *packSource { return nil }}
	pf, _, err := c.pack(src)
	return pf, err
}

// pack composes src with its mixins and decodes the result by the strict
// rules of a single file; errors name the file and line where the
// offending text is written, mixins included; an error in a mixin's text
// says which mixin. layers is the linearization (mixins, then src).
func (c *composer) pack(src *packSource) (*PackFile, []*packSource, *Error) {
	root, layers, err := c.compose(src)
	if err == nil {
		var pf *PackFile
		if pf, err = decodePackTree(src.path, src.name, root, c.o); err == nil {
			for _, l := range layers[:len(layers)-1] {
				pf.Mixins = append(pf.Mixins, l.name)
			}
			pf.Files, pf.Placeholders, pf.FilesDigest = composedFiles(layers)
			return pf, layers, nil
		}
		err.Subject = src.name
	}
	for _, l := range layers {
		if l != src && l.path == err.File {
			err = brokenMixin(src, l.name, "", err)
			break
		}
	}
	return nil, layers, err
}

// decodePackTree decodes a composed pack tree (nil for an empty pack).
func decodePackTree(path, stem string, root *yaml.Node, o *nodeOrigins) (*PackFile, *Error) {
	d := &ydoc{path: path, code: resolve.CodePackInvalid, origins: o}
	pf := &PackFile{Origin: Origin{File: path}, KeyOrigins: map[string]Origin{}}
	pack := resolve.Pack{Name: stem, Roles: map[string]resolve.PackEntry{}}
	if root != nil {
		err := d.fields(root, "", packKeys, &pf.Extensions, nil, func(f pair, key string) *Error {
			switch f.key {
			case "name":
				return d.stemName(f, key, stem)
			default: // roles
				return d.packRoles(f, key, &pack, pf)
			}
		})
		if err != nil {
			return nil, err
		}
		keyOrigins(o, path, root, "", pf.KeyOrigins)
		pf.masks = expandedValues(o, root)
	}
	sealed := pack.Seal()
	pf.Pack = &sealed
	return pf, nil
}

func (d *ydoc) packRoles(f pair, key string, pack *resolve.Pack, pf *PackFile) *Error {
	roles, err := d.pairs(f.v, key)
	if err != nil {
		return err
	}
	for _, r := range roles {
		rkey := join(key, r.key)
		if verr := resolve.ValidateName("role", r.key); verr != nil {
			return d.errAt(r.k, rkey, "invalid role name: %s", nameMsg(verr))
		}
		if r.v.Kind != yaml.MappingNode {
			return d.errAt(r.v, rkey, "must be a mapping (write {} for an entry with no settings), got %s", describeNode(r.v))
		}
		var e resolve.PackEntry
		var ext map[string]any
		err := d.fields(r.v, rkey, packEntryKeys, &ext, nil, func(f pair, key string) *Error {
			var err *Error
			switch f.key {
			case "model":
				e.Model, err = opt(d.ident(f.v, key))
			case "tiers":
				e.Tiers, err = d.tierNames(f.v, key)
			case "skills":
				e.Skills, err = d.skillPatterns(f.v, key)
			case "effort":
				e.Effort, err = opt(d.ident(f.v, key))
			case "default_modes":
				e.DefaultModes, err = d.names(f.v, key)
			case "modes_allow":
				e.ModesAllow, err = d.names(f.v, key)
			case "active":
				e.Active, err = opt(d.boolean(f.v, key))
			case "authority":
				e.Authority, err = d.strs(f.v, key)
			case "boundaries":
				e.Boundaries, err = d.strs(f.v, key)
			case "escalations":
				e.Escalations, err = d.strs(f.v, key)
			case "variants":
				e.Variants, err = d.variants(f.v, key)
			}
			return err
		})
		if err != nil {
			return err
		}
		if ext != nil {
			if pf.RoleExtensions == nil {
				pf.RoleExtensions = map[string]map[string]any{}
			}
			pf.RoleExtensions[r.key] = ext
		}
		pack.Roles[r.key] = e
	}
	return nil
}
