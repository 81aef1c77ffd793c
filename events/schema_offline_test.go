package events_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/rolecall/rolecall/events"
)

// refuseLoader fails every fetch: a schema that compiles with it needs no
// network and no other file.
type refuseLoader struct{ fetched *[]string }

func (l refuseLoader) Load(url string) (any, error) {
	*l.fetched = append(*l.fetched, url)
	return nil, fmt.Errorf("offline: refusing to fetch %s", url)
}

// TestSchemasResolveOffline: each embedded schema compiles alone, with a
// loader that refuses every URL, and every $ref in it points into the
// same document. Its $id is the dataschema of the events it describes.
func TestSchemasResolveOffline(t *testing.T) {
	for _, name := range events.SchemaNames() {
		t.Run(name, func(t *testing.T) {
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(events.Schema(name)))
			if err != nil {
				t.Fatal(err)
			}
			if id := doc.(map[string]any)["$id"]; id != events.DefaultDataSchemaBase+name {
				t.Errorf("$id %v, want %s", id, events.DefaultDataSchemaBase+name)
			}
			walk(doc, func(key string, v any) {
				if ref, ok := v.(string); key == "$ref" && ok && !strings.HasPrefix(ref, "#") {
					t.Errorf("$ref %q leaves the document", ref)
				}
			})
			var fetched []string
			c := jsonschema.NewCompiler()
			c.UseLoader(refuseLoader{&fetched})
			if err := c.AddResource(events.DefaultDataSchemaBase+name, doc); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Compile(events.DefaultDataSchemaBase + name); err != nil {
				t.Errorf("does not compile offline: %v", err)
			}
			if len(fetched) > 0 {
				t.Errorf("compiling fetched %v", fetched)
			}
		})
	}
}

// TestSchemaDefsCopyTheTaskSchema: the outcome schemas carry copies of
// the task schema's definitions they use (so each resolves alone); a copy
// must stay equal to the task schema's.
func TestSchemaDefsCopyTheTaskSchema(t *testing.T) {
	defs := func(name string) map[string]any {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(events.Schema(name)))
		if err != nil {
			t.Fatal(err)
		}
		d, _ := doc.(map[string]any)["$defs"].(map[string]any)
		return d
	}
	task := defs(events.SchemaTask)
	for _, name := range []string{events.SchemaResolved, events.SchemaFailed} {
		copies := 0
		for k, v := range defs(name) {
			want, ok := task[k]
			if !ok {
				continue
			}
			copies++
			if !reflect.DeepEqual(v, want) {
				t.Errorf("%s $defs.%s differs from %s's", name, k, events.SchemaTask)
			}
		}
		if copies == 0 {
			t.Errorf("%s copies none of %s's definitions", name, events.SchemaTask)
		}
	}
}

func walk(v any, f func(key string, v any)) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			f(k, x)
			walk(x, f)
		}
	case []any:
		for _, x := range v {
			walk(x, f)
		}
	}
}
