package discover

import (
	"fmt"

	"github.com/rolecall/rolecall/resolve"
)

var (
	roleKeys = []string{"name", "description", "emits", "artifact_defaults"}
	modeKeys = []string{"name", "description", "conflicts_with"}
)

// decodeCatalog decodes one catalog Markdown file of kind ("role" or
// "mode"): its name key is required and must equal the file stem, and
// field decodes each other key of keys. It returns the body.
func decodeCatalog(path, stem, kind string, keys []string, data []byte, field func(d *ydoc, f pair, key string) *Error) (string, *CatalogFile, *Error) {
	fail := func(err *Error) (string, *CatalogFile, *Error) {
		err.Subject = stem
		return "", nil, err
	}
	code := resolve.CodeCatalogInvalid
	if err := resolve.ValidateName(kind, stem); err != nil {
		return fail(&Error{Code: code, File: path, Line: 1, Message: "the file name is not a valid " + kind + " name: " + nameMsg(err)})
	}
	d, root, fm, err := markdownDoc(path, code, data)
	if err != nil {
		return fail(err)
	}
	if root == nil {
		return fail(&Error{Code: code, File: path, Line: 1, Key: "name", Message: `key "name": is required`})
	}
	cf := &CatalogFile{Origin: Origin{File: path}, KeyLines: map[string]int{"body": fm.bodyLine}}
	err = d.fields(root, "", keys, &cf.Extensions, cf.KeyLines, func(f pair, key string) *Error {
		if f.key == "name" {
			return d.stemName(f, key, stem)
		}
		return field(d, f, key)
	})
	if err != nil {
		return fail(err)
	}
	if _, ok := cf.KeyLines["name"]; !ok {
		return fail(d.errLine(d.off+1, "name", "is required and must equal the file name %q", stem))
	}
	return fm.body, cf, nil
}

// stemName decodes a name key, which must equal the file's stem.
func (d *ydoc) stemName(f pair, key, stem string) *Error {
	n, err := d.str(f.v, key)
	if err == nil && n != stem {
		err = d.errAt(f.v, key, "is %q but the file is named %q; they must match", n, stem)
	}
	return err
}

// decodeRole decodes catalog/roles/<stem>.md.
func decodeRole(path, stem string, data []byte) (resolve.Role, *CatalogFile, *Error) {
	r := resolve.Role{Name: stem}
	body, cf, err := decodeCatalog(path, stem, "role", roleKeys, data, func(d *ydoc, f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "description":
			r.Description, err = d.str(f.v, key)
		case "emits":
			r.Emits, err = d.names(f.v, key)
		case "artifact_defaults":
			r.ArtifactDefaults, err = d.mapping(f.v, key)
		}
		return err
	})
	if err != nil {
		return resolve.Role{}, nil, err
	}
	r.Body = body
	return r, cf, nil
}

// decodeMode decodes catalog/modes/<stem>.md.
func decodeMode(path, stem string, data []byte) (resolve.Mode, *CatalogFile, *Error) {
	m := resolve.Mode{Name: stem}
	body, cf, err := decodeCatalog(path, stem, "mode", modeKeys, data, func(d *ydoc, f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "description":
			m.Description, err = d.str(f.v, key)
		case "conflicts_with":
			m.ConflictsWith, err = d.names(f.v, key)
		}
		return err
	})
	if err != nil {
		return resolve.Mode{}, nil, err
	}
	m.Behaviors = body
	return m, cf, nil
}

// checkConflicts refuses conflicts_with entries that name no Mode of the
// catalog, or the Mode itself. Modes in broken (whose own file failed) are
// not reported again.
func checkConflicts(modes map[string]resolve.Mode, files map[string]*CatalogFile, broken map[string]bool) []*Error {
	var errs []*Error
	for _, name := range sortedKeys(modes) {
		m := modes[name]
		cf := files[name]
		for _, other := range m.ConflictsWith {
			msg := ""
			switch _, ok := modes[other]; {
			case other == name:
				msg = "a mode cannot conflict with itself"
			case broken[other]:
				continue
			case !ok:
				msg = fmt.Sprintf("names mode %q, which is not in the catalog", other)
			default:
				continue
			}
			errs = append(errs, &Error{
				Code: resolve.CodeCatalogInvalid, File: cf.Origin.File, Line: cf.KeyLines["conflicts_with"],
				Key: "conflicts_with", Subject: name, Message: `key "conflicts_with": ` + msg,
			})
		}
	}
	return errs
}
