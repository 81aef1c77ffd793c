package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

type explainCmd struct {
	natsFlags
	JSON    bool          `name:"json" help:"Print the explain document (JSON; docs/OPERATIONS.md) instead of a table per field."`
	ID      string        `name:"id" help:"Explain the recorded outcome with this outcome id against the config root." placeholder:"OUTCOME-ID"`
	Task    string        `name:"task" help:"Explain the recorded outcome of the task event SOURCE ID (the event id is the argument)." placeholder:"SOURCE"`
	Timeout time.Duration `help:"How long --id and --task wait for NATS." default:"10s"`
	Arg     string        `arg:"" optional:"" name:"task-or-id" help:"Task JSON file (or - for stdin); with --task, the task event's id."`
}

func (c *explainCmd) Run(ctx context.Context, g *globals) error {
	recorded := c.ID != "" || c.Task != ""
	switch {
	case c.ID != "" && c.Task != "":
		return usageErr("explain: give --id or --task, not both")
	case c.ID != "" && c.Arg != "":
		return usageErr("explain: --id takes no task file")
	case c.Task != "" && c.Arg == "":
		return usageErr("explain: --task SOURCE ID needs the task event's id")
	case !recorded && c.Arg == "":
		return usageErr("explain: give a task file (- for stdin), --id OUTCOME-ID or --task SOURCE ID")
	}
	var (
		data []byte
		name string
	)
	if !recorded {
		var err error
		if data, name, err = readInput(c.Arg, g.stdin); err != nil {
			return usageErr("%v", err)
		}
	}
	snap, err := discover.Load(g.Root, g.discoverOptions())
	if err != nil {
		// A task file is decoded before discovery, as by the worker and
		// worker resolve: a task that does not decode fails with that,
		// and a discovery failure names the task.
		var taskID *string
		stage := resolve.StageDiscover
		if !recorded {
			task, _, derr := events.DecodeTaskData(data, events.DecodeOptions{})
			if taskID = &task.TaskID; derr != nil {
				stage, err = resolve.StageDecode, derr
			}
		}
		return printFailure(g.stdout, pipeline.FailureFrom(taskID, stage, err))
	}
	var doc *explain.Document
	if recorded {
		doc, err = c.recorded(ctx, g, snap)
		var xe *explain.Error
		if errors.As(err, &xe) {
			return printFailure(g.stdout, xe)
		}
		if err != nil {
			return err
		}
	} else {
		var out pipeline.Outcome
		doc, out = explain.TaskData(snap, data)
		// As in worker resolve: a task file is no event, so the record
		// has no outcome id, but it has this worker's version.
		if d := out.Decision(); d != nil {
			d.WorkerVersion = readBuildInfo().Version
		}
	}
	switch {
	case c.JSON:
		err = printJSON(g.stdout, doc)
	case doc.Failure != nil:
		if err = writeRecorded(g.stdout, doc); err == nil {
			err = printJSON(g.stdout, doc.Failure)
		}
	default:
		err = writeExplain(g.stdout, doc, name)
	}
	if err == nil && doc.Failure != nil {
		return errTypedFailure
	}
	return err
}

// recorded fetches the outcome --id or --task names and explains its
// recorded task against snap.
func (c *explainCmd) recorded(ctx context.Context, g *globals, snap *discover.Snapshot) (*explain.Document, error) {
	log, err := newLogger(g)
	if err != nil {
		return nil, err
	}
	nf := c.natsFlags.withConfig(snap.Config.NATS)
	nc, js, err := nf.connectJS("rolecall-explain", log)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	o, err := explain.Open(ctx, js, pipelineConfig(snap.Config.NATS))
	if err != nil {
		return nil, err
	}
	var so *explain.StoredOutcome
	if c.ID != "" {
		so, err = explain.Lookup(ctx, o, c.ID)
	} else {
		so, err = explain.LookupEvent(ctx, o, c.Task, c.Arg)
	}
	if err != nil {
		return nil, err
	}
	return explain.Stored(snap, so)
}

// writeRecorded prints what a document says about the recorded outcome it
// explains, if any: which one, and whether the configuration is the one
// it was decided with.
func writeRecorded(w io.Writer, d *explain.Document) error {
	r := d.Recorded
	if r == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "recorded  outcome %s (specs seq %d", r.OutcomeID, r.Seq)
	if r.Time != nil {
		fmt.Fprintf(&b, ", %s", *r.Time)
	}
	fmt.Fprintf(&b, "): %s", r.Outcome)
	if r.Code != nil {
		fmt.Fprintf(&b, " %s", *r.Code)
	}
	b.WriteString("\n")
	if r.SameConfig {
		fmt.Fprintf(&b, "config    %s, as recorded: the chain explains the recorded decision\n", d.Config.Digest)
	} else {
		fmt.Fprintf(&b, "config    %s differs from the recorded %s: the chain explains what would be decided now\n", d.Config.Digest, r.Config.Digest)
	}
	if len(r.Changed) > 0 {
		fmt.Fprintf(&b, "changed   %s\n", strings.Join(r.Changed, ", "))
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeExplain prints one block per field: the value, source and origin,
// then every candidate in precedence order.
func writeExplain(w io.Writer, d *explain.Document, taskFile string) error {
	if err := writeRecorded(w, d); err != nil {
		return err
	}
	where := func(o *discover.Origin) string {
		switch {
		case o == nil:
			return "-"
		case o.File == "task" && taskFile != "":
			return taskFile
		}
		return o.String()
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, f := range d.Fields {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s = %s  (%s, %s)\n", f.Field, truncate(showValue(f.Value), 60), f.Source, where(f.Origin))
		for _, c := range f.Candidates {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Status, c.Source, truncate(showValue(c.Value), 40), where(c.Origin), c.Reason)
		}
	}
	if t := d.ModelTier; t != nil {
		fmt.Fprintf(tw, "\nmodel_tier = %s  (%s, %s)\n", t.Symbol, t.ResolvedVia, where(t.Origin))
	}
	for _, sk := range d.Skills {
		fmt.Fprintf(tw, "skill = %s  (%s, %s)\n", sk.Name, sk.Source, where(sk.Origin))
	}
	for _, dg := range d.Diagnostics {
		fmt.Fprintf(tw, "diagnostic = %s  (%s)\n", dg.Code, dg.Message)
	}
	return tw.Flush()
}

// showValue renders a candidate's value as compact JSON; an absent one
// as "-".
func showValue(v any) string {
	if v == nil {
		return "-"
	}
	b, err := events.MarshalData(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
