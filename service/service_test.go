package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/service"
)

const examples = "../examples"

type harness struct {
	t      *testing.T
	client *nats.Conn
	svcNC  *nats.Conn
	src    *discover.Source
	svc    *service.Service
	js     jetstream.JetStream
}

func start(t *testing.T, root string, opt service.Options, srvOpts ...natstest.Options) *harness {
	t.Helper()
	srv := natstest.Start(t, srvOpts...)
	src, err := discover.NewSource(root, discover.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, client: natstest.Connect(t, srv), svcNC: natstest.Connect(t, srv), src: src}
	if opt.Instance == "" {
		opt.Instance = "test-1"
	}
	if opt.Version == "" {
		opt.Version = "dev"
	}
	h.svc, err = service.Start(h.svcNC, src, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.svc.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if h.js, err = jetstream.New(h.client); err != nil {
		t.Fatal(err)
	}
	return h
}

// request sends body (with headers h) to an endpoint and returns the reply.
func (h *harness) request(endpoint string, body []byte, hdr nats.Header) *nats.Msg {
	h.t.Helper()
	m, err := h.client.RequestMsg(&nats.Msg{Subject: service.Subject("", endpoint), Data: body, Header: hdr}, 5*time.Second)
	if err != nil {
		h.t.Fatalf("%s: %v", endpoint, err)
	}
	return m
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantOK fails unless m is a success reply, and decodes its body into v.
func wantOK(t *testing.T, what string, m *nats.Msg, v any) {
	t.Helper()
	if c := m.Header.Get(micro.ErrorCodeHeader); c != "" {
		t.Fatalf("%s: error %s %s: %s", what, c, m.Header.Get(micro.ErrorHeader), m.Data)
	}
	if v != nil {
		if err := json.Unmarshal(m.Data, v); err != nil {
			t.Fatalf("%s: %v: %s", what, err, m.Data)
		}
	}
}

// wantErr fails unless m is an error reply with status and code, and
// returns its body as a map.
func wantErr(t *testing.T, what string, m *nats.Msg, status, code string) map[string]any {
	t.Helper()
	if got := m.Header.Get(micro.ErrorCodeHeader); got != status {
		t.Fatalf("%s: Nats-Service-Error-Code %q, want %q (body %s)", what, got, status, m.Data)
	}
	if got := m.Header.Get(micro.ErrorHeader); got != code {
		t.Fatalf("%s: Nats-Service-Error %q, want %q (body %s)", what, got, code, m.Data)
	}
	var body map[string]any
	if err := json.Unmarshal(m.Data, &body); err != nil {
		t.Fatalf("%s: the error body is not JSON: %v: %s", what, err, m.Data)
	}
	if body["code"] != code {
		t.Fatalf("%s: body code %v, want %s", what, body["code"], code)
	}
	return body
}

// TestDiscoveryAndEndpoints lists the service through the micro discovery
// subjects, calls every endpoint with good and bad requests, and checks
// the typed errors and the per-endpoint statistics.
func TestDiscoveryAndEndpoints(t *testing.T) {
	h := start(t, examples, service.Options{Concurrency: 2})
	snap := h.src.Snapshot()

	// $SRV.PING, $SRV.INFO, $SRV.STATS: all instances, then by name.
	var ping micro.Ping
	wantOK(t, "ping", h.request2("$SRV.PING"), &ping)
	if ping.Name != service.Name || ping.Version != "0.0.0-dev" || ping.ID != h.svc.ID() {
		t.Fatalf("ping: %+v", ping)
	}
	var info micro.Info
	wantOK(t, "info", h.request2("$SRV.INFO.rolecall"), &info)
	wantMeta := map[string]string{"instance": "test-1", "config_source": "files", "config_digest": snap.Digest, "config_revision": "none"}
	for k, v := range wantMeta {
		if info.Metadata[k] != v {
			t.Errorf("info metadata %s = %q, want %q", k, info.Metadata[k], v)
		}
	}
	var subjects []string
	for _, e := range info.Endpoints {
		subjects = append(subjects, e.Subject)
		if e.QueueGroup != service.QueueGroup {
			t.Errorf("endpoint %s: queue group %q", e.Name, e.QueueGroup)
		}
	}
	if got, want := strings.Join(subjects, " "), "rolecall.svc.resolve rolecall.svc.roster rolecall.svc.explain rolecall.svc.validate rolecall.svc.config"; got != want {
		t.Fatalf("endpoints %s, want %s", got, want)
	}

	calls := map[string][2]int{} // endpoint → requests, errors
	call := func(ep string, body []byte, hdr nats.Header) *nats.Msg {
		m := h.request(ep, body, hdr)
		c := calls[ep]
		c[0]++
		if m.Header.Get(micro.ErrorCodeHeader) != "" {
			c[1]++
		}
		calls[ep] = c
		return m
	}

	// resolve: task data, a structured and a binary CloudEvent.
	task := readFile(t, filepath.Join(examples, "tasks", "architect.json"))
	var resolved events.ResolvedData
	m := call("resolve", task, nil)
	wantOK(t, "resolve", m, &resolved)
	if resolved.TaskID != "T-100" || resolved.Identity.Name != "architect" || resolved.SystemMessage == "" {
		t.Fatalf("resolve: %+v", resolved)
	}
	if got := m.Header.Get(service.HeaderOutcomeSubject); got != "rolecall.specs.resolved.architect" {
		t.Errorf("outcome subject %q", got)
	}
	if got := m.Header.Get(service.HeaderConfigDigest); got != snap.Digest {
		t.Errorf("config digest header %q", got)
	}
	for _, binary := range []bool{false, true} {
		hdr, body, err := events.EncodeTask("urn:planner", "ev-1", task, "", "", binary)
		if err != nil {
			t.Fatal(err)
		}
		m := call("resolve", body, hdr)
		wantOK(t, "resolve event", m, nil)
		if got, want := m.Header.Get(service.HeaderOutcomeID), events.OutcomeID("urn:planner", "ev-1"); got != want {
			t.Errorf("binary %v: outcome id %s, want %s", binary, got, want)
		}
		// Without its content-type header, a structured event is known by
		// its specversion member.
		if !binary {
			wantOK(t, "resolve event without headers", call("resolve", body, nil), nil)
		}
	}
	// resolve: typed failures, each the worker's code.
	for _, tc := range []struct{ name, body, code string }{
		{"not JSON", `{"task_id":`, "task_invalid"},
		{"unknown member", `{"task_id":"T-1","role":"architect","colour":"red"}`, "task_invalid"},
		{"unknown pack", `{"task_id":"T-1","role":"architect","pack":"nope"}`, "pack_not_found"},
		{"disallowed modes", string(readFile(t, filepath.Join(examples, "tasks", "bad-modes.json"))), "mode_disallowed"},
		{"unknown role", `{"task_id":"T-1","role":"juggler"}`, "role_unknown"},
		{"bad event", `{"specversion":"1.0","id":"x"}`, "event_invalid"},
	} {
		body := wantErr(t, "resolve "+tc.name, call("resolve", []byte(tc.body), nil), "400", tc.code)
		if _, ok := body["stage"]; !ok {
			t.Errorf("resolve %s: the failure JSON has no stage: %v", tc.name, body)
		}
	}

	// explain: the document of the same run.
	var doc struct {
		Format string `json:"format"`
		TaskID string `json:"task_id"`
		Fields []struct {
			Field string `json:"field"`
		} `json:"fields"`
	}
	wantOK(t, "explain", call("explain", task, nil), &doc)
	if doc.Format != "rolecall.explain.v1" || doc.TaskID != "T-100" || len(doc.Fields) == 0 {
		t.Fatalf("explain: %+v", doc)
	}
	wantErr(t, "explain unknown pack", call("explain", []byte(`{"task_id":"T-1","role":"architect","pack":"nope"}`), nil), "400", "pack_not_found")
	wantErr(t, "explain not JSON", call("explain", []byte(`nope`), nil), "400", "task_invalid")

	// roster.
	var roster service.RosterReply
	wantOK(t, "roster default", call("roster", nil, nil), &roster)
	if roster.Pack != "default" || len(roster.Roster) == 0 || roster.Config.Digest != snap.Digest {
		t.Fatalf("roster: %+v", roster)
	}
	wantOK(t, "roster research", call("roster", []byte(`{"pack":"research"}`), nil), &roster)
	if roster.Pack != "research" || roster.Roster[0].Identity == "" {
		t.Fatalf("roster research: %+v", roster)
	}
	wantErr(t, "roster unknown pack", call("roster", []byte(`{"pack":"nope"}`), nil), "400", "pack_not_found")
	for _, tc := range []struct{ name, body, reason string }{
		{"unknown member", `{"pak":"research"}`, service.ReasonUnknownField},
		{"wrong type", `{"pack":7}`, service.ReasonWrongType},
		{"not an object", `["research"]`, service.ReasonNotObject},
		{"not JSON", `{"pack":`, service.ReasonSyntax},
		{"duplicate", `{"pack":"a","pack":"b"}`, service.ReasonDuplicateKey},
		{"bad name", `{"pack":"../etc"}`, service.ReasonInvalidName},
	} {
		body := wantErr(t, "roster "+tc.name, call("roster", []byte(tc.body), nil), "400", "request_invalid")
		if d, _ := body["details"].(map[string]any); d["reason"] != tc.reason {
			t.Errorf("roster %s: details %v, want reason %s", tc.name, body["details"], tc.reason)
		}
	}

	// validate and config.
	var val service.ValidateReply
	wantOK(t, "validate", call("validate", []byte(`{}`), nil), &val)
	if !val.OK || len(val.Problems) != 0 || val.Config.Digest != snap.Digest {
		t.Fatalf("validate of the examples: %+v, want ok with no problems", val)
	}
	wantErr(t, "validate with a member", call("validate", []byte(`{"strict":true}`), nil), "400", "request_invalid")
	var cfg struct {
		Source, Digest, Instance string
		Revision                 *uint64
		WorkerVersion            string  `json:"worker_version"`
		ReloadError              *string `json:"reload_error"`
	}
	wantOK(t, "config", call("config", nil, nil), &cfg)
	if cfg.Source != "files" || cfg.Digest != snap.Digest || cfg.Revision != nil || cfg.Instance != "test-1" || cfg.WorkerVersion != "0.0.0-dev" || cfg.ReloadError != nil {
		t.Fatalf("config: %+v", cfg)
	}
	wantErr(t, "config not JSON", call("config", []byte(`}`), nil), "400", "request_invalid")

	// $SRV.STATS: every request and every error counted, per endpoint.
	// The micro package counts a request after its handler returns, which
	// is after the reply is sent: the last counts may land a moment after
	// the last reply, so the test asks again until they are in.
	var bad []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		var stats micro.Stats
		wantOK(t, "stats", h.request2("$SRV.STATS.rolecall."+h.svc.ID()), &stats)
		if len(stats.Endpoints) != 5 {
			t.Fatalf("stats: %d endpoints", len(stats.Endpoints))
		}
		bad = bad[:0]
		for _, e := range stats.Endpoints {
			want := calls[e.Name]
			if e.NumRequests != want[0] || e.NumErrors != want[1] || (want[1] > 0) != (e.LastError != "") {
				bad = append(bad, fmt.Sprintf("%s: %d requests, %d errors, last error %q; want %d, %d", e.Name, e.NumRequests, e.NumErrors, e.LastError, want[0], want[1]))
			}
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, b := range bad {
		t.Error("stats " + b)
	}
}

func (h *harness) request2(subject string) *nats.Msg {
	h.t.Helper()
	m, err := h.client.Request(subject, nil, 5*time.Second)
	if err != nil {
		h.t.Fatalf("%s: %v", subject, err)
	}
	return m
}

// TestResolveIsWhatTheWorkerPublishes: the data resolve answers is byte
// for byte the data of the outcome a worker publishes for the same task
// event, resolved and failed.
func TestResolveIsWhatTheWorkerPublishes(t *testing.T) {
	// A version of their own: a decision record names it, and the preview
	// must name the same.
	const version = "1.2.3-test"
	h := start(t, examples, service.Options{Version: version})
	cfg := pipeline.DefaultConfig()
	outcometest.RunWorker(t, h.js, h.src, cfg, pipeline.Options{Version: version})
	ctx := context.Background()

	// Resolved and failed outcomes, and a task the decoder refuses (whose
	// outcome the runner makes, not Handle).
	tasks := []string{"architect.json", "research.json", "bad-modes.json", "tiered.json", "review-overlay.json", "undecodable"}
	for i, name := range tasks {
		data := []byte(`{"task_id":"T-9","role":"architect","colour":"red"}`)
		if name != "undecodable" {
			data = readFile(t, filepath.Join(examples, "tasks", name))
		}
		hdr, body, err := events.EncodeTask("urn:planner", "ev-"+name, data, "", "", i%2 == 1)
		if err != nil {
			t.Fatal(err)
		}
		preview := h.request("resolve", body, hdr)
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := h.js.PublishMsg(pctx, &nats.Msg{Subject: events.TasksSubject("", "t"), Header: hdr, Data: body}); err != nil {
			waitStream(t, pctx, h.js, cfg.TasksStream)
			if _, err := h.js.PublishMsg(pctx, &nats.Msg{Subject: events.TasksSubject("", "t"), Header: hdr, Data: body}); err != nil {
				t.Fatal(err)
			}
		}
		msg := awaitOutcome(t, pctx, h.js, cfg.SpecsStream, uint64(i+1))
		pcancel()
		ev, err := events.DecodeOutcome(msg.Header, msg.Data)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ev.DataEncoded, preview.Data) {
			t.Errorf("%s: the preview differs from the published outcome:\npreview:   %s\npublished: %s", name, preview.Data, ev.DataEncoded)
		}
		if got := preview.Header.Get(service.HeaderOutcomeSubject); got != msg.Subject {
			t.Errorf("%s: preview subject %s, published on %s", name, got, msg.Subject)
		}
		if got := preview.Header.Get(service.HeaderOutcomeID); got != ev.ID() {
			t.Errorf("%s: preview outcome id %s, published %s", name, got, ev.ID())
		}
		if failed := ev.Type() == events.TypeSpecFailed; failed != (preview.Header.Get(micro.ErrorCodeHeader) == "400") {
			t.Errorf("%s: published %s, preview error code %q", name, ev.Type(), preview.Header.Get(micro.ErrorCodeHeader))
		}
	}
}

func waitStream(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) {
	t.Helper()
	for {
		if _, err := js.Stream(ctx, name); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("stream %s never appeared", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func awaitOutcome(t *testing.T, ctx context.Context, js jetstream.JetStream, stream string, seq uint64) *jetstream.RawStreamMsg {
	t.Helper()
	for {
		s, err := js.Stream(ctx, stream)
		if err == nil {
			m, err := s.GetMsg(ctx, seq)
			if err == nil {
				return m
			}
			if !errors.Is(err, jetstream.ErrMsgNotFound) {
				t.Fatal(err)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no outcome %d in %s", seq, stream)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestReregistersOnConfigChange: a new configuration gets a new instance
// whose metadata names it, and the old instance leaves.
func TestReregistersOnConfigChange(t *testing.T) {
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(examples)); err != nil {
		t.Fatal(err)
	}
	h := start(t, root, service.Options{Watch: time.Hour})
	oldID, oldDigest := h.svc.ID(), h.src.Snapshot().Digest
	if h.svc.Refresh() {
		t.Fatal("re-registered without a change")
	}
	cfgFile := filepath.Join(root, "rolecall.yaml")
	b := readFile(t, cfgFile)
	if err := os.WriteFile(cfgFile, append(b, []byte("\n# edited\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := h.src.ForceReload(); err != nil {
		t.Fatal(err)
	}
	if !h.svc.Refresh() {
		t.Fatal("did not re-register after the configuration changed")
	}
	newDigest := h.src.Snapshot().Digest
	if newDigest == oldDigest || h.svc.ID() == oldID {
		t.Fatalf("digest %s → %s, id %s → %s", oldDigest, newDigest, oldID, h.svc.ID())
	}
	// Every instance that answers a ping now is the new one.
	sub, err := h.client.SubscribeSync(nats.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.client.PublishRequest("$SRV.INFO.rolecall", sub.Subject, nil); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for {
		m, err := sub.NextMsg(300 * time.Millisecond)
		if err != nil {
			break
		}
		var info micro.Info
		if err := json.Unmarshal(m.Data, &info); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, info.ID)
		if info.Metadata["config_digest"] != newDigest {
			t.Errorf("instance %s still names %s", info.ID, info.Metadata["config_digest"])
		}
	}
	if len(seen) != 1 || seen[0] != h.svc.ID() {
		t.Fatalf("instances answering: %v, want only %s", seen, h.svc.ID())
	}
	var cfg service.ConfigReply
	wantOK(t, "config", h.request("config", nil, nil), &cfg)
	if cfg.Digest != newDigest {
		t.Fatalf("config digest %s, want %s", cfg.Digest, newDigest)
	}
}

// TestValidateReportsProblems: validate over a root that loads with a
// problem (a pack default Mode not in the catalog) answers not ok and
// lists the problem where it is.
func TestValidateReportsProblems(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "packs"), 0o755); err != nil {
		t.Fatal(err)
	}
	pack := "roles:\n  analyst:\n    model: m\n    default_modes: [evidential, telepathic]\n"
	if err := os.WriteFile(filepath.Join(root, "packs", "team.yaml"), []byte(pack), 0o644); err != nil {
		t.Fatal(err)
	}
	h := start(t, root, service.Options{})
	var val service.ValidateReply
	wantOK(t, "validate", h.request("validate", nil, nil), &val)
	if val.OK || len(val.Problems) != 1 {
		t.Fatalf("validate: %+v, want not ok with one problem", val)
	}
	if p := val.Problems[0]; p.File != "packs/team.yaml" || p.Line != 4 || p.Code != "pack_default_invalid" || !strings.Contains(p.Message, `"telepathic"`) {
		t.Errorf("problem %+v, want pack_default_invalid at packs/team.yaml:4 naming telepathic", p)
	}
}

// TestPoolBoundsAndCounts: many concurrent requests to every endpoint
// through a pool of one are all answered, and the statistics count every
// one and every error.
func TestPoolBoundsAndCounts(t *testing.T) {
	h := start(t, examples, service.Options{Concurrency: 1})
	task := readFile(t, filepath.Join(examples, "tasks", "architect.json"))
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 5*n)
	for i := range n {
		for _, ep := range []string{"resolve", "explain", "roster", "validate", "config"} {
			wg.Go(func() {
				body := task
				if ep != "resolve" && ep != "explain" {
					body = nil
				}
				if i%4 == 0 {
					body = []byte(`{"bogus":1}`)
				}
				m, err := h.client.Request(service.Subject("", ep), body, 10*time.Second)
				if err == nil && (m.Header.Get(micro.ErrorCodeHeader) != "") != (i%4 == 0) {
					err = errors.New(ep + ": unexpected reply " + string(m.Data))
				}
				if err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The counts may land a moment after the last reply (see above).
	var bad []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		bad = bad[:0]
		var names []string
		for _, e := range h.svc.Stats().Endpoints {
			names = append(names, e.Name)
			if e.NumRequests != n || e.NumErrors != n/4 {
				bad = append(bad, fmt.Sprintf("%s: %d requests, %d errors; want %d, %d", e.Name, e.NumRequests, e.NumErrors, n, n/4))
			}
		}
		// Every endpoint has its line: a missing one counts nothing.
		if slices.Sort(names); !slices.Equal(names, []string{"config", "explain", "resolve", "roster", "validate"}) {
			bad = append(bad, fmt.Sprintf("statistics for endpoints %v, want config, explain, resolve, roster and validate", names))
		}
		if len(bad) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, b := range bad {
		t.Error(b)
	}
}

func TestSemVer(t *testing.T) {
	for in, want := range map[string]string{
		"dev": "0.0.0-dev", "": "0.0.0-dev", "v1.2.3": "1.2.3", "1.4.0-rc.1": "1.4.0-rc.1",
		"v0.0.0-20261203091500-abcdef123456": "0.0.0-20261203091500-abcdef123456", "1.2": "0.0.0-dev",
	} {
		if got := service.SemVer(in); got != want {
			t.Errorf("SemVer(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestExplainRecorded: explain finds a recorded outcome by its id or its
// task event's (source, id), and answers typed errors for an unknown one,
// a malformed request, and an instance without JetStream access.
func TestExplainRecorded(t *testing.T) {
	h := start(t, examples, service.Options{})
	cfg := pipeline.DefaultConfig()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := pipeline.Ensure(ctx, h.js, cfg); err != nil {
		t.Fatal(err)
	}
	task := string(readFile(t, filepath.Join(examples, "tasks", "architect.json")))
	id, _ := outcometest.Store(t, h.js, cfg, h.src.Snapshot(), outcometest.Outcome{Source: "urn:planner", ID: "ev-9", Task: task})

	js, err := jetstream.New(h.svcNC)
	if err != nil {
		t.Fatal(err)
	}
	// A second instance with JetStream access, beside the first (without):
	// ask each by its own subject prefix.
	withJS, err := service.Start(h.svcNC, h.src, service.Options{Pipeline: pipeline.Config{Prefix: "js"}, JetStream: js, Instance: "with-js"})
	if err != nil {
		t.Fatal(err)
	}
	defer withJS.Stop()
	ask := func(prefix, body string) *nats.Msg {
		m, err := h.client.Request(service.Subject(prefix, "explain"), []byte(body), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	type doc struct {
		TaskID   string `json:"task_id"`
		Recorded struct {
			OutcomeID  string `json:"outcome_id"`
			SameConfig bool   `json:"same_config"`
		} `json:"recorded"`
	}
	for _, body := range []string{`{"outcome_id":"` + id + `"}`, `{"source":"urn:planner","id":"ev-9"}`} {
		var d doc
		wantOK(t, "explain "+body, ask("js", body), &d)
		if d.TaskID != "T-100" || d.Recorded.OutcomeID != id || !d.Recorded.SameConfig {
			t.Errorf("explain %s: %+v", body, d)
		}
	}
	wantErr(t, "unknown id", ask("js", `{"outcome_id":"rc-00000000000000000000000000000000"}`), "400", "outcome_not_found")
	for _, body := range []string{`{"outcome_id":"x","source":"s"}`, `{"source":"s"}`, `{"id":"e","extra":1}`} {
		wantErr(t, "malformed "+body, ask("js", body), "400", "request_invalid")
	}
	wantErr(t, "without JetStream", ask("", `{"outcome_id":"`+id+`"}`), "503", "outcomes_unavailable")
}

// TestResolveTooLarge: an outcome over the max payload is previewed as the
// failure the worker publishes instead (materialize_failed, reason
// outcome_too_large), byte for byte.
func TestResolveTooLarge(t *testing.T) {
	const version = "1.2.3-test"
	h := start(t, examples, service.Options{Version: version}, func(o *server.Options) { o.MaxPayload = 24 << 10 })
	cfg := pipeline.DefaultConfig()
	outcometest.RunWorker(t, h.js, h.src, cfg, pipeline.Options{Version: version})
	ctx := context.Background()
	data := []byte(`{"task_id":"T-big","role":"architect","overrides":{"extra_prompt":"` + strings.Repeat("long ", 3200) + `"}}`)
	hdr, body, err := events.EncodeTask("urn:planner", "ev-big", data, "", "", true)
	if err != nil {
		t.Fatal(err)
	}
	preview := h.request("resolve", body, hdr)
	f := wantErr(t, "too large", preview, "400", "materialize_failed")
	if d, _ := f["details"].(map[string]any); d["reason"] != "outcome_too_large" {
		t.Fatalf("details %v", f["details"])
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	waitStream(t, pctx, h.js, cfg.TasksStream)
	if _, err := h.js.PublishMsg(pctx, &nats.Msg{Subject: events.TasksSubject("", "t"), Header: hdr, Data: body}); err != nil {
		t.Fatal(err)
	}
	msg := awaitOutcome(t, pctx, h.js, cfg.SpecsStream, 1)
	ev, err := events.DecodeOutcome(msg.Header, msg.Data)
	if err != nil {
		t.Fatal(err)
	}
	// Equal but for the size, which the worker measures on its own event
	// (its time, its trace context).
	var p, w2 map[string]any
	if err := json.Unmarshal(preview.Data, &p); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ev.DataEncoded, &w2); err != nil {
		t.Fatal(err)
	}
	pb, wb := p["details"].(map[string]any)["bytes"].(float64), w2["details"].(map[string]any)["bytes"].(float64)
	if pb < wb-200 || pb > wb+200 {
		t.Errorf("preview counts %v bytes, the worker %v", pb, wb)
	}
	for _, m := range []map[string]any{p, w2} {
		delete(m["details"].(map[string]any), "bytes")
		delete(m, "message")
	}
	if !reflect.DeepEqual(p, w2) {
		t.Errorf("the preview differs from the published outcome:\npreview:   %s\npublished: %s", preview.Data, ev.DataEncoded)
	}
}

// laterSource serves no snapshot until one is set, as a worker with
// --config-from nats does before its first bundle loads.
type laterSource struct {
	snap atomic.Pointer[discover.Snapshot]
	err  error
}

func (l *laterSource) Snapshot() *discover.Snapshot { return l.snap.Load() }
func (l *laterSource) Err() error                   { return l.err }

// TestNoConfigYet: before any configuration serves, every endpoint
// answers 503 config_unavailable (with the source's reason) instead of
// panicking into a 500, and the metadata claims no configuration; once
// one serves, the service re-registers and answers.
func TestNoConfigYet(t *testing.T) {
	srv := natstest.Start(t)
	client, svcNC := natstest.Connect(t, srv), natstest.Connect(t, srv)
	src := &laterSource{err: errors.New("bundle_not_found: no bundle at current yet")}
	svc, err := service.Start(svcNC, src, service.Options{Instance: "test-1", Watch: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	ask := func(subject string, body string) *nats.Msg {
		t.Helper()
		m, err := client.Request(subject, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", subject, err)
		}
		return m
	}
	task := string(readFile(t, filepath.Join(examples, "tasks", "architect.json")))
	for _, tc := range []struct{ endpoint, body string }{
		{"resolve", task},
		{"explain", task},
		{"explain", `{"outcome_id":"rc-00000000000000000000000000000000"}`},
		{"roster", `{"pack":"research"}`},
		{"validate", `{}`},
		{"config", ``},
	} {
		body := wantErr(t, tc.endpoint+" "+tc.body, ask(service.Subject("", tc.endpoint), tc.body), "503", "config_unavailable")
		if d, _ := body["details"].(map[string]any); d["reload_error"] != src.err.Error() {
			t.Errorf("%s: details %v, want the source's error", tc.endpoint, body["details"])
		}
	}
	var info micro.Info
	wantOK(t, "info", ask("$SRV.INFO.rolecall", ""), &info)
	if info.Metadata["config_source"] != "" || info.Metadata["config_digest"] != "" || info.Metadata["config_revision"] != "none" {
		t.Errorf("metadata before any configuration: %v", info.Metadata)
	}

	ds, err := discover.NewSource(examples, discover.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	src.snap.Store(ds.Snapshot())
	if !svc.Refresh() {
		t.Fatal("did not re-register once a configuration served")
	}
	wantOK(t, "resolve", ask(service.Subject("", "resolve"), task), nil)
	wantOK(t, "info", ask("$SRV.INFO.rolecall", ""), &info)
	if info.Metadata["config_source"] != "files" || info.Metadata["config_digest"] != ds.Snapshot().Digest {
		t.Errorf("metadata once a configuration serves: %v", info.Metadata)
	}
}

// TestExplainFailureIsResolveFailure: explain answers a failing task with
// the failure data resolve answers (and the worker publishes), byte for
// byte: the decision's id and worker version included.
func TestExplainFailureIsResolveFailure(t *testing.T) {
	h := start(t, examples, service.Options{})
	event := func(data string) ([]byte, nats.Header) {
		hdr, body, err := events.EncodeTask("urn:planner", "ev-9", []byte(data), "", "", true)
		if err != nil {
			t.Fatal(err)
		}
		return body, hdr
	}
	evBody, evHdr := event(`{"task_id":"T-1","role":"juggler"}`)
	for _, tc := range []struct {
		name string
		body []byte
		hdr  nats.Header
		code string
	}{
		{"not JSON", []byte(`nope`), nil, "task_invalid"},
		{"unknown member", []byte(`{"task_id":"T-1","role":"architect","colour":"red"}`), nil, "task_invalid"},
		{"bad event", []byte(`{"specversion":"1.0","id":"x"}`), nil, "event_invalid"},
		{"unknown pack", []byte(`{"task_id":"T-1","role":"architect","pack":"nope"}`), nil, "pack_not_found"},
		{"unknown role", []byte(`{"task_id":"T-1","role":"juggler"}`), nil, "role_unknown"},
		{"unknown role, binary event", evBody, evHdr, "role_unknown"},
	} {
		res := h.request("resolve", tc.body, tc.hdr)
		exp := h.request("explain", tc.body, tc.hdr)
		wantErr(t, "resolve "+tc.name, res, "400", tc.code)
		wantErr(t, "explain "+tc.name, exp, "400", tc.code)
		if !bytes.Equal(res.Data, exp.Data) {
			t.Errorf("%s: explain answers\n%s\nresolve answers\n%s", tc.name, exp.Data, res.Data)
		}
		if got, want := exp.Header.Get(service.HeaderOutcomeID), res.Header.Get(service.HeaderOutcomeID); got != want {
			t.Errorf("%s: explain outcome id %s, resolve %s", tc.name, got, want)
		}
	}
}

// TestMemberNamesAreReadAsJSON: a member name written with JSON escapes
// is the same member, so it makes the same request as the plain name.
func TestMemberNamesAreReadAsJSON(t *testing.T) {
	h := start(t, examples, service.Options{})
	for _, tc := range []struct{ endpoint, plain, escaped string }{
		{"explain", `{"outcome_id":"rc-00000000000000000000000000000000"}`, `{"outcome\u005fid":"rc-00000000000000000000000000000000"}`},
		{"explain", `{"source":"urn:p","id":"x"}`, `{"sourc\u0065":"urn:p","\u0069d":"x"}`},
		{"resolve", `{"specversion":"1.0","id":"x"}`, `{"spec\u0076ersion":"1.0","id":"x"}`},
		{"explain", `{"specversion":"1.0","id":"x","source":"urn:p"}`, `{"spec\u0076ersion":"1.0","id":"x","source":"urn:p"}`},
	} {
		p, e := h.request(tc.endpoint, []byte(tc.plain), nil), h.request(tc.endpoint, []byte(tc.escaped), nil)
		pc, ec := p.Header.Get(micro.ErrorHeader), e.Header.Get(micro.ErrorHeader)
		if pc == "" || pc != ec {
			t.Errorf("%s %s: %s %s\n%s: %s %s", tc.endpoint, tc.plain, pc, p.Data, tc.escaped, ec, e.Data)
		}
	}
}

// TestExplainRecordedIDShape: an outcome_id that is not rc- and 32
// lowercase hex digits is request_invalid, without a look-up: one as long
// as a request made the look-up's subject overrun the server's control
// line, and the server closed the service's connection for good.
func TestExplainRecordedIDShape(t *testing.T) {
	h := start(t, examples, service.Options{})
	if _, err := pipeline.Ensure(context.Background(), h.js, pipeline.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(h.svcNC)
	if err != nil {
		t.Fatal(err)
	}
	withJS, err := service.Start(h.svcNC, h.src, service.Options{Pipeline: pipeline.Config{Prefix: "js"}, JetStream: js, Instance: "with-js"})
	if err != nil {
		t.Fatal(err)
	}
	defer withJS.Stop()
	for _, id := range []string{
		"rc-" + strings.Repeat("a", 5000),
		"rc-0",
		"rc-0123456789abcdef0123456789abcdeF",
		"RC-0123456789abcdef0123456789abcdef",
		"rc-0123456789abcdef0123456789abcdef0",
		"a.>", "*", "a b", ".x",
	} {
		m, err := h.client.Request(service.Subject("js", "explain"), []byte(`{"outcome_id":"`+id+`"}`), 5*time.Second)
		if err != nil {
			t.Fatalf("outcome_id %.40s: %v", id, err)
		}
		body := wantErr(t, "outcome_id "+id[:min(len(id), 40)], m, "400", "request_invalid")
		if d, _ := body["details"].(map[string]any); d["reason"] != service.ReasonInvalidName || d["field"] != "outcome_id" {
			t.Errorf("outcome_id %.40s: details %v", id, body["details"])
		}
	}
	// The instance still answers.
	wantErr(t, "an empty request", h.request2("js.svc.explain"), "400", "task_invalid")
	m, err := h.client.Request(service.Subject("js", "explain"), []byte(`{"outcome_id":"rc-0123456789abcdef0123456789abcdef"}`), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "a well-formed unknown id", m, "400", "outcome_not_found")
}

// TestRosterInvalidNameMessage: a pack name that cannot be one is
// request_invalid, and its message says what is wrong with the name
// without another error code in it (it began "task_invalid: ").
func TestRosterInvalidNameMessage(t *testing.T) {
	h := start(t, examples, service.Options{})
	for _, tc := range []struct{ pack, message string }{
		{"../etc", `pack "../etc" has a character outside [a-z0-9_-] at byte 0`},
		{strings.Repeat("a", 65), "pack is longer than 64 bytes"},
		{"Research", `pack "Research" has a character outside [a-z0-9_-] at byte 0`},
	} {
		body := wantErr(t, "roster "+tc.pack, h.request("roster", []byte(`{"pack":"`+tc.pack+`"}`), nil), "400", "request_invalid")
		if body["message"] != tc.message {
			t.Errorf("roster %s: message %q, want %q", tc.pack, body["message"], tc.message)
		}
	}
}

// TestExplainBinaryEventIsATask: a binary-mode CloudEvent (ce-* headers)
// is a task whatever its data holds, so explain answers it as resolve
// does, never as a recorded-outcome request.
func TestExplainBinaryEventIsATask(t *testing.T) {
	h := start(t, examples, service.Options{})
	for _, tc := range []struct{ name, data, code string }{
		{"data with an id member", `{"task_id":"T-1","role":"architect","id":"x"}`, "task_invalid"},
		{"data with an outcome_id member", `{"task_id":"T-1","role":"architect","outcome_id":"rc-0123456789abcdef0123456789abcdef"}`, "task_invalid"},
		{"data with a source member", `{"source":"urn:p","id":"x"}`, "task_invalid"},
	} {
		hdr, body, err := events.EncodeTask("urn:planner", "ev-1", []byte(tc.data), "", "", true)
		if err != nil {
			t.Fatal(err)
		}
		res := wantErr(t, "resolve "+tc.name, h.request("resolve", body, hdr), "400", tc.code)
		exp := wantErr(t, "explain "+tc.name, h.request("explain", body, hdr), "400", tc.code)
		if !reflect.DeepEqual(res, exp) {
			t.Errorf("%s: explain answers %v, resolve %v", tc.name, exp, res)
		}
	}
}
