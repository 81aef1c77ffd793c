package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/audit"
	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/ui"
)

type staticSource struct{ snap *discover.Snapshot }

func (s staticSource) Snapshot() *discover.Snapshot { return s.snap }

// hostile is written where a page could be tricked into running it.
const hostile = `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">`

// root is a config root with a hostile Role body and description.
func root(t testing.TB) *discover.Snapshot {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"catalog/roles/tester.md":     "---\nname: tester\ndescription: \"Tests " + strings.ReplaceAll(hostile, `"`, `\"`) + "\"\n---\n# Tester\n\nYou test. " + hostile + "\n",
		"catalog/roles/architect.md":  "---\nname: architect\ndescription: Designs.\n---\n# Architect\n\nYou design.\n",
		"catalog/modes/systematic.md": "---\nname: systematic\ndescription: Methodical.\n---\nWork through a checklist.\n",
		"packs/default.yaml":          "roles:\n  tester:\n    model: model-t\n    modes_allow: [systematic]\n  architect:\n    model: model-a\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := discover.Load(dir, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

type fixture struct {
	js   jetstream.JetStream
	cfg  pipeline.Config
	snap *discover.Snapshot
	// ids of the stored outcomes, oldest first.
	ids  []string
	seqs []uint64
}

var base = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// newFixture stores, a minute apart: two resolved testers, a failure
// (mode_unknown), a resolved architect, an outcome without decision, a
// drift event about the first, and a message that is no outcome.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Start(t)))
	f := &fixture{js: js, cfg: pipeline.DefaultConfig(), snap: root(t)}
	if _, err := pipeline.Ensure(context.Background(), js, f.cfg); err != nil {
		t.Fatal(err)
	}
	for i, o := range []outcometest.Outcome{
		{ID: "e1", Task: `{"task_id": "T-1", "role": "tester", "overrides": {"extra_prompt": "` + strings.ReplaceAll(hostile, `"`, `\"`) + `"}}`},
		{ID: "e2", Task: `{"task_id": "T-2", "role": "tester", "modes": ["systematic"]}`},
		{ID: "e3", Task: `{"task_id": "T-3", "role": "tester", "modes": ["nope"]}`},
		{ID: "e4", Task: `{"task_id": "T-4", "role": "architect"}`},
		{ID: "e5", Task: `{"task_id": "T-5", "role": "architect"}`, NoDecision: true},
	} {
		o.Source, o.Time = "planner", base.Add(time.Duration(i)*time.Minute)
		id, seq := outcometest.Store(t, js, f.cfg, f.snap, o)
		f.ids, f.seqs = append(f.ids, id), append(f.seqs, seq)
	}
	f.publish(t, "rolecall.specs.drift.model", fmt.Sprintf(`{"specversion": "1.0", "id": "d1", "source": "rolecall", "type": %q, "time": %q, "datacontenttype": "application/json",
		"data": {"decision_id": %q, "allocation_id": "a1", "fields": [{"field": "model", "decided": "model-t", "allocated": "model-x"}]}}`,
		audit.TypeDrift, base.Add(5*time.Minute).Format(time.RFC3339), f.ids[0]))
	f.publish(t, "rolecall.specs.resolved.junk", `{"not": "an event"}`)
	return f
}

func (f *fixture) publish(t *testing.T, subject, body string) {
	t.Helper()
	h := nats.Header{"Content-Type": {"application/cloudevents+json"}}
	if _, err := f.js.PublishMsg(context.Background(), &nats.Msg{Subject: subject, Header: h, Data: []byte(body)}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) server(t *testing.T, opt ui.Options) *httptest.Server {
	t.Helper()
	opt.JetStream, opt.Config, opt.Snapshots = f.js, f.cfg, staticSource{f.snap}
	if opt.Now == nil {
		opt.Now = func() time.Time { return base.Add(time.Hour) }
	}
	h, err := ui.Handler(opt)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, s *httptest.Server, path string, header http.Header) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, b
}

// TestList: newest first, filters, cursor paging, bounded scans and bad
// parameters.
func TestList(t *testing.T) {
	f := newFixture(t)
	s := f.server(t, ui.Options{})
	tasks := func(l ui.List) string {
		var out []string
		for _, e := range l.Decisions {
			switch {
			case e.TaskID != nil:
				out = append(out, *e.TaskID)
			default:
				out = append(out, e.Kind)
			}
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name, query string
		want        string // task ids (or kinds) in order
		next        bool
	}{
		{name: "all, newest first", query: "", want: "invalid drift T-5 T-4 T-3 T-2 T-1"},
		{name: "limit", query: "limit=2", want: "invalid drift", next: true},
		{name: "role", query: "role=tester", want: "T-3 T-2 T-1"},
		{name: "code", query: "code=mode_unknown", want: "T-3"},
		{name: "drift code", query: "code=drift", want: "drift"},
		{name: "model", query: "model=model-a", want: "T-5 T-4"},
		{name: "kind", query: "kind=failed", want: "T-3"},
		{name: "kind invalid", query: "kind=invalid", want: "invalid"},
		{name: "role and model", query: "role=tester&model=model-t", want: "T-2 T-1"},
		{name: "nothing matches", query: "role=ghost", want: ""},
		{name: "since a duration", query: "since=" + url.QueryEscape("57m30s"), want: "invalid drift T-5 T-4"},
		{name: "since a time", query: "since=" + url.QueryEscape(base.Add(2*time.Minute).Format(time.RFC3339)), want: "invalid drift T-5 T-4 T-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, h, body := get(t, s, "/api/decisions?"+tc.query, nil)
			if code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "application/json") {
				t.Fatalf("%d %s: %s", code, h.Get("Content-Type"), body)
			}
			var l ui.List
			if err := json.Unmarshal(body, &l); err != nil {
				t.Fatal(err)
			}
			if got := tasks(l); got != tc.want {
				t.Errorf("decisions %q, want %q", got, tc.want)
			}
			if (l.Next != "") != tc.next {
				t.Errorf("next %q, want a cursor: %v", l.Next, tc.next)
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		var all []string
		cursor := ""
		for range 10 {
			_, _, body := get(t, s, "/api/decisions?limit=3&cursor="+cursor, nil)
			var l ui.List
			if err := json.Unmarshal(body, &l); err != nil {
				t.Fatal(err)
			}
			for _, e := range l.Decisions {
				all = append(all, fmt.Sprint(e.Seq))
			}
			if cursor = l.Next; cursor == "" {
				break
			}
		}
		if got := strings.Join(all, " "); got != "7 6 5 4 3 2 1" {
			t.Errorf("pages gave sequences %s", got)
		}
	})

	t.Run("a scan is bounded", func(t *testing.T) {
		s := f.server(t, ui.Options{MaxScan: 2})
		_, _, body := get(t, s, "/api/decisions?role=tester", nil)
		var l ui.List
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Decisions) != 0 || l.Scanned != 2 || l.Next != "5" {
			t.Errorf("after 2 messages: %d decisions, scanned %d, next %q; want 0, 2, 5", len(l.Decisions), l.Scanned, l.Next)
		}
	})

	t.Run("deleted messages count toward the bound", func(t *testing.T) {
		g := newFixture(t)
		stream, err := g.js.Stream(context.Background(), g.cfg.SpecsStream)
		if err != nil {
			t.Fatal(err)
		}
		// The two newest outcomes before the drift event (T-5, T-4) go.
		for _, seq := range g.seqs[3:] {
			if err := stream.DeleteMsg(context.Background(), seq); err != nil {
				t.Fatal(err)
			}
		}
		s := g.server(t, ui.Options{MaxScan: 4})
		_, _, body := get(t, s, "/api/decisions?role=tester", nil)
		var l ui.List
		if err := json.Unmarshal(body, &l); err != nil {
			t.Fatal(err)
		}
		// junk, drift, (T-5), (T-4): four sequences read, T-3 not reached.
		if len(l.Decisions) != 0 || l.Scanned != 4 || l.Next != "3" {
			t.Errorf("after 4 sequences: %d decisions, scanned %d, next %q; want 0, 4, 3", len(l.Decisions), l.Scanned, l.Next)
		}
	})

	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "cursor=0", "cursor=-1", "since=yesterday", "role=" + strings.Repeat("a", 129), "kind=resolvd", "kind=Failed"} {
		t.Run("bad "+q[:min(len(q), 12)], func(t *testing.T) {
			code, _, body := get(t, s, "/api/decisions?"+q, nil)
			if code != http.StatusBadRequest || !strings.Contains(string(body), `"code":"bad_request"`) {
				t.Errorf("%s: %d %s", q, code, body)
			}
		})
	}
}

// TestDetail: a decision with its explain chain against the current
// snapshot, and what happens when it cannot be explained or found.
func TestDetail(t *testing.T) {
	f := newFixture(t)
	s := f.server(t, ui.Options{})
	decode := func(t *testing.T, body []byte) ui.Detail {
		t.Helper()
		var d ui.Detail
		if err := json.Unmarshal(body, &d); err != nil {
			t.Fatalf("%v: %s", err, body)
		}
		return d
	}

	t.Run("explained, same configuration, with drift", func(t *testing.T) {
		code, _, body := get(t, s, "/api/decisions/"+f.ids[0], nil)
		if code != http.StatusOK {
			t.Fatalf("%d %s", code, body)
		}
		d := decode(t, body)
		if d.Explain == nil || d.ExplainError != nil || d.Explain.Recorded == nil || !d.Explain.Recorded.SameConfig {
			t.Fatalf("explain %+v, error %+v", d.Explain, d.ExplainError)
		}
		if len(d.Explain.Fields) != 16 || d.Explain.Fields[2].Field != "model" || d.Explain.Fields[2].Value != "model-t" {
			t.Errorf("fields: %+v", d.Explain.Fields)
		}
		if len(d.Drift) != 1 || d.Drift[0].Drift.AllocationID != "a1" {
			t.Errorf("drift: %+v", d.Drift)
		}
		// What tasks and files wrote is escaped in the JSON, so the
		// response is inert even if opened as a page.
		if strings.Contains(string(body), "<script>") || !strings.Contains(string(body), `\u003cscript\u003e`) {
			t.Errorf("the response holds unescaped markup")
		}
	})

	t.Run("by sequence", func(t *testing.T) {
		code, _, body := get(t, s, fmt.Sprintf("/api/decisions/%s?seq=%d", f.ids[2], f.seqs[2]), nil)
		d := decode(t, body)
		if code != http.StatusOK || d.Decision.Code == nil || *d.Decision.Code != "mode_unknown" || d.Explain.Outcome != "failed" {
			t.Fatalf("%d %s", code, body)
		}
	})

	t.Run("a wrong sequence falls back to the store", func(t *testing.T) {
		code, _, body := get(t, s, fmt.Sprintf("/api/decisions/%s?seq=%d", f.ids[1], f.seqs[0]), nil)
		if d := decode(t, body); code != http.StatusOK || d.Decision.ID != f.ids[1] {
			t.Fatalf("%d %s", code, body)
		}
	})

	t.Run("a drift event's sequence is no outcome", func(t *testing.T) {
		// As the audit publishes it: the drift id is its message id.
		ack, err := f.js.PublishMsg(context.Background(), &nats.Msg{Subject: "rolecall.specs.drift.model", Header: nats.Header{"Nats-Msg-Id": {"rd-1"}},
			Data: []byte(`{"specversion": "1.0", "id": "rd-1", "source": "rolecall", "type": "` + audit.TypeDrift + `", "data": {"decision_id": "` + f.ids[0] + `", "allocation_id": "a2", "fields": [], "code": null}}`)})
		if err != nil {
			t.Fatal(err)
		}
		// The same answer with the sequence as without it.
		for _, path := range []string{fmt.Sprintf("/api/decisions/rd-1?seq=%d", ack.Sequence), "/api/decisions/rd-1"} {
			if code, _, body := get(t, s, path, nil); code != http.StatusNotFound || !strings.Contains(string(body), `"code":"outcome_not_found"`) {
				t.Errorf("%s: %d %s", path, code, body)
			}
		}
	})

	t.Run("another configuration", func(t *testing.T) {
		id, _ := outcometest.Store(t, f.js, f.cfg, f.snap, outcometest.Outcome{Source: "planner", ID: "e9", Task: `{"task_id": "T-9", "role": "tester"}`, Digest: "sha256:before"})
		_, _, body := get(t, s, "/api/decisions/"+id, nil)
		d := decode(t, body)
		if d.Explain == nil || d.Explain.Recorded.SameConfig || d.Explain.Recorded.Config.Digest != "sha256:before" || d.Explain.Config.Digest != f.snap.Digest {
			t.Fatalf("%s", body)
		}
	})

	t.Run("no decision record", func(t *testing.T) {
		code, _, body := get(t, s, "/api/decisions/"+f.ids[4], nil)
		d := decode(t, body)
		if code != http.StatusOK || d.Explain != nil || d.ExplainError == nil || d.ExplainError.Code != "decision_missing" {
			t.Fatalf("%d %s", code, body)
		}
	})

	for _, tc := range []struct {
		name, path string
		status     int
		code       string
	}{
		{"unknown id", "/api/decisions/rc-unknown", http.StatusNotFound, "outcome_not_found"},
		{"id too long", "/api/decisions/" + strings.Repeat("x", 300), http.StatusBadRequest, "bad_request"},
		// Ids no outcome can have: not found, not an internal fault.
		{"malformed id", "/api/decisions/rc-*", http.StatusNotFound, "outcome_not_found"},
		{"id with a path", "/api/decisions/..%2Frc-1", http.StatusNotFound, "outcome_not_found"},
		{"id with a space", "/api/decisions/rc%201", http.StatusNotFound, "outcome_not_found"},
		// Paths the API does not serve answer in its error shape.
		{"no id", "/api/decisions/", http.StatusNotFound, "not_found"},
		{"a path under an id", "/api/decisions/rc-1/x", http.StatusNotFound, "not_found"},
		{"another API path", "/api/decision", http.StatusNotFound, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, body := get(t, s, tc.path, nil)
			if code != tc.status || !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
				t.Fatalf("%d %s", code, body)
			}
		})
	}

	t.Run("stream gone", func(t *testing.T) {
		if err := f.js.DeleteStream(context.Background(), f.cfg.SpecsStream); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/api/decisions", "/api/decisions/" + f.ids[0]} {
			code, _, body := get(t, s, path, nil)
			if code != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"outcomes_unavailable"`) {
				t.Errorf("%s: %d %s", path, code, body)
			}
		}
	})
}

// TestSecurity: headers, read-only methods, the bearer token and the
// loopback host rule.
func TestSecurity(t *testing.T) {
	f := newFixture(t)
	open := f.server(t, ui.Options{})
	locked := f.server(t, ui.Options{Token: []byte("s3cret")})
	bearer := func(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

	for _, tc := range []struct {
		name   string
		s      *httptest.Server
		path   string
		header http.Header
		status int
	}{
		{"page", open, "/ui/", nil, http.StatusOK},
		{"script", open, "/ui/app.js", nil, http.StatusOK},
		{"root redirects", open, "/", nil, http.StatusOK},
		{"api without token where none is set", open, "/api/decisions", nil, http.StatusOK},
		{"page needs no token", locked, "/ui/", nil, http.StatusOK},
		{"api without token", locked, "/api/decisions", nil, http.StatusUnauthorized},
		{"api with a wrong token", locked, "/api/decisions", bearer("s3cre"), http.StatusUnauthorized},
		{"api with a longer token", locked, "/api/decisions", bearer("s3cret!"), http.StatusUnauthorized},
		{"api with the token, not as bearer", locked, "/api/decisions", http.Header{"Authorization": {"s3cret"}}, http.StatusUnauthorized},
		{"api with the token", locked, "/api/decisions", bearer("s3cret"), http.StatusOK},
		{"detail without token", locked, "/api/decisions/" + f.ids[0], nil, http.StatusUnauthorized},
		{"detail with the token", locked, "/api/decisions/" + f.ids[0], bearer("s3cret"), http.StatusOK},
		{"an unknown API path without token", locked, "/api/nothing", nil, http.StatusUnauthorized},
		{"an unknown API path with the token", locked, "/api/nothing", bearer("s3cret"), http.StatusNotFound},
		{"a rebinding host without token", open, "/api/decisions", http.Header{"Host": {"evil.example:80"}}, http.StatusForbidden},
		{"localhost", open, "/api/decisions", http.Header{"Host": {"localhost:8081"}}, http.StatusOK},
		{"any host with a token", locked, "/api/decisions", http.Header{"Host": {"audit.example"}, "Authorization": {"Bearer s3cret"}}, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.s.URL+tc.path, nil)
			for k, v := range tc.header {
				req.Header[k] = v
			}
			if h := tc.header.Get("Host"); h != "" {
				req.Host = h
			}
			res, err := tc.s.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.status)
			}
			csp := res.Header.Get("Content-Security-Policy")
			if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if res.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no nosniff")
			}
		})
	}

	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
		req, _ := http.NewRequest(m, open.URL+"/api/decisions", strings.NewReader("{}"))
		res, err := open.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d", m, res.StatusCode)
		}
	}

	// The page loads nothing from elsewhere and writes no inline script.
	_, _, page := get(t, open, "/ui/", nil)
	for _, bad := range []string{"http://", "https://", "//", "<script>", "onclick", "style="} {
		if strings.Contains(string(page), bad) {
			t.Errorf("the page holds %q", bad)
		}
	}
	_, _, script := get(t, open, "/ui/app.js", nil)
	if strings.Contains(string(script), "innerHTML") || strings.Contains(string(script), "insertAdjacentHTML") {
		t.Error("the script builds HTML from strings")
	}
}

func TestListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		loop bool
	}{
		{"127.0.0.1:0", true}, {"[::1]:0", true}, {"localhost:8081", true}, {"127.1.2.3:80", true},
		{":8081", false}, {"0.0.0.0:8081", false}, {"[::]:8081", false}, {"10.0.0.5:8081", false}, {"audit.example:8081", false}, {"nonsense", false},
	} {
		if got := ui.IsLoopback(tc.addr); got != tc.loop {
			t.Errorf("IsLoopback(%q) = %v", tc.addr, got)
		}
	}
	f := newFixture(t)
	opt := ui.Options{JetStream: f.js, Config: f.cfg, Snapshots: staticSource{f.snap}}
	if _, err := ui.Listen("0.0.0.0:0", opt); err != ui.ErrTokenRequired {
		t.Fatalf("Listen on every address without a token: %v", err)
	}
	opt.Token = []byte("t")
	s, err := ui.Listen("127.0.0.1:0", opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	res, err := http.Get("http://" + s.Addr().String() + "/api/decisions")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a token on loopback is required too: %d", res.StatusCode)
	}
}
