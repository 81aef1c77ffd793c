package discover

import (
	"fmt"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

var (
	roleKeys = []string{"name", "description", "emits", "artifact_defaults"}
	modeKeys = []string{"name", "description", "conflicts_with"}
)

// catalogDoc splits and parses one catalog Markdown file and checks its
// required name key against the file stem.
func catalogDoc(path, stem, kind string, data []byte) (*ydoc, *yaml.Node, *frontmatter, *CatalogFile, *Error) {
	code := resolve.CodeCatalogInvalid
	if err := resolve.ValidateName(kind, stem); err != nil {
		return nil, nil, nil, nil, &Error{Code: code, File: path, Line: 1, Subject: stem, Message: "the file name is not a valid " + kind + " name: " + nameMsg(err)}
	}
	if line, msg := checkText(data); msg != "" {
		return nil, nil, nil, nil, &Error{Code: code, File: path, Line: line, Subject: stem, Message: msg}
	}
	fm, err := splitFrontmatter(path, code, data)
	if err != nil {
		err.Subject = stem
		return nil, nil, nil, nil, err
	}
	d := &ydoc{path: path, code: code, off: 1}
	root, err := d.parse(fm.yaml)
	if err != nil {
		err.Subject = stem
		return nil, nil, nil, nil, err
	}
	if root == nil {
		return nil, nil, nil, nil, &Error{Code: code, File: path, Line: 1, Key: "name", Subject: stem, Message: `key "name": is required`}
	}
	cf := &CatalogFile{Origin: Origin{File: path}, KeyLines: map[string]int{"body": fm.bodyLine}}
	return d, root, fm, cf, nil
}

// checkName enforces the catalog's required name key.
func (d *ydoc) checkName(cf *CatalogFile, stem string) *Error {
	if _, ok := cf.KeyLines["name"]; !ok {
		return d.errLine(d.off+1, "name", "is required and must equal the file name %q", stem)
	}
	return nil
}

func (d *ydoc) catalogName(f pair, key, stem string) *Error {
	n, err := d.str(f.v, key)
	if err == nil && n != stem {
		err = d.errAt(f.v, key, "is %q but the file is named %q; they must match", n, stem)
	}
	return err
}

// decodeRole decodes catalog/roles/<stem>.md.
func decodeRole(path, stem string, data []byte) (resolve.Role, *CatalogFile, *Error) {
	d, root, fm, cf, err := catalogDoc(path, stem, "role", data)
	if err != nil {
		return resolve.Role{}, nil, err
	}
	r := resolve.Role{Name: stem, Body: fm.body}
	err = d.fields(root, "", roleKeys, &cf.Extensions, cf.KeyLines, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "name":
			err = d.catalogName(f, key, stem)
		case "description":
			r.Description, err = d.str(f.v, key)
		case "emits":
			r.Emits, err = d.names(f.v, key)
		case "artifact_defaults":
			r.ArtifactDefaults, err = d.mapping(f.v, key)
		}
		return err
	})
	if err == nil {
		err = d.checkName(cf, stem)
	}
	if err != nil {
		err.Subject = stem
		return resolve.Role{}, nil, err
	}
	return r, cf, nil
}

// decodeMode decodes catalog/modes/<stem>.md.
func decodeMode(path, stem string, data []byte) (resolve.Mode, *CatalogFile, *Error) {
	d, root, fm, cf, err := catalogDoc(path, stem, "mode", data)
	if err != nil {
		return resolve.Mode{}, nil, err
	}
	m := resolve.Mode{Name: stem, Behaviors: fm.body}
	err = d.fields(root, "", modeKeys, &cf.Extensions, cf.KeyLines, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "name":
			err = d.catalogName(f, key, stem)
		case "description":
			m.Description, err = d.str(f.v, key)
		case "conflicts_with":
			m.ConflictsWith, err = d.names(f.v, key)
		}
		return err
	})
	if err == nil {
		err = d.checkName(cf, stem)
	}
	if err != nil {
		err.Subject = stem
		return resolve.Mode{}, nil, err
	}
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
