package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rolecall/rolecall/audit"
	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
)

// allocated is a structured allocated event.
func allocated(id, decision, model, effort string) []byte {
	opt := func(v string) string {
		if v == "" {
			return "null"
		}
		return fmt.Sprintf("%q", v)
	}
	return fmt.Appendf(nil, `{"specversion": "1.0", "id": %q, "source": "allocator-1", "type": %q, "datacontenttype": "application/json",
		"data": {"decision_id": %q, "provider": "anthropic", "model": %s, "effort": %s, "x-pool": "gpu-a"}}`,
		id, audit.TypeAllocated, decision, opt(model), opt(effort))
}

// TestDrift: allocations that match, differ in model, name an unknown
// decision, and one delivered twice give exactly the expected drift
// events and metrics.
func TestDrift(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "packs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "packs", "team.yaml"), []byte("roles:\n  tester:\n    model: team-model\n    effort: high\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	snap, err := discover.Load(root, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	cfg := pipeline.DefaultConfig()
	ctx := context.Background()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	decision, _ := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "planner", ID: "ev-1", Task: `{"task_id": "T-1", "role": "tester", "pack": "team"}`})

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	a, err := audit.New(ctx, js, cfg, audit.Config{UnknownDelay: 10 * time.Millisecond}, audit.Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	// A second auditor on the same durable consumer, as another worker
	// of the fleet runs it.
	b, err := audit.New(ctx, js, cfg, audit.Config{UnknownDelay: 10 * time.Millisecond}, audit.Options{MeterProvider: mp})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.Run(runCtx)
	go b.Run(runCtx)

	subject := audit.AllocationsSubject(cfg.Prefix, "tester")
	for _, body := range [][]byte{
		allocated("a-match", decision, "team-model", "high"),
		allocated("a-match-partial", decision, "team-model", ""), // effort not reported
		allocated("a-model", decision, "other-model", "high"),
		allocated("a-model", decision, "other-model", "high"), // redelivered by the allocator
		allocated("a-unknown", "rc-00000000000000000000000000000000", "team-model", "high"),
		[]byte(`{"not": "an allocation"}`),
	} {
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: subject, Data: body, Header: nats.Header{"content-type": {"application/cloudevents+json"}}}); err != nil {
			t.Fatal(err)
		}
	}

	// Every allocation settled: the consumer has nothing pending.
	cons, err := js.Consumer(ctx, audit.DefaultStream, audit.DefaultConsumer)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Consumer >= 8 { // six, and two redeliveries of the unknown decision
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocations not settled: %+v", info)
		}
		time.Sleep(20 * time.Millisecond)
	}

	type got struct {
		subject string
		data    audit.Drift
	}
	var drifts []got
	specs, err := js.Stream(ctx, cfg.SpecsStream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); ; seq++ {
		m, err := specs.GetMsg(ctx, seq)
		if err != nil {
			break
		}
		if m.Subject[:len(cfg.Prefix+".specs.drift.")] != cfg.Prefix+".specs.drift." {
			continue
		}
		var ev struct {
			ID   string      `json:"id"`
			Type string      `json:"type"`
			Data audit.Drift `json:"data"`
		}
		if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Type != audit.TypeDrift {
			t.Fatalf("drift event %s: %v", m.Data, err)
		}
		if m.Header.Get(events.HeaderMsgID) != ev.ID || ev.ID != audit.DriftID("allocator-1", ev.Data.AllocationID) {
			t.Errorf("drift id %s, msg id %s", ev.ID, m.Header.Get(events.HeaderMsgID))
		}
		drifts = append(drifts, got{m.Subject, ev.Data})
	}
	if len(drifts) != 2 {
		t.Fatalf("%d drift events, want 2: %+v", len(drifts), drifts)
	}
	slices.SortFunc(drifts, func(x, y got) int { return len(x.subject) - len(y.subject) })
	if d := drifts[0]; d.subject != "rolecall.specs.drift.model" || d.data.DecisionID != decision || d.data.AllocationID != "a-model" || d.data.Code != nil ||
		len(d.data.Fields) != 1 || d.data.Fields[0].Field != "model" || *d.data.Fields[0].Decided != "team-model" || d.data.Fields[0].Allocated != "other-model" {
		t.Errorf("model drift: %+v", d)
	}
	if d := drifts[1]; d.subject != "rolecall.specs.drift.unknown_decision" || d.data.Code == nil || *d.data.Code != audit.CodeUnknownDecision || d.data.AllocationID != "a-unknown" {
		t.Errorf("unknown decision drift: %+v", d)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != audit.MetricDrift {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				f, _ := p.Attributes.Value(attribute.Key("field"))
				counts[f.AsString()] += p.Value
			}
		}
	}
	if len(counts) != 2 || counts["model"] != 1 || counts["unknown_decision"] != 1 {
		t.Errorf("rolecall.drift = %v, want model 1, unknown_decision 1", counts)
	}
}

// TestDriftMalformedDecisionID: an allocation naming a decision id no
// outcome can have ("*" is no key of the outcome store) is an unknown
// decision, like any other id that names none; it is not retried as a
// broker fault until the consumer gives up on it.
func TestDriftMalformedDecisionID(t *testing.T) {
	srv := natstest.Start(t)
	js := natstest.JetStream(t, natstest.Connect(t, srv))
	cfg := pipeline.DefaultConfig()
	ctx := context.Background()
	if _, err := pipeline.Ensure(ctx, js, cfg); err != nil {
		t.Fatal(err)
	}
	a, err := audit.New(ctx, js, cfg, audit.Config{UnknownDelay: 10 * time.Millisecond}, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go a.Run(runCtx)
	body := allocated("a-star", "rc-*", "team-model", "")
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: audit.AllocationsSubject(cfg.Prefix, "tester"), Data: body,
		Header: nats.Header{"content-type": {"application/cloudevents+json"}}}); err != nil {
		t.Fatal(err)
	}
	specs, err := js.Stream(ctx, cfg.SpecsStream)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := specs.GetLastMsgForSubject(ctx, audit.DriftSubject(cfg.Prefix, audit.FieldUnknownDecision))
		if err == nil {
			var ev struct {
				Data audit.Drift `json:"data"`
			}
			if err := json.Unmarshal(m.Data, &ev); err != nil || ev.Data.DecisionID != "rc-*" || ev.Data.Code == nil || *ev.Data.Code != audit.CodeUnknownDecision {
				t.Fatalf("drift event %s: %v", m.Data, err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no drift_unknown_decision for a malformed decision id: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
