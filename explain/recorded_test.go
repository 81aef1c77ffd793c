package explain_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// store is a server with the specs stream and outcome store.
func store(t *testing.T) (jetstream.JetStream, pipeline.Config) {
	t.Helper()
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Start(t)))
	cfg := pipeline.DefaultConfig()
	if _, err := pipeline.Ensure(context.Background(), js, cfg); err != nil {
		t.Fatal(err)
	}
	return js, cfg
}

// writeRoot writes files into a new config root and loads it.
func writeRoot(t *testing.T, files map[string]string) *discover.Snapshot {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestStored: a recorded outcome is explained from its decision's task;
// the document says whether the configuration is the recorded one and
// what would change.
func TestStored(t *testing.T) {
	js, cfg := store(t)
	ctx := context.Background()
	o, err := explain.Open(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	then := writeRoot(t, map[string]string{"packs/team.yaml": "roles:\n  tester:\n    model: old-model\n    effort: low\n"})
	now := writeRoot(t, map[string]string{
		"packs/team.yaml":  "roles:\n  tester:\n    model: new-model\n    effort: low\n",
		"packs/extra.yaml": "roles:\n  tester:\n    model: extra-model\n",
	})
	task := `{"task_id": "T-1", "role": "tester", "pack": "team"}`
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)

	for _, tc := range []struct {
		name       string
		decidedBy  *discover.Snapshot
		task       string
		explainBy  *discover.Snapshot
		same       bool
		changed    []string
		outcome    string
		recordedAs string
	}{
		{name: "same configuration", decidedBy: then, task: task, explainBy: then, same: true, changed: []string{}, outcome: "resolved", recordedAs: "resolved"},
		{name: "changed configuration", decidedBy: then, task: task, explainBy: now, changed: []string{"model"}, outcome: "resolved", recordedAs: "resolved"},
		{name: "a failure that now resolves", decidedBy: then, task: `{"task_id": "T-2", "role": "tester", "pack": "extra"}`, explainBy: now, changed: []string{"outcome"}, outcome: "resolved", recordedAs: "failed"},
		{name: "a failure as recorded", decidedBy: then, task: `{"task_id": "T-3", "role": "tester", "pack": "extra"}`, explainBy: then, same: true, changed: []string{}, outcome: "failed", recordedAs: "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, seq := outcometest.Store(t, js, cfg, tc.decidedBy, outcometest.Outcome{Source: "test", ID: tc.name, Task: tc.task, Time: at})
			so, err := explain.Lookup(ctx, o, id)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := explain.Stored(tc.explainBy, so)
			if err != nil {
				t.Fatal(err)
			}
			r := doc.Recorded
			if r == nil || r.OutcomeID != id || r.Seq != seq || r.Outcome != tc.recordedAs || *r.Time != "2026-12-01T09:30:00Z" {
				t.Fatalf("recorded = %+v, want id %s seq %d", r, id, seq)
			}
			if r.SameConfig != tc.same || r.Config.Digest != tc.decidedBy.Digest || doc.Config.Digest != tc.explainBy.Digest {
				t.Errorf("same_config %v (recorded %s, now %s), want %v", r.SameConfig, r.Config.Digest, doc.Config.Digest, tc.same)
			}
			if !slices.Equal(r.Changed, tc.changed) {
				t.Errorf("changed = %q, want %q", r.Changed, tc.changed)
			}
			if doc.Outcome != tc.outcome {
				t.Errorf("outcome %s, want %s", doc.Outcome, tc.outcome)
			}
		})
	}
}

// TestLookupFailures: bad input is a typed error, never a panic.
func TestLookupFailures(t *testing.T) {
	snap := writeRoot(t, map[string]string{"packs/team.yaml": "roles:\n  tester:\n    model: m\n"})
	ctx := context.Background()
	ok := `{"task_id": "T-1", "role": "tester", "pack": "team"}`

	for _, tc := range []struct {
		name string
		// prepare stores what the case needs and returns the id to look up.
		prepare func(t *testing.T, js jetstream.JetStream, cfg pipeline.Config) string
		code    explain.Code
		// explainCode is the code of Stored when Lookup succeeds.
		explainCode explain.Code
	}{
		{
			name:    "unknown id",
			prepare: func(*testing.T, jetstream.JetStream, pipeline.Config) string { return "rc-0000" },
			code:    explain.CodeOutcomeNotFound,
		},
		{
			// Ids no outcome can be recorded under (not a key of the
			// outcome store): an allocator's typo, a path in a URL.
			name:    "malformed id",
			prepare: func(*testing.T, jetstream.JetStream, pipeline.Config) string { return "rc-*" },
			code:    explain.CodeOutcomeNotFound,
		},
		{
			name:    "id with a leading dot",
			prepare: func(*testing.T, jetstream.JetStream, pipeline.Config) string { return "../rc-1" },
			code:    explain.CodeOutcomeNotFound,
		},
		{
			name:    "id with a space",
			prepare: func(*testing.T, jetstream.JetStream, pipeline.Config) string { return "rc 1" },
			code:    explain.CodeOutcomeNotFound,
		},
		{
			name: "sequence no longer in the stream",
			prepare: func(t *testing.T, js jetstream.JetStream, cfg pipeline.Config) string {
				id, seq := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "test", ID: "purged", Task: ok})
				s, err := js.Stream(ctx, cfg.SpecsStream)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.DeleteMsg(ctx, seq); err != nil {
					t.Fatal(err)
				}
				return id
			},
			code: explain.CodeOutcomeNotFound,
		},
		{
			name: "corrupted outcome",
			prepare: func(t *testing.T, js jetstream.JetStream, cfg pipeline.Config) string {
				id, _ := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "test", ID: "corrupt", Task: ok, Body: []byte(`{"specversion": "1.0", "data": `)})
				return id
			},
			code: explain.CodeOutcomeInvalid,
		},
		{
			name: "corrupted record",
			prepare: func(t *testing.T, js jetstream.JetStream, cfg pipeline.Config) string {
				kv, err := js.KeyValue(ctx, cfg.OutcomesBucket)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := kv.Put(ctx, "rc-bad-record", []byte("not json")); err != nil {
					t.Fatal(err)
				}
				return "rc-bad-record"
			},
			code: explain.CodeOutcomeInvalid,
		},
		{
			name: "specs stream gone",
			prepare: func(t *testing.T, js jetstream.JetStream, cfg pipeline.Config) string {
				id, _ := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "test", ID: "gone", Task: ok})
				if err := js.DeleteStream(ctx, cfg.SpecsStream); err != nil {
					t.Fatal(err)
				}
				return id
			},
			code: explain.CodeOutcomesUnavailable,
		},
		{
			name: "no decision record",
			prepare: func(t *testing.T, js jetstream.JetStream, cfg pipeline.Config) string {
				id, _ := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "test", ID: "old", Task: ok, NoDecision: true})
				return id
			},
			explainCode: explain.CodeDecisionMissing,
		},
		{
			name: "undecodable task",
			prepare: func(t *testing.T, js jetstream.JetStream, cfg pipeline.Config) string {
				id, _ := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "test", ID: "bad-task", Task: `{"task_id": 42}`})
				return id
			},
			explainCode: explain.CodeTaskNotRecorded,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, cfg := store(t)
			id := tc.prepare(t, js, cfg)
			o, err := explain.Open(ctx, js, cfg)
			var so *explain.StoredOutcome
			if err == nil {
				so, err = explain.Lookup(ctx, o, id)
			}
			if tc.code != "" {
				var xe *explain.Error
				if !errors.As(err, &xe) || xe.Code != tc.code || !errors.Is(err, &explain.Error{Code: tc.code}) {
					t.Fatalf("err = %v, want code %s", err, tc.code)
				}
				if xe.Message == "" || xe.Details == nil {
					t.Errorf("error without message or details: %+v", xe)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			_, err = explain.Stored(snap, so)
			if !errors.Is(err, &explain.Error{Code: tc.explainCode}) {
				t.Fatalf("Stored: %v, want code %s", err, tc.explainCode)
			}
		})
	}
	t.Run("no outcome store", func(t *testing.T) {
		js := natstest.JetStream(t, natstest.Connect(t, natstest.Start(t)))
		if _, err := explain.Open(ctx, js, pipeline.DefaultConfig()); !errors.Is(err, &explain.Error{Code: explain.CodeOutcomesUnavailable}) {
			t.Fatalf("Open: %v, want outcomes_unavailable", err)
		}
	})
}

// TestStoredNotADecision: an outcome whose record holds no resolver
// decision to explain is a typed error, as replay skips it: a
// delivery_exhausted outcome was never decided, and an outcome_too_large
// record holds the extra prompt's digest instead of the task as sent.
// Explaining them compared the resolver's run with a failure it never
// made, and under the recorded configuration that read as a determinism
// failure (same_config, changed: outcome).
func TestStoredNotADecision(t *testing.T) {
	snap := writeRoot(t, map[string]string{"packs/team.yaml": "roles:\n  tester:\n    model: m\n"})
	for _, tc := range []struct {
		name    string
		failure events.FailureData
		task    string
		code    explain.Code
		// message is a part of the error's message: the reason.
		message string
	}{
		{"delivery exhausted", events.FailureData{Stage: resolve.StageDecode, Code: resolve.CodeDeliveryExhausted, Details: map[string]any{}},
			`{"task_id": "T-1", "role": "tester", "pack": "team"}`, explain.CodeDecisionMissing, "never decided"},
		{"delivery exhausted, its task event gone", events.FailureData{Stage: resolve.StageDeliver, Code: resolve.CodeDeliveryExhausted, Details: map[string]any{}},
			`null`, explain.CodeDecisionMissing, "never decided"},
		// A failure the worker published without its task, which would
		// have made it too large: the task did decode.
		{"a failure too large with its task", events.FailureData{Stage: resolve.StageResolve, Code: resolve.CodeModeUnknown, Details: map[string]any{}},
			`null`, explain.CodeTaskNotRecorded, "too large"},
		{"a task that did not decode", events.FailureData{Stage: resolve.StageDecode, Code: resolve.CodeTaskInvalid, Details: map[string]any{}},
			`null`, explain.CodeTaskNotRecorded, "could not be decoded"},
		{"outcome too large", events.FailureData{Stage: resolve.StageMaterialize, Code: resolve.CodeMaterializeFailed, Details: map[string]any{"reason": "outcome_too_large"}},
			`{"task_id": "T-2", "role": "tester", "pack": "team", "overrides": {"extra_prompt": "sha256:6b133d33d61d8a9baccbec66dd2e9601305a9ff5a20c3a99dd957fe5d9896b3a"}}`, explain.CodeTaskNotRecorded, "digest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.failure
			so := &explain.StoredOutcome{ID: "rc-1", Seq: 7, Failure: &f,
				Decision: &events.Decision{ID: "rc-1", Config: explain.ConfigOf(snap), Task: jsontext.Value(tc.task), Inputs: []events.DecisionInput{}}}
			doc, err := explain.Stored(snap, so)
			var xe *explain.Error
			if !errors.As(err, &xe) || xe.Code != tc.code || !strings.Contains(xe.Message, tc.message) {
				if doc != nil {
					t.Logf("recorded: %+v", *doc.Recorded)
				}
				t.Fatalf("Stored: %v, want code %s saying %q", err, tc.code, tc.message)
			}
		})
	}
}
