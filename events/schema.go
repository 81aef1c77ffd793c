package events

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed schema/*.json
var schemaFS embed.FS

// SchemaNames lists the embedded JSON Schema files (draft 2020-12).
func SchemaNames() []string { return []string{SchemaTask, SchemaResolved, SchemaFailed} }

// Schema returns a copy of the embedded JSON Schema file name (e.g.
// "resolved.v1.json"), or nil if there is none. Its $id is
// DefaultDataSchemaBase + name, the dataschema of the events it describes.
func Schema(name string) []byte {
	b, err := fs.ReadFile(schemaFS, "schema/"+name)
	if err != nil {
		return nil
	}
	return b
}

var (
	compileOnce sync.Once
	compiled    map[string]*jsonschema.Schema
	compileErr  error
)

func compileSchemas() {
	c := jsonschema.NewCompiler()
	for _, name := range SchemaNames() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema(name)))
		if err == nil {
			err = c.AddResource(DefaultDataSchemaBase+name, doc)
		}
		if err != nil {
			compileErr = fmt.Errorf("events: schema %s: %w", name, err)
			return
		}
	}
	compiled = map[string]*jsonschema.Schema{}
	for _, name := range SchemaNames() {
		s, err := c.Compile(DefaultDataSchemaBase + name)
		if err != nil {
			compileErr = fmt.Errorf("events: compile schema %s: %w", name, err)
			return
		}
		compiled[name] = s
	}
}

// Validate checks JSON data against the named embedded schema. It is for
// tests and tools: the worker's decoder does not use it (DecodeTaskData
// is stricter and faster), and outcome encoding is tested against it.
func Validate(schemaName string, data []byte) error {
	compileOnce.Do(compileSchemas)
	if compileErr != nil {
		return compileErr
	}
	s, ok := compiled[schemaName]
	if !ok {
		return fmt.Errorf("events: no schema %q", schemaName)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("events: %s: data is not JSON: %w", schemaName, err)
	}
	return s.Validate(inst)
}
