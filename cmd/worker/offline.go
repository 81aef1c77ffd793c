package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
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
	"github.com/rolecall/rolecall/service"
)

type resolveCmd struct {
	Explain bool   `help:"Print one line per field: name, value, source, origin file (like git config --show-origin)."`
	Task    string `arg:"" optional:"" default:"-" help:"Task JSON file (the task data of docs/EVENTS.md), or - for stdin."`
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
	snap, err := discover.Load(g.Root, g.discoverOptions())
	if err != nil {
		return printFailure(g.stdout, pipeline.FailureFrom(&task.TaskID, resolve.StageDiscover, err))
	}
	handle := pipeline.Handle
	if c.Explain {
		handle = pipeline.HandleExplained
	}
	out := handle(snap, task, ref, nil)
	// A task file is no event, so the record has no outcome id.
	out.Decision().WorkerVersion = readBuildInfo().Version
	if out.Failure != nil {
		return printFailure(g.stdout, out.Failure)
	}
	if c.Explain {
		return printExplain(g.stdout, snap, &out, name)
	}
	return printJSON(g.stdout, out.Resolved)
}

// readInput reads a task file, or stdin for "-", up to 16 MiB: far over
// the decoder's limit, which then refuses it, and never without end (a
// device such as /dev/zero).
func readInput(path string, stdin io.Reader) ([]byte, string, error) {
	r, name := stdin, "stdin"
	if path != "-" && path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, path, err
		}
		defer f.Close()
		r, name = f, path
	}
	b, err := io.ReadAll(io.LimitReader(r, 16<<20))
	return b, name, err
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

// printFailure prints a typed failure (a failure event's data, or an
// explain error) as JSON and exits 1.
func printFailure(w io.Writer, f any) error {
	if err := printJSON(w, f); err != nil {
		return err
	}
	return errTypedFailure
}

// printExplain prints every effective field with its value, source and origin,
// read from the explain chains of the resolution that decided them: the
// origin is where the selected candidate is written (through mixins and
// variants for a pack's values).
func printExplain(w io.Writer, snap *discover.Snapshot, out *pipeline.Outcome, taskFile string) error {
	spec := &out.Resolved.ResolvedAgentSpec
	chains := make(map[string]resolve.FieldExplain, len(spec.Explain))
	for _, f := range spec.Explain {
		chains[f.Field] = f
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIELD\tVALUE\tSOURCE\tORIGIN")
	for _, kv := range spec.Sources.Fields() {
		field, source := kv[0], kv[1]
		var origin discover.Origin
		if f, ok := chains[field]; ok {
			source = f.Source
			origin = snap.FieldOrigin(out.Inputs, spec, f)
		}
		where := origin.String()
		if origin.File == "task" {
			where = taskFile
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", field, truncate(fieldValue(spec, field), 48), source, cmp.Or(where, "-"))
	}
	// How a tier symbol became the model: the symbol, resolved_via, and
	// where the catalog maps the tier that gave it.
	if t := spec.ModelTier; t != nil {
		tier := strings.TrimPrefix(t.Symbol, resolve.TierPrefix)
		if via, ok := strings.CutPrefix(t.ResolvedVia, "fallback:"); ok {
			tier = via
		}
		fmt.Fprintf(tw, "model_tier\t%s\t%s\t%s\n", t.Symbol, t.ResolvedVia, cmp.Or(snap.TierOrigin(tier).String(), "-"))
	}
	for _, sk := range spec.Skills {
		fmt.Fprintf(tw, "skill\t%s\t%s\t%s\n", sk.Name, sk.Source, cmp.Or(snap.SkillOrigin(sk.Name).String(), "-"))
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
		return fmt.Sprintf("%s, %d bytes", s.PromptDisposition, len(s.PromptBody))
	case "artifact_defaults":
		v = s.ArtifactDefaults
	case "timeout":
		v = s.Timeout
	case "active":
		v = s.Active
	case "skills":
		names := make([]string, len(s.Skills))
		for i, sk := range s.Skills {
			names[i] = sk.Name
		}
		v = names
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
	JSON bool   `name:"json" help:"Print a JSON array of objects: identity, description, the tiers it may be given and the skills its pack entry admits."`
}

func (c *rosterCmd) Run(_ context.Context, g *globals) error {
	// A usage error is found before any work, and is no task's failure.
	var re *resolve.ResolutionError
	if c.Pack != "" && errors.As(resolve.ValidateName("--pack", c.Pack), &re) {
		return usageErr("%s", re.Message)
	}
	snap, err := discover.Load(g.Root, g.discoverOptions())
	if err != nil {
		return printFailure(g.stdout, pipeline.FailureFrom(nil, resolve.StageDiscover, err))
	}
	if c.JSON {
		entries, err := snap.RosterEntries(c.Pack)
		if err != nil {
			return printFailure(g.stdout, pipeline.FailureFrom(nil, resolve.StageDiscover, err))
		}
		return printJSON(g.stdout, entries)
	}
	roster, err := snap.Roster(c.Pack)
	if err != nil {
		return printFailure(g.stdout, pipeline.FailureFrom(nil, resolve.StageDiscover, err))
	}
	var b bytes.Buffer
	for _, r := range roster {
		b.WriteString(r)
		b.WriteByte('\n')
	}
	_, err = g.stdout.Write(b.Bytes())
	return err
}

type validateCmd struct {
	JSON bool `name:"json" help:"Print one JSON object: {ok, problems, diagnostics}, each problem {file, line, code, key, subject, message}."`
}

// validate's exit codes: problems found is not "could not run".
const (
	exitProblems = 1 // the root was checked and has problems
	exitCannot   = 2 // the root could not be checked (or a usage error)
)

func (c *validateCmd) Run(_ context.Context, g *globals) error {
	rep, err := discover.Check(g.Root, g.discoverOptions())
	if err != nil {
		return &exitError{code: exitCannot, err: fmt.Errorf("validate: %w", err)}
	}
	if c.JSON {
		out := validateJSON{OK: len(rep.Problems) == 0, Problems: service.Problems(rep.Problems), Diagnostics: service.Problems(rep.Diagnostics)}
		if err := printJSON(g.stdout, out); err != nil {
			return err
		}
	} else {
		for _, p := range rep.Problems {
			fmt.Fprintln(g.stdout, p.Error())
		}
		for _, d := range rep.Diagnostics {
			fmt.Fprintln(g.stderr, "warning: "+d.Error())
		}
		if len(rep.Problems) == 0 {
			fmt.Fprintln(g.stdout, "ok: no problems")
		}
	}
	if len(rep.Problems) > 0 {
		return &exitError{code: exitProblems}
	}
	return nil
}

// validateJSON is validate --json's output.
type validateJSON struct {
	OK          bool              `json:"ok"`
	Problems    []service.Problem `json:"problems"`
	Diagnostics []service.Problem `json:"diagnostics"`
}
