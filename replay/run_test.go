package replay_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/replay"
)

// TestRunAgainstBundleRevisions: without a root, each decision replays
// against the bundle revision it cites, loaded through the
// RevisionLoader seam (once per revision); with no loader that is a
// config_unavailable error.
func TestRunAgainstBundleRevisions(t *testing.T) {
	snap := load(t, map[string]string{"packs/team.yaml": "roles:\n  tester:\n    model: t\n"})
	// A snapshot as a bundle would give it (not yet shared: it may be
	// set up here).
	snap.ConfigSource, snap.Revision = discover.ConfigFromNATS, 7
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	ctx := context.Background()
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ev-1", "ev-2", "ev-3"} {
		outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "planner", ID: id, Task: `{"task_id": "T-` + id + `", "role": "tester", "pack": "team"}`})
	}

	var loads []uint64
	loader := func(_ context.Context, rev uint64) (*discover.Snapshot, error) {
		loads = append(loads, rev)
		return snap, nil
	}
	var results []replay.Result
	sum, err := replay.Run(ctx, js, replay.Options{Config: cfg, Revisions: loader}, func(r replay.Result) { results = append(results, r) })
	if err != nil {
		t.Fatal(err)
	}
	if sum.Replayed != 3 || sum.Equal != 3 || len(loads) != 1 || loads[0] != 7 {
		t.Errorf("summary %+v, loads %v", sum, loads)
	}
	for _, r := range results {
		if !r.SameConfig {
			t.Errorf("%+v", r)
		}
	}

	_, err = replay.Run(ctx, js, replay.Options{Config: cfg}, nil)
	if !errors.Is(err, &replay.Error{Code: replay.CodeConfigUnavailable}) {
		t.Errorf("no loader: %v, want config_unavailable", err)
	}
	_, err = replay.Run(ctx, js, replay.Options{Config: cfg, Revisions: func(context.Context, uint64) (*discover.Snapshot, error) {
		return nil, errors.New("revision 7 was purged")
	}}, nil)
	var re *replay.Error
	if !errors.As(err, &re) || re.Code != replay.CodeConfigUnavailable || re.Details["revision"] != uint64(7) {
		t.Errorf("loader failure: %v", err)
	}
}

// TestRunFilterInvalid: a filter that is no subject of the specs stream,
// or no valid subject, is filter_invalid before anything is read.
func TestRunFilterInvalid(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	ctx := context.Background()
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	snap := load(t, map[string]string{"packs/team.yaml": "roles:\n  tester:\n    model: t\n"})
	for _, filter := range []string{"other.>", "rolecall.specs", "rolecall.specs.", "rolecall.specs..x", "rolecall.specs.resolved..>", "rolecall.specs.>.x", "rolecall.specs.a b"} {
		t.Run(filter, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := replay.Run(ctx, js, replay.Options{Config: cfg, Filter: filter, Snapshot: snap}, nil)
			if !errors.Is(err, &replay.Error{Code: replay.CodeFilterInvalid}) {
				t.Errorf("filter %q: %v, want filter_invalid", filter, err)
			}
		})
	}

	// Another fleet's prefix: the stream (named by the config) holds
	// rolecall.specs.>, and acme.specs.> matches none of it. Replaying
	// nothing and passing would let a CI gate through.
	outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "planner", ID: "ev-1", Task: `{"task_id": "T-1", "role": "tester", "pack": "team"}`})
	acme := cfg
	acme.Prefix = "acme"
	sum, err := replay.Run(ctx, js, replay.Options{Config: acme, Snapshot: snap}, nil)
	var re *replay.Error
	if !errors.As(err, &re) || re.Code != replay.CodeFilterInvalid || !strings.Contains(re.Message, "rolecall.specs.>") {
		t.Errorf("another prefix: %v (summary %+v), want filter_invalid naming the stream's subjects", err, sum)
	}
	// Filters that match some of the stream replay.
	for _, filter := range []string{"rolecall.specs.>", "rolecall.specs.*.tester", "rolecall.specs.resolved.>"} {
		sum, err := replay.Run(ctx, js, replay.Options{Config: cfg, Filter: filter, Snapshot: snap}, nil)
		if err != nil || sum.Replayed != 1 {
			t.Errorf("filter %q: %v, summary %+v", filter, err, sum)
		}
	}
}
