package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/rolecall/rolecall/events"
)

// schemaCmd prints the embedded JSON Schemas. Each one resolves on its own
// (its $refs stay inside the document), so a validator needs no network:
// worker schema task > task.v1.json is all it takes.
type schemaCmd struct {
	JSON bool   `name:"json" help:"List the schemas as a JSON array of {name, id}."`
	Name string `arg:"" optional:"" help:"Schema to print: task, resolved or failed (or its file name, e.g. task.v1.json). Without it, list the schemas and their $id."`
}

func (c *schemaCmd) Run(_ context.Context, g *globals) error {
	if c.Name == "" {
		type entry struct {
			Name string `json:"name"`
			ID   string `json:"id"`
		}
		var list []entry
		for _, n := range events.SchemaNames() {
			list = append(list, entry{n, events.DefaultDataSchemaBase + n})
		}
		if c.JSON {
			return printJSON(g.stdout, list)
		}
		tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID")
		for _, e := range list {
			fmt.Fprintf(tw, "%s\t%s\n", e.Name, e.ID)
		}
		return tw.Flush()
	}
	if c.JSON {
		return usageErr("--json lists the schemas; leave out %q, or --json to print it", c.Name)
	}
	name := c.Name
	for _, n := range events.SchemaNames() {
		if name == strings.TrimSuffix(n, ".v1.json") || name == strings.TrimSuffix(n, ".json") {
			name = n
		}
	}
	b := events.Schema(name)
	if b == nil {
		return usageErr("schema %q: there is none; the schemas are %s", c.Name, strings.Join(events.SchemaNames(), ", "))
	}
	_, err := g.stdout.Write(b)
	return err
}
