package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

type resolveCmd struct {
	Explain bool   `help:"Print one line per field: name, value, source, origin file (like git config --show-origin)."`
	Task    string `arg:"" optional:"" default:"-" help:"Task JSON file (DESIGN.md §6 task data), or - for stdin."`
}

func (c *resolveCmd) Run(_ context.Context, g *globals) error {
	data, name, err := readInput(c.Task, g.stdin)
	if err != nil {
		return usageErr("%v", err)
	}
	// Decode before discovery, as the worker does, so every failure after
	// decoding names the task.
	task, ref, err := events.DecodeTaskData(data, events.DecodeOptions{})
	if err != nil {
		return printFailure(g.stdout, pipeline.FailureFrom(&task.TaskID, resolve.StageDecode, err))
	}
	snap, err := discover.Load(g.Root, discover.Options{})
	if err != nil {
		return printFailure(g.stdout, pipeline.FailureFrom(&task.TaskID, resolve.StageDiscover, err))
	}
	out := pipeline.Handle(snap, task, ref, nil)
	if out.Failure != nil {
		return printFailure(g.stdout, out.Failure)
	}
	if c.Explain {
		return explain(g.stdout, snap, &out, name)
	}
	return printJSON(g.stdout, out.Resolved)
}

func readInput(path string, stdin io.Reader) ([]byte, string, error) {
	if path == "-" || path == "" {
		b, err := io.ReadAll(io.LimitReader(stdin, 16<<20))
		return b, "stdin", err
	}
	b, err := os.ReadFile(path)
	return b, path, err
}

// printJSON writes v as indented JSON, encoded the way events encodes
// outcome data (no HTML escaping, nil vs empty preserved).
func printJSON(w io.Writer, v any) error {
	b, err := events.MarshalData(v, jsontext.Multiline(true), jsontext.WithIndent("  "))
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

func printFailure(w io.Writer, f *events.FailureData) error {
	if err := printJSON(w, f); err != nil {
		return err
	}
	return errTypedFailure
}

// explain prints every effective field with its value, source and origin.
func explain(w io.Writer, snap *discover.Snapshot, out *pipeline.Outcome, taskFile string) error {
	spec := &out.Resolved.ResolvedAgentSpec
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIELD\tVALUE\tSOURCE\tORIGIN")
	for _, kv := range spec.Sources.Fields() {
		field, source := kv[0], kv[1]
		origin := snap.Origin(out.Inputs, spec, field)
		where := origin.String()
		if origin.File == "task" {
			where = taskFile
		}
		if where == "" {
			where = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", field, truncate(fieldValue(spec, field), 48), source, where)
	}
	for _, d := range spec.Diagnostics {
		fmt.Fprintf(tw, "diagnostic\t%s\t%s\t-\n", truncate(d.Message, 48), d.Code)
	}
	return tw.Flush()
}

func fieldValue(s *resolve.ResolvedAgentSpec, field string) string {
	var v any
	switch field {
	case "identity":
		v = s.Sources.Identity
	case "pack":
		v = s.Pack.Name
	case "model":
		v = s.Model
	case "effort":
		if s.Effort == nil {
			return "null"
		}
		return *s.Effort
	case "modes":
		v = s.Identity.Modes
	case "tools":
		v = s.Tools
	case "permissions":
		if s.Permissions == nil {
			return "null"
		}
		return string(s.Permissions.Mode)
	case "yolo":
		v = s.Yolo
	case "bypass":
		v = s.Bypass
	case "fast_mode":
		v = s.FastMode
	case "lion_system":
		v = s.LionSystem
	case "prompt":
		v = fmt.Sprintf("%s, %d bytes", s.PromptDisposition, len(s.PromptBody))
		return v.(string)
	case "artifact_defaults":
		v = s.ArtifactDefaults
	case "timeout":
		v = s.Timeout
	case "active":
		v = s.Active
	}
	if str, ok := v.(string); ok {
		return str
	}
	b, err := events.MarshalData(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

type rosterCmd struct {
	Pack string `help:"Pack to list (default: the worker's default pack)."`
	JSON bool   `name:"json" help:"Print a JSON array."`
}

func (c *rosterCmd) Run(_ context.Context, g *globals) error {
	snap, err := discover.Load(g.Root, discover.Options{})
	if err != nil {
		return printFailure(g.stdout, pipeline.FailureFrom(nil, resolve.StageDiscover, err))
	}
	if c.Pack != "" {
		if err := resolve.ValidateName("pack", c.Pack); err != nil {
			return usageErr("--pack: %v", err)
		}
	}
	roster, err := snap.Roster(c.Pack)
	if err != nil {
		return printFailure(g.stdout, pipeline.FailureFrom(nil, resolve.StageDiscover, err))
	}
	if c.JSON {
		return printJSON(g.stdout, roster)
	}
	var b bytes.Buffer
	for _, r := range roster {
		b.WriteString(r)
		b.WriteByte('\n')
	}
	_, err = g.stdout.Write(b.Bytes())
	return err
}

type validateCmd struct{}

func (c *validateCmd) Run(_ context.Context, g *globals) error {
	problems := discover.Validate(g.Root)
	for _, p := range problems {
		fmt.Fprintln(g.stdout, p.Error())
	}
	if len(problems) > 0 {
		return &exitError{code: 1}
	}
	fmt.Fprintln(g.stderr, "ok: no problems")
	return nil
}
