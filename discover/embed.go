package discover

import (
	"embed"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/rolecall/rolecall/resolve"
)

//go:embed builtin
var builtinFS embed.FS

// BuiltinPrefix starts the display path of every embedded file.
const BuiltinPrefix = "builtin:"

// fileRec is one file that went into a snapshot: its display path and
// content, hashed into Snapshot.Digest, and what it was read as (kind and
// name, a resolve.Input* kind) for the decision record's inputs.
type fileRec struct {
	path string
	data []byte
	kind string
	name string
}

// builtinSet is the embedded catalog, default pack and preamble, decoded
// once per process with the same strict decoders as files on disk. It is
// immutable and shared by every snapshot that uses it.
type builtinSet struct {
	catalog      *resolve.Catalog
	roleFiles    map[string]*CatalogFile
	modeFiles    map[string]*CatalogFile
	catalogFiles []fileRec
	pack         *PackFile
	packFile     fileRec
	preamble     string
	preambleFile fileRec
	errs         []*Error
}

var builtins = sync.OnceValue(loadBuiltins)

func loadBuiltins() *builtinSet {
	b := &builtinSet{roleFiles: map[string]*CatalogFile{}, modeFiles: map[string]*CatalogFile{}}
	cat := resolve.Catalog{Roles: map[string]resolve.Role{}, Modes: map[string]resolve.Mode{}}
	builtinCatalog(b, rolesDir, resolve.InputCatalogRole, decodeRole, cat.Roles, b.roleFiles)
	builtinCatalog(b, modesDir, resolve.InputCatalogMode, decodeMode, cat.Modes, b.modeFiles)
	b.errs = append(b.errs, checkConflicts(cat.Modes, b.modeFiles, nil)...)
	sealed := cat.Seal()
	b.catalog = &sealed

	const packRel = packDir + "/default" + packExt
	data, _ := builtinFS.ReadFile("builtin/" + packRel)
	b.packFile = fileRec{BuiltinPrefix + packRel, data, resolve.InputPack, DefaultPack}
	pf, err := decodePack(b.packFile.path, "default", data)
	if err != nil {
		b.errs = append(b.errs, err)
	}
	b.pack = pf

	data, _ = builtinFS.ReadFile("builtin/preamble.md")
	b.preambleFile = fileRec{BuiltinPrefix + "preamble.md", data, resolve.InputPreamble, "preamble.md"}
	if line, msg := checkText(data); msg != "" {
		b.errs = append(b.errs, &Error{Code: resolve.CodeConfigInvalid, File: b.preambleFile.path, Line: line, Message: msg})
	}
	b.preamble = string(data)
	return b
}

// builtinCatalog decodes the embedded catalog files of one kind into
// entries and files.
func builtinCatalog[T any](b *builtinSet, dir, kind string, decode catalogDecoder[T], entries map[string]T, files map[string]*CatalogFile) {
	ents, err := fs.ReadDir(builtinFS, "builtin/"+dir)
	if err != nil {
		b.errs = append(b.errs, &Error{Code: resolve.CodeCatalogInvalid, File: BuiltinPrefix + dir, Message: err.Error()})
		return
	}
	for _, e := range ents {
		stem, ok := strings.CutSuffix(e.Name(), mdExt)
		if !ok || e.IsDir() {
			continue
		}
		rel := path.Join(dir, e.Name())
		data, _ := builtinFS.ReadFile("builtin/" + rel)
		display := BuiltinPrefix + rel
		b.catalogFiles = append(b.catalogFiles, fileRec{display, data, kind, stem})
		v, cf, err := decode(display, stem, data)
		if err != nil {
			b.errs = append(b.errs, err)
			continue
		}
		entries[stem], files[stem] = v, cf
	}
}
