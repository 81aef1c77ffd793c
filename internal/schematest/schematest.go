package schematest

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rolecall/rolecall/events"
)

var compiled = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	for _, name := range events.SchemaNames() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(events.Schema(name)))
		if err == nil {
			err = c.AddResource(events.DefaultDataSchemaBase+name, doc)
		}
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range events.SchemaNames() {
		s, err := c.Compile(events.DefaultDataSchemaBase + name)
		if err != nil {
			return nil, fmt.Errorf("compile schema %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
})

// Validate checks data against the named embedded schema (e.g.
// events.SchemaResolved).
func Validate(schemaName string, data []byte) error {
	all, err := compiled()
	if err != nil {
		return err
	}
	s, ok := all[schemaName]
	if !ok {
		return fmt.Errorf("no schema %q", schemaName)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: data is not JSON: %w", schemaName, err)
	}
	return s.Validate(inst)
}
