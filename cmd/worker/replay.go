package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rolecall/rolecall/bundle"
	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/replay"
)

// replay's exit codes (docs/AUDIT.md).
const (
	exitReplayEqual   = 0 // every decision replayed the same
	exitReplayNondet  = 1 // a decision differs under its own configuration
	exitReplayChanged = 3 // the configuration would change some decision
	exitReplayCannot  = 4 // nothing or not everything could be replayed
)

// replayHandle decides for replay; nil is pipeline.Handle. Tests set it
// to prove that a non-deterministic resolver fails replay.
var replayHandle replay.HandleFunc

// replayRevisions loads a bundle revision's snapshot for --from-bundle;
// nil is the bundle store's (bundle.Store.LoadRevision). Tests may set it.
var replayRevisions replay.RevisionLoader

type replayCmd struct {
	natsFlags
	Since      time.Duration `help:"Replay outcomes stored within this long before now (0: every outcome in the stream)."`
	Filter     string        `help:"Subject filter inside the specs stream (default: <prefix>.specs.>), e.g. rolecall.specs.resolved.architect."`
	Limit      int           `help:"Stop after this many outcomes (0: no limit)."`
	JSON       bool          `name:"json" help:"Print every result and the summary as one JSON document."`
	FromBundle bool          `name:"from-bundle" help:"Replay each decision made from a config bundle against the bundle revision it cites (from the bundle store) instead of --root; decisions made from files still use --root."`
	Timeout    time.Duration `help:"How long to wait for NATS before giving up." default:"10s"`
}

func (c *replayCmd) Run(ctx context.Context, g *globals) error {
	if c.Limit < 0 || c.Since < 0 {
		return usageErr("replay: --limit and --since must not be negative")
	}
	cannot := func(err error) error {
		var re *replay.Error
		if errors.As(err, &re) && c.JSON {
			_ = printJSON(g.stdout, re)
		}
		return &exitError{code: exitReplayCannot, err: fmt.Errorf("replay: %w", err)}
	}
	snap, err := discover.Load(g.Root, g.discoverOptions())
	if err != nil {
		return cannot(fmt.Errorf("config root %s: %w", g.Root, err))
	}
	log, err := newLogger(g)
	if err != nil {
		return err
	}
	nf := c.natsFlags.withConfig(snap.Config.NATS)
	nc, js, err := nf.connectJS("rolecall-replay", log)
	if err != nil {
		return cannot(err)
	}
	defer nc.Close()
	cfg := pipelineConfig(snap.Config.NATS)
	cfg.Prefix = nf.prefix()
	opt := replay.Options{Config: cfg, Filter: c.Filter, Limit: c.Limit, Snapshot: snap, Handle: replayHandle}
	if c.FromBundle {
		opt.Revisions = replayRevisions
		if opt.Revisions == nil {
			st, err := bundle.Open(ctx, js, bundle.StoreOptions{})
			if err != nil {
				return cannot(&replay.Error{Code: replay.CodeConfigUnavailable, Message: "bundle store: " + noJetStream(err).Error(), Details: map[string]any{}})
			}
			opt.Revisions = st.LoadRevision
		}
	}
	if c.Since > 0 {
		opt.Since = time.Now().Add(-c.Since)
	}
	p := &progress{w: g.stderr, every: 2 * time.Second, last: time.Now()}
	results := []replay.Result{} // --json prints [], not null, when there are none
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The whole run is bounded by the stream, not a timeout; only the
	// first answer from the broker is.
	first := time.AfterFunc(c.Timeout, cancel)
	sum, err := replay.Run(rctx, js, opt, func(r replay.Result) {
		first.Stop()
		p.tick(r)
		if c.JSON {
			results = append(results, r)
			return
		}
		writeResult(g.stdout, r)
	})
	first.Stop()
	if err != nil {
		if rctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("no answer from NATS within %s: %w", c.Timeout, err)
		}
		return cannot(err)
	}
	p.done(sum)
	if c.JSON {
		if err := printJSON(g.stdout, struct {
			Results []replay.Result `json:"results"`
			Summary replay.Summary  `json:"summary"`
		}{results, sum}); err != nil {
			return err
		}
	} else {
		writeSummary(g.stdout, sum)
	}
	switch {
	case sum.Nondeterministic > 0:
		return &exitError{code: exitReplayNondet, err: fmt.Errorf("replay: %d decision(s) differ under the configuration they were made with: a determinism bug", sum.Nondeterministic)}
	case sum.Invalid > 0:
		return &exitError{code: exitReplayCannot, err: fmt.Errorf("replay: %d stored outcome(s) could not be read", sum.Invalid)}
	case sum.Changed > 0:
		return &exitError{code: exitReplayChanged}
	}
	return nil
}

// writeResult prints one line per changed field, or one line for a
// result that is not a plain equal.
func writeResult(w io.Writer, r replay.Result) {
	who := strings.TrimSpace(r.TaskID + " " + r.Role)
	switch r.Status {
	case replay.StatusEqual:
	case replay.StatusChanged, replay.StatusNondeterministic:
		tag := ""
		if r.Status == replay.StatusNondeterministic {
			tag = "NONDETERMINISTIC "
		}
		for _, ch := range r.Changes {
			line := fmt.Sprintf("%s%s %s: %s → %s", tag, who, ch.Field, truncate(string(ch.Before), 60), truncate(string(ch.After), 60))
			if ch.Origin != "" {
				line += "  (" + ch.Origin + ")"
			}
			fmt.Fprintln(w, line)
		}
	default:
		fmt.Fprintf(w, "%s %s %s: %s\n", r.Status, r.OutcomeID, who, r.Reason)
	}
}

func writeSummary(w io.Writer, s replay.Summary) {
	fmt.Fprintf(w, "replayed %d: %d equal, %d changed, %d nondeterministic, %d skipped, %d invalid\n",
		s.Replayed, s.Equal, s.Changed, s.Nondeterministic, s.Skipped, s.Invalid)
	for _, k := range sortedCounts(s.ByField) {
		fmt.Fprintf(w, "  field %s: %d\n", k, s.ByField[k])
	}
	for _, k := range sortedCounts(s.ByCode) {
		fmt.Fprintf(w, "  code %s: %d\n", k, s.ByCode[k])
	}
}

// sortedCounts is m's keys, most frequent first, then by name.
func sortedCounts(m map[string]int) []string {
	return slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), strings.Compare(a, b))
	})
}

// progress prints a line to stderr at most every so often on a long run.
type progress struct {
	w     io.Writer
	every time.Duration
	last  time.Time
	n     int
	diff  int
}

func (p *progress) tick(r replay.Result) {
	p.n++
	if r.Status != replay.StatusEqual {
		p.diff++
	}
	if time.Since(p.last) >= p.every {
		p.last = time.Now()
		fmt.Fprintf(p.w, "replay: %d outcomes, %d not equal\n", p.n, p.diff)
	}
}

func (p *progress) done(s replay.Summary) {
	fmt.Fprintf(p.w, "replay: done, %d outcomes, %d not equal\n", s.Replayed, s.Replayed-s.Equal)
}
