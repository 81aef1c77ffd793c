package explain_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// staticSource serves one snapshot to a worker.
type staticSource struct{ snap *discover.Snapshot }

func (s staticSource) Snapshot() *discover.Snapshot { return s.snap }

func loadExamples(t testing.TB) *discover.Snapshot {
	t.Helper()
	snap, err := discover.Load("../examples", discover.Options{})
	if err != nil {
		t.Fatalf("load examples: %v", err)
	}
	return snap
}

// worker runs a real worker over snap against an embedded server until
// the test ends.
func worker(t *testing.T, snap *discover.Snapshot) (*nats.Conn, jetstream.JetStream, pipeline.Config) {
	t.Helper()
	nc := natstest.Connect(t, natstest.Start(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	cfg.Concurrency = 4
	w := outcometest.RunWorker(t, js, staticSource{snap}, cfg, pipeline.Options{})
	return nc, js, w.Config()
}

// genTask draws task data over the examples root: known and unknown
// roles, replacements, overlays, packs, Modes, skills, tiers and every
// override, so that both outcomes and most sources occur.
var genTask = rapid.Custom(func(t *rapid.T) map[string]any {
	task := map[string]any{"task_id": "T-" + rapid.StringMatching(`[0-9]{1,4}`).Draw(t, "id")}
	role := rapid.SampledFrom([]string{
		"architect", "reviewer", "researcher", "analyst", "tester", "implementer", "critic", "ghost",
		"external:incident-commander", "external:old-helper",
	}).Draw(t, "role")
	task["role"] = role
	// Mostly tasks that resolve, sometimes one that a rule refuses: a
	// mismatched profile, a missing pack, a bad Mode, an unknown tier.
	optional := func(key string, likely []any, unlikely ...any) {
		values := likely
		if rare(t, key+".unlikely") {
			values = unlikely
		}
		if len(values) == 0 {
			return
		}
		if v := rapid.SampledFrom(values).Draw(t, key); v != nil {
			task[key] = v
		}
	}
	optional("pack", []any{nil, nil, "default", "research"}, "missing")
	if role == "reviewer" || rare(t, "profile.any") {
		optional("profile", []any{nil, "strict-reviewer"}, "incident-commander")
	}
	if !strings.HasPrefix(role, "external:") || rare(t, "modes.any") {
		optional("modes", []any{nil, nil, []string{}, []string{"systematic"}, []string{"evidential"}, []string{"systematic", "premortem"}}, []string{"fast", "slow"})
	}
	optional("skills", []any{nil, nil, []string{}}, []string{"cite-*"})
	if rapid.Bool().Draw(t, "overrides") {
		o := map[string]any{}
		set := func(key string, values ...any) {
			if v := rapid.SampledFrom(append([]any{nil}, values...)).Draw(t, "overrides."+key); v != nil {
				o[key] = v
			}
		}
		set("model", "claude-x", "tier:cheap", "tier:strong")
		if rare(t, "overrides.model.unknown") {
			o["model"] = "tier:huge"
		}
		set("effort", "low", "high")
		set("extra_prompt", "Mind the <b>migration</b>.")
		set("tools", []string{}, []string{"grep"})
		set("permissions", map[string]any{"mode": "rules", "allow": map[string]any{"read_file": []string{"**"}}})
		for _, f := range []string{"yolo", "bypass", "fast_mode", "lion_system"} {
			set(f, true, false)
		}
		task["overrides"] = o
	}
	return task
})

// rare is true about one time in eight.
func rare(t *rapid.T, label string) bool { return rapid.IntRange(0, 7).Draw(t, label) == 0 }

// TestPropertyExplainAgreesWithPublished: for generated tasks sent to a
// real worker over the examples root, the explain document of the same
// task agrees with the outcome the worker published: the same outcome
// data, each field's value and source, and each field's selected
// candidate.
func TestPropertyExplainAgreesWithPublished(t *testing.T) {
	snap := loadExamples(t)
	nc, js, cfg := worker(t, snap)
	outcomes := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(cfg.Prefix+".specs.>", outcomes)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		data, err := json.Marshal(genTask.Draw(rt, "task"))
		if err != nil {
			rt.Fatal(err)
		}
		n++
		id := fmt.Sprintf("p-%d", n)
		published := publish(rt, js, outcomes, cfg, id, data)

		doc, out := explain.TaskData(snap, data)
		if doc.Outcome != published.Kind() {
			rt.Fatalf("explain says %s, the worker published %s (%s)", doc.Outcome, published.Kind(), published.Data)
		}
		// The run that explains is the run that decides: its outcome data
		// is the published data (less the decision record, which only
		// the worker writes).
		var mine any = out.Failure
		if out.Resolved != nil {
			mine = out.Resolved
		}
		if a, b := stripDecision(rt, mustMarshal(rt, mine)), stripDecision(rt, published.Data); a != b {
			rt.Fatalf("explain's outcome data differs from the published one:\nexplain:   %s\npublished: %s", a, b)
		}
		if published.Failure != nil {
			if len(doc.Fields) != 0 {
				rt.Fatalf("a failure has no chains, got %d fields", len(doc.Fields))
			}
			return
		}
		checkAgrees(rt, doc, published.Resolved)
	})
}

// checkAgrees holds a document's chains to the outcome data.
func checkAgrees(t *rapid.T, doc *explain.Document, data *events.ResolvedData) {
	want := explain.OutcomeFields(data)
	if len(doc.Fields) != len(want) {
		t.Fatalf("%d fields, want %d", len(doc.Fields), len(want))
	}
	for _, f := range doc.Fields {
		w, ok := want[f.Field]
		if !ok {
			t.Fatalf("unknown field %q", f.Field)
		}
		if f.Source != w.Source || !explain.SameValue(f.Value, w.Value) {
			t.Fatalf("%s: document %s=%s, outcome %s=%s", f.Field, f.Source, mustMarshal(t, f.Value), w.Source, mustMarshal(t, w.Value))
		}
		var selected []explain.Candidate
		for _, c := range f.Candidates {
			if c.Status == resolve.StatusSelected {
				selected = append(selected, c)
			}
		}
		if f.Field == "prompt" {
			// Every block that went into the prompt is selected and each
			// of its lines is in it (directives become list items).
			for _, c := range selected {
				s, _ := c.Value.(string)
				for _, line := range strings.Split(s, "\n") {
					if s == "" || !strings.Contains(data.PromptBody, line) {
						t.Fatalf("prompt: selected block %s %q is not in the prompt body", c.Source, c.Value)
					}
				}
			}
			continue
		}
		if len(selected) != 1 {
			t.Fatalf("%s: %d selected candidates, want 1: %+v", f.Field, len(selected), f.Candidates)
		}
		c := selected[0]
		if c.Source != w.Source {
			t.Fatalf("%s: selected %s, outcome source %s", f.Field, c.Source, w.Source)
		}
		switch f.Field {
		case "identity", "skills":
			// The candidate offers the name, or the patterns.
		case "model":
			// The candidate offers the model as written: a tier symbol
			// when the outcome has a model_tier.
			written := data.Model
			if data.ModelTier != nil {
				written = data.ModelTier.Symbol
			}
			if c.Value != written {
				t.Fatalf("model: selected %v, outcome written as %s", c.Value, written)
			}
		default:
			if !explain.SameValue(c.Value, w.Value) {
				t.Fatalf("%s: selected %s, outcome %s", f.Field, mustMarshal(t, c.Value), mustMarshal(t, w.Value))
			}
		}
		if c.Source == resolve.SourceTask && (c.Origin == nil || c.Origin.File != "task") {
			t.Fatalf("%s: a task value's origin is %v", f.Field, c.Origin)
		}
	}
}

// publish sends task data as a task event and waits for its outcome.
func publish(t *rapid.T, js jetstream.JetStream, outcomes chan *nats.Msg, cfg pipeline.Config, id string, data []byte) *explain.StoredOutcome {
	h, body, err := events.EncodeTask("explain-test", id, data, "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: cfg.Prefix + ".tasks.any", Header: h, Data: body}); err != nil {
		t.Fatal(err)
	}
	want := events.OutcomeID("explain-test", id)
	// The deadline only keeps a lost outcome from hanging the test.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m := <-outcomes:
			if m.Header.Get(nats.MsgIdHdr) != want {
				continue
			}
			so, err := explain.ParseOutcome(0, m.Subject, m.Header, m.Data)
			if err != nil {
				t.Fatal(err)
			}
			return so
		case <-deadline:
			t.Fatalf("no outcome for task event %s", id)
		}
	}
}

func mustMarshal(t interface{ Fatal(...any) }, v any) string {
	b, err := events.MarshalData(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// stripDecision re-encodes outcome data without its decision record.
func stripDecision(t *rapid.T, data any) string {
	var raw []byte
	switch d := data.(type) {
	case string:
		raw = []byte(d)
	case jsontext.Value:
		raw = d
	}
	var m map[string]jsontext.Value
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "decision")
	b, err := json.Marshal(m, json.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
