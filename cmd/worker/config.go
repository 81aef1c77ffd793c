package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rolecall/rolecall/bundle"
	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/service"
	"github.com/rolecall/rolecall/telemetry"
)

// configCmd manages the config bundles workers started with
// --config-from nats serve (docs/FLEET.md).
type configCmd struct {
	Push     configPushCmd     `cmd:"" help:"Validate the config root, store it as a bundle and move current to it (compare-and-swap)."`
	Log      configLogCmd      `cmd:"" help:"List the bundle history, newest first."`
	Rollback configRollbackCmd `cmd:"" help:"Move current back to an earlier bundle (default: the parent of current's)."`
}

// configWriteFlags are the flags of the commands that move current.
type configWriteFlags struct {
	natsFlags
	Actor          string  `help:"Who is making the change (default $USER); recorded with the NATS user where known." env:"ROLECALL_ACTOR"`
	Message        string  `short:"m" help:"Why: recorded in the history."`
	ExpectRevision *uint64 `name:"expect-revision" help:"Refuse unless current is at this revision (0: no bundle yet)." placeholder:"N"`
	JSON           bool    `name:"json" help:"Print the record as JSON."`
}

func (f configWriteFlags) options(nc *nats.Conn) bundle.PushOptions {
	return bundle.PushOptions{Actor: cmp.Or(f.Actor, os.Getenv("USER")), User: natsUser(nc), Message: f.Message, ExpectRevision: f.ExpectRevision}
}

// natsUser is the user name the connection authenticated with: --user,
// else the user of a server URL with user:password (a URL with a user
// alone carries a token, which is no name to record).
func natsUser(nc *nats.Conn) string {
	if nc.Opts.User != "" {
		return nc.Opts.User
	}
	if u, err := url.Parse(nc.ConnectedUrl()); err == nil && u.User != nil {
		if _, ok := u.User.Password(); ok {
			return u.User.Username()
		}
	}
	return ""
}

type configPushCmd struct {
	configWriteFlags
	Replicas int `help:"Replicas of the buckets when push creates them." default:"1" env:"ROLECALL_REPLICAS"`
}

func (c *configPushCmd) Run(ctx context.Context, g *globals) error {
	if c.Replicas < 0 {
		return usageErr("--replicas must not be negative (got %d)", c.Replicas)
	}
	a, err := bundle.Pack(g.Root)
	if err != nil {
		return configFailure(g, err, c.JSON)
	}
	// Checked before connecting, so a bad root fails the same way offline.
	if _, err := bundle.Check(a); err != nil {
		return configFailure(g, err, c.JSON)
	}
	s, nc, err := openBundles(ctx, g, c.natsFlags, bundle.StoreOptions{Create: true, Replicas: c.Replicas})
	if err != nil {
		return err
	}
	defer nc.Close()
	res, err := s.Push(ctx, a, c.options(nc))
	if err != nil {
		return configFailure(g, err, c.JSON)
	}
	if c.JSON {
		return printJSON(g.stdout, res.Record)
	}
	if res.Unchanged {
		fmt.Fprintf(g.stdout, "unchanged: current already holds %s at revision %d\n", a.Digest, res.Record.Revision)
		return nil
	}
	fmt.Fprintf(g.stdout, "pushed revision %d: %s (%d files, parent revision %d)\n", res.Record.Revision, res.Record.Digest, res.Record.Files, res.Record.ParentRevision)
	return nil
}

type configLogCmd struct {
	natsFlags
	JSON bool `name:"json" help:"Print the records as a JSON array."`
}

func (c *configLogCmd) Run(ctx context.Context, g *globals) error {
	s, nc, err := openBundles(ctx, g, c.natsFlags, bundle.StoreOptions{})
	if err != nil {
		return configFailure(g, err, c.JSON)
	}
	defer nc.Close()
	recs, err := s.Log(ctx)
	if err != nil {
		return configFailure(g, err, c.JSON)
	}
	if c.JSON {
		if recs == nil {
			recs = []bundle.Record{}
		}
		return printJSON(g.stdout, recs)
	}
	cur, _ := s.Current(ctx) // only to mark current's row
	tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tTIME\tACTOR\tDIGEST\tPARENT\tMESSAGE")
	for _, r := range recs {
		mark := ""
		if r.Revision == cur.Revision {
			mark = " *"
		}
		if r.Error != nil {
			// A record that cannot be read: its revision and why, nothing
			// it would claim.
			fmt.Fprintf(tw, "%d%s\t-\t-\t-\t-\t%s\n", r.Revision, mark, printable(r.Error.Error()))
			continue
		}
		fmt.Fprintf(tw, "%d%s\t%s\t%s\t%s\t%d\t%s\n", r.Revision, mark, r.Time.Format(time.RFC3339), printable(r.Actor), short(r.Digest), r.ParentRevision, printable(r.Message))
	}
	return tw.Flush()
}

// printable is s for a table on a terminal: control characters (a
// newline, a tab, an escape sequence someone put in a message) are
// printed escaped, as in a Go string literal.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

func short(d string) string {
	if len(d) > len(bundle.DigestPrefix)+12 {
		return d[:len(bundle.DigestPrefix)+12]
	}
	return d
}

type configRollbackCmd struct {
	configWriteFlags
	To *uint64 `arg:"" optional:"" name:"REV" help:"The revision whose bundle to restore (default: the parent of current's)."`
}

func (c *configRollbackCmd) Run(ctx context.Context, g *globals) error {
	var to uint64 // 0: the parent of current's
	if c.To != nil {
		if *c.To == 0 {
			return usageErr("revision 0 is no bundle: revisions start at 1 (leave REV out to restore the parent of current's)")
		}
		to = *c.To
	}
	s, nc, err := openBundles(ctx, g, c.natsFlags, bundle.StoreOptions{})
	if err != nil {
		return configFailure(g, err, c.JSON)
	}
	defer nc.Close()
	rec, err := s.Rollback(ctx, to, c.options(nc))
	if err != nil {
		return configFailure(g, err, c.JSON)
	}
	if c.JSON {
		return printJSON(g.stdout, rec)
	}
	fmt.Fprintf(g.stdout, "rolled back: revision %d holds %s, the bundle of revision %d\n", rec.Revision, rec.Digest, rec.RollbackOf)
	return nil
}

func openBundles(ctx context.Context, g *globals, f natsFlags, o bundle.StoreOptions) (*bundle.Store, *nats.Conn, error) {
	log, err := newLogger(g)
	if err != nil {
		return nil, nil, err
	}
	nc, js, err := f.connectJS("rolecall-config", log)
	if err != nil {
		return nil, nil, err
	}
	s, err := bundle.Open(ctx, js, o)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return s, nc, nil
}

// configFailure prints a bundle error: each configuration problem on its
// own line (as validate prints them), then the error; exit 1. With
// --json, stdout gets one JSON object instead, {code, message, revision,
// problems}, each problem as validate --json prints it.
func configFailure(g *globals, err error, asJSON bool) error {
	var be *bundle.Error
	if !errors.As(err, &be) {
		return err
	}
	if asJSON {
		if err := printJSON(g.stdout, configError{Code: string(be.Code), Message: be.Error(), Revision: be.Revision, Problems: service.Problems(be.Problems)}); err != nil {
			return err
		}
	} else {
		for _, p := range be.Problems {
			fmt.Fprintln(g.stdout, p.Error())
		}
	}
	return &exitError{code: 1, err: be}
}

// configError is a bundle error as the config commands print it with --json.
type configError struct {
	Code     string            `json:"code"`
	Message  string            `json:"message"`
	Revision uint64            `json:"revision,omitzero"`
	Problems []service.Problem `json:"problems"`
}

// snapshotSource is what the worker decides and reports with: a config
// root on disk (*discover.Source) or the bundles in NATS (*bundle.Source).
type snapshotSource interface {
	Snapshot() *discover.Snapshot
	Err() error
}

// watchBundles starts following current for --config-from nats, writing
// each new snapshot's rosters to ROLECALL_ROSTER, and reports the
// revision and a degraded flag as gauges.
//
// A worker that may not create the buckets (--no-create) and starts before
// the first push does not fail: it waits, not ready, and binds them once
// an operator has pushed (bundle.Follow); the roster bucket is bound at
// the first swap for the same reason.
func watchBundles(ctx context.Context, js jetstream.JetStream, mp metric.MeterProvider, create bool, replicas int, log *slog.Logger) (*bundle.Source, func(), error) {
	var rw *bundle.RosterWriter
	src := bundle.Follow(ctx, js, bundle.StoreOptions{Create: create, Replicas: replicas}, bundle.WatchOptions{Logger: log, OnSwap: func(snap *discover.Snapshot) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var err error
		if rw == nil {
			rw, err = bundle.NewRosterWriter(wctx, js, replicas, create, log)
		}
		if err == nil {
			_, err = rw.Write(wctx, snap)
		}
		if err != nil {
			log.Warn("roster write failed; the next swap retries", "bucket", bundle.RosterBucket, "error", err)
		}
	}})
	reg, err := observeBundles(mp, src)
	if err != nil {
		return nil, nil, err
	}
	return src, func() { _ = reg.Unregister() }, nil
}

// Gauges of the bundle in service.
const (
	metricConfigRevision = "rolecall.config.revision"
	metricConfigDegraded = "rolecall.config.degraded"
)

func observeBundles(mp metric.MeterProvider, src *bundle.Source) (metric.Registration, error) {
	m := mp.Meter(telemetry.ScopeName)
	rev, err := m.Int64ObservableGauge(metricConfigRevision, metric.WithDescription("Revision of the config bundle in service (0 before the first)."))
	if err != nil {
		return nil, err
	}
	deg, err := m.Int64ObservableGauge(metricConfigDegraded, metric.WithDescription("1 when the newest config bundle was refused and an older one serves; its error code is an attribute."))
	if err != nil {
		return nil, err
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := src.Status()
		o.ObserveInt64(rev, int64(st.Revision))
		if st.Degraded {
			o.ObserveInt64(deg, 1, metric.WithAttributes(attribute.String(telemetry.AttrErrorCode, errCode(st.LastError))))
		} else {
			o.ObserveInt64(deg, 0)
		}
		return nil
	}, rev, deg)
}

func errCode(err error) string {
	var be *bundle.Error
	if errors.As(err, &be) {
		return string(be.Code)
	}
	if err != nil {
		return "internal"
	}
	return ""
}

// bundleReadyz is the /readyz status for --config-from nats: not ready
// until a bundle serves (503 with the reason); a refused newer bundle
// leaves the worker ready but degraded, with the refusal in the body.
func bundleReadyz(nc *nats.Conn, w *pipeline.Worker, src *bundle.Source, problems *configProblems) (map[string]any, bool) {
	st := src.Status()
	snap := src.Snapshot()
	status := map[string]any{
		"nats_connected":  nc.IsConnected(),
		"consumer_bound":  w.Ready(),
		"config_source":   discover.ConfigFromNATS,
		"config_revision": st.Revision,
		"config_bundle":   st.Digest,
		"degraded":        st.Degraded,
		"config_error":    nil,
		"snapshot":        nil,
		"snapshot_error":  nil,
		"problems":        []service.Problem{},
	}
	ok := nc.IsConnected() && w.Ready() && snap != nil
	if snap == nil {
		status["reason"] = "no config bundle in service yet: push one with worker config push"
	} else {
		status["snapshot"] = snap.Digest
		status["problems"] = service.Problems(problems.check(snap))
	}
	if st.LastError != nil {
		status["config_error"] = map[string]any{"code": errCode(st.LastError), "message": st.LastError.Error(), "revision": st.LastErrorRevision}
		status["snapshot_error"] = st.LastError.Error()
	}
	return status, ok
}

// uiSnapshots is the audit view's snapshot source: the worker's, except
// that before the first bundle serves it gives an empty configuration of
// revision 0 (explain then says the recorded decision's configuration is
// not the one in service), so a page opened early does not fail.
func uiSnapshots(src snapshotSource) pipeline.SnapshotSource {
	b, ok := src.(*bundle.Source)
	if !ok {
		return src
	}
	var empty *discover.Snapshot
	if a, err := bundle.Build(nil); err == nil {
		empty, _ = discover.LoadFS(a.FS, discover.Location{Root: "nats:" + bundle.Bucket, Source: discover.ConfigFromNATS}, discover.Options{})
	}
	return snapshotFunc(func() *discover.Snapshot {
		if s := b.Snapshot(); s != nil || empty == nil {
			return s
		}
		return empty
	})
}

type snapshotFunc func() *discover.Snapshot

func (f snapshotFunc) Snapshot() *discover.Snapshot { return f() }
