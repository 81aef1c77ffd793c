package discover

import (
	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

var (
	packKeys      = []string{"name", "roles"}
	packEntryKeys = []string{"model", "effort", "default_modes", "modes_allow", "active", "authority", "boundaries", "escalations"}
)

// decodePack decodes packs/<stem>.yaml. The returned pack is sealed.
func decodePack(path, stem string, data []byte) (*PackFile, *Error) {
	code := resolve.CodePackInvalid
	if err := resolve.ValidateName("pack", stem); err != nil {
		return nil, &Error{Code: code, File: path, Line: 1, Subject: stem, Message: "the file name is not a valid pack name: " + nameMsg(err)}
	}
	d := &ydoc{path: path, code: code}
	root, err := d.parse(data)
	if err != nil {
		err.Subject = stem
		return nil, err
	}
	pf := &PackFile{Origin: Origin{File: path}, KeyLines: map[string]int{}}
	pack := resolve.Pack{Name: stem, Roles: map[string]resolve.PackEntry{}}
	if root != nil {
		err = d.fields(root, "", packKeys, &pf.Extensions, pf.KeyLines, func(f pair, key string) *Error {
			switch f.key {
			case "name":
				n, err := d.str(f.v, key)
				if err == nil && n != stem {
					err = d.errAt(f.v, key, "is %q but the file is named %q; they must match", n, stem)
				}
				return err
			default: // roles
				return d.packRoles(f, key, &pack, pf)
			}
		})
		if err != nil {
			err.Subject = stem
			return nil, err
		}
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
		pf.KeyLines[rkey] = r.k.Line + d.off
		if r.v.Kind != yaml.MappingNode {
			return d.errAt(r.v, rkey, "must be a mapping (write {} for an entry with no settings), got %s", describeNode(r.v))
		}
		var e resolve.PackEntry
		var ext map[string]any
		err := d.fields(r.v, rkey, packEntryKeys, &ext, pf.KeyLines, func(f pair, key string) *Error {
			var err *Error
			switch f.key {
			case "model":
				e.Model, err = d.optStr(f.v, key)
			case "effort":
				e.Effort, err = d.optStr(f.v, key)
			case "default_modes":
				e.DefaultModes, err = d.names(f.v, key)
			case "modes_allow":
				e.ModesAllow, err = d.names(f.v, key)
			case "active":
				e.Active, err = d.optBool(f.v, key)
			case "authority":
				e.Authority, err = d.strs(f.v, key)
			case "boundaries":
				e.Boundaries, err = d.strs(f.v, key)
			case "escalations":
				e.Escalations, err = d.strs(f.v, key)
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
