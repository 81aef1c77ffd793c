package ui_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/audit"
	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/natstest"
	"github.com/rolecall/rolecall/internal/outcometest"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/ui"
)

var screenshot = flag.String("ui.screenshot", "", "write a PNG screenshot of the audit view to this file (docs/images/audit-view.png)")

// chromium finds a Chromium the way chromedp does, plus Debian's path.
// Without one the test skips, unless ROLECALL_REQUIRE_CHROMIUM=1 (set by
// .ci/run, which installs it) makes that a failure.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "headless-shell", "google-chrome", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("ROLECALL_REQUIRE_CHROMIUM") == "1" {
		t.Fatal("no Chromium found and ROLECALL_REQUIRE_CHROMIUM=1: install it (apt-get install -y chromium)")
	}
	t.Skip("no Chromium on this machine (apt-get install -y chromium installs it; .ci/run does): the browser test does not run")
	return ""
}

// TestBrowser drives the audit view in headless Chromium: a worker with
// embedded NATS decides the example tasks, the page filters them by code,
// opens a decision and shows its explain chain, and a hostile prompt is
// shown as text.
func TestBrowser(t *testing.T) {
	exe := chromium(t)
	snap, err := discover.Load("../examples", discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, natstest.Start(t))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.DefaultConfig()
	cfg.Concurrency = 4
	outcometest.RunWorker(t, js, staticSource{snap}, cfg, pipeline.Options{})

	const hostileTask = `{"task_id": "T-120", "role": "researcher", "pack": "research",
		"overrides": {"extra_prompt": "Summarise <script>window.__pwned = 1</script> and <img src=x onerror=\"window.__pwned = 2\">"}}`
	submit(t, js, nc, cfg, map[string]string{
		"architect":  `{"task_id": "T-100", "role": "architect", "modes": ["systematic", "premortem"], "overrides": {"effort": "high"}}`,
		"research":   `{"task_id": "T-101", "role": "researcher", "pack": "research", "overrides": {"tools": []}}`,
		"review":     `{"task_id": "T-102", "role": "reviewer"}`,
		"incident":   `{"task_id": "T-103", "role": "external:incident-commander"}`,
		"bad-modes":  `{"task_id": "T-105", "role": "analyst", "modes": ["fast", "slow"]}`,
		"bad-modes2": `{"task_id": "T-108", "role": "analyst", "modes": ["fast"]}`,
		"inactive":   `{"task_id": "T-106", "role": "critic", "pack": "research"}`,
		"tiered":     `{"task_id": "T-107", "role": "researcher", "pack": "research", "skills": ["cite-*"], "overrides": {"model": "tier:cheap"}}`,
		"hostile":    hostileTask,
	})
	// One outcome stored as a worker writes it, under a known id, so that
	// the page has a decision with a hostile task to explain.
	id, seq := outcometest.Store(t, js, cfg, snap, outcometest.Outcome{Source: "planner", ID: "recorded-1", Task: hostileTask, Time: time.Now()})
	// One that the recorded configuration now decides otherwise: decided
	// with another researcher model, recorded under the digest served.
	other := t.TempDir()
	if err := os.MkdirAll(other+"/packs", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other+"/packs/research.yaml", []byte("roles:\n  researcher:\n    model: claude-opus-4-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	otherSnap, err := discover.Load(other, discover.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nondetID, nondetSeq := outcometest.Store(t, js, cfg, otherSnap, outcometest.Outcome{Source: "planner", ID: "recorded-2",
		Task: `{"task_id": "T-121", "role": "researcher", "pack": "research"}`, Time: time.Now(), Digest: snap.Digest})
	drift := fmt.Sprintf(`{"specversion": "1.0", "id": "drift-1", "source": "rolecall", "type": %q, "time": %q, "datacontenttype": "application/json",
		"data": {"decision_id": %q, "allocation_id": "alloc-7", "fields": [{"field": "model", "decided": "claude-haiku-4-5", "allocated": "claude-sonnet-4-5"}]}}`,
		audit.TypeDrift, time.Now().UTC().Format(time.RFC3339), id)
	if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: cfg.Prefix + ".specs.drift.model", Data: []byte(drift),
		Header: nats.Header{"Content-Type": {"application/cloudevents+json"}}}); err != nil {
		t.Fatal(err)
	}

	srv, err := ui.Listen("127.0.0.1:0", ui.Options{JetStream: js, Config: cfg, Snapshots: staticSource{snap}, Token: []byte("t0ken")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close(context.Background()) })
	page := "http://" + srv.Addr().String() + "/ui/"

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1440, 1200))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	// The timeout only keeps a broken page from hanging the test; every
	// wait below is for a condition.
	bctx, tcancel := context.WithTimeout(bctx, 60*time.Second)
	defer tcancel()
	var (
		mu       sync.Mutex
		problems []string
	)
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+ev.ExceptionDetails.Text)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				problems = append(problems, "log: "+ev.Entry.Text)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	report := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}
	if _, err := chromedp.Call(bctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}

	// Filter by code.
	err = chromedp.Do(bctx,
		// The token travels in the fragment, which the browser never sends.
		chromedp.Navigate(page+"#token=t0ken"),
		chromedp.WaitVisible(chromedp.CSS(`#decisions tbody tr[data-id]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=code]`), "mode_disallowed"),
		chromedp.Click(chromedp.CSS(`#apply`)),
	)
	if err == nil {
		_, err = chromedp.Run(bctx, chromedp.Poll[bool](`(() => { const r = [...document.querySelectorAll("#decisions tbody tr")];
			return r.length > 0 && r.every(x => x.querySelector(".code").textContent === "mode_disallowed"); })()`))
	}
	if err != nil {
		t.Fatalf("filter by code: %v (page problems: %q)", err, report())
	}
	codes := run(t, bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#decisions tbody tr .code")].map(c => c.textContent)`))
	if strings.Join(codes, " ") != "mode_disallowed mode_disallowed" {
		t.Errorf("filtered by code, the table shows codes %q", codes)
	}
	if byCode := run(t, bctx, chromedp.Text(chromedp.CSS(`#by-code`))); !strings.Contains(byCode, "mode_disallowed") || !strings.Contains(byCode, "2") {
		t.Errorf("failures by code: %q", byCode)
	}

	// Open a decision.
	row := chromedp.CSS(fmt.Sprintf(`#decisions tbody tr[data-seq="%d"]`, seq))
	if err := chromedp.Do(bctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector("input[name=code]").value = ""`),
		chromedp.Click(chromedp.CSS(`#apply`)),
		chromedp.WaitVisible(row),
		chromedp.Click(row),
		chromedp.WaitVisible(chromedp.CSS(`#chain .field[data-field=prompt]`)),
	); err != nil {
		t.Fatalf("open a decision: %v (page problems: %q)", err, report())
	}
	text := func(sel string) string { return run(t, bctx, chromedp.Text(chromedp.CSS(sel))) }
	if heading := text(`#detail-id`); heading != id {
		t.Errorf("the detail shows decision %q, want %q", heading, id)
	}
	if note := text(`#config-note`); !strings.Contains(note, "made with") {
		t.Errorf("config note %q", note)
	}
	model, selected := text(`#chain .field[data-field=model] h4`), text(`#chain .field[data-field=model] td.status-selected + td`)
	if !strings.Contains(model, `model = claude-haiku-4-5 (pack, packs/research.yaml:5)`) || selected != "pack" {
		t.Errorf("model chain: %q, selected %q", model, selected)
	}
	// The hostile extra prompt, as the prompt's block, in the prompt's full
	// value and in the recorded task: text each time.
	shown := run(t, bctx, chromedp.Evaluate[[]string](`[
		[...document.querySelectorAll('#chain .field[data-field=prompt] tbody tr')].find(r => r.cells[1].textContent === "task").querySelector(".value").textContent,
		document.querySelector('#chain .field[data-field=prompt] h4 .value').title,
		document.querySelector('#task').textContent]`))
	for i, s := range shown {
		if !strings.Contains(s, `<script>window.__pwned = 1</script>`) || !strings.Contains(s, `<img src=x onerror=`) {
			t.Errorf("the hostile prompt is not shown as text (%d): %q", i, s)
		}
	}
	if pwned, scripts := run(t, bctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`)), run(t, bctx, chromedp.Evaluate[int](`document.scripts.length`)); pwned || scripts != 1 {
		t.Errorf("hostile markup ran or was inserted: pwned %v, %d scripts", pwned, scripts)
	}
	if drift := text(`#detail-drift`); !strings.Contains(drift, "alloc-7") || !strings.Contains(drift, "allocated claude-sonnet-4-5") {
		t.Errorf("drift: %q", drift)
	}
	if byRole := text(`#by-role`); !strings.Contains(byRole, "architect") || !strings.Contains(byRole, "claude-opus-4-1") {
		t.Errorf("model by role: %q", byRole)
	}
	// Under the recorded configuration a change is a determinism failure,
	// and the note says so.
	err = chromedp.Do(bctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#decisions tbody tr[data-seq="%d"]`, nondetSeq))))
	if err == nil {
		_, err = chromedp.Run(bctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById("detail-id").textContent === %q`, nondetID)))
	}
	if err != nil {
		t.Fatalf("open a decision that changed: %v (page problems: %q)", err, report())
	}
	if note, class := text(`#config-note`), run(t, bctx, chromedp.Evaluate[string](`document.getElementById("config-note").className`)); !strings.Contains(note, "made with") ||
		!strings.Contains(note, "determinism failure") || !strings.Contains(note, "model") || class != "differs" {
		t.Errorf("config note of a decision that changed under its own configuration: %q (class %q)", note, class)
	}
	if p := report(); len(p) > 0 {
		t.Errorf("the page reported problems (a Content-Security-Policy violation is one): %q", p)
	}

	if *screenshot != "" {
		png := run(t, bctx, chromedp.CaptureScreenshot())
		if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// submit sends tasks to the worker and waits for an outcome of each.
func submit(t *testing.T, js jetstream.JetStream, nc *nats.Conn, cfg pipeline.Config, tasks map[string]string) {
	t.Helper()
	outcomes := make(chan *nats.Msg, len(tasks))
	sub, err := nc.ChanSubscribe(cfg.Prefix+".specs.>", outcomes)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	want := map[string]bool{}
	for id, data := range tasks {
		h, body, err := events.EncodeTask("browser-test", id, []byte(data), "", "", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.PublishMsg(context.Background(), &nats.Msg{Subject: cfg.Prefix + ".tasks.any", Header: h, Data: body}); err != nil {
			t.Fatal(err)
		}
		want[events.OutcomeID("browser-test", id)] = true
	}
	deadline := time.After(30 * time.Second) // keeps a lost outcome from hanging the test
	for len(want) > 0 {
		select {
		case m := <-outcomes:
			delete(want, m.Header.Get(nats.MsgIdHdr))
		case <-deadline:
			t.Fatalf("%d tasks got no outcome", len(want))
		}
	}
}
