package reliability_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/internal/hostile"
	"github.com/rolecall/rolecall/internal/schematest"
	"github.com/rolecall/rolecall/resolve"
)

// hostileDir is the corpus: testdata/hostile at the module root.
func hostileDir() string { return filepath.Join(bin.moduleRoot, "testdata", "hostile") }

func hostileFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(hostileDir(), "files", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func loadCorpus(t testing.TB) []hostile.Event {
	t.Helper()
	return hostile.Load(t, filepath.Join(hostileDir(), "events"))
}

// TestHostileEvents publishes every event of the corpus to a real worker.
// Each gets exactly one outcome: the typed decode failure the manifest
// names (with the task id wherever one is readable), or a resolution for
// the entries that only look hostile. After each category a good task
// must still resolve, and the worker's peak RSS stays under a bound.
func TestHostileEvents(t *testing.T) {
	corpus := loadCorpus(t)
	srv := startNATS(t, "")
	root := openDir(t)
	w := startWorker(t, srv.url(), root, workerOpts{args: []string{"--ack-wait", "2s", "--max-deliver", "2", "--log-level", "warn"}})
	c := connect(t, srv.url())
	c.waitStream(defaults.SpecsStream)
	hwmStart := w.statusKB("VmHWM")

	var stored uint64 // outcomes in ROLECALL_SPECS so far; they are read one by one
	next := func(t *testing.T) outcome {
		t.Helper()
		stored++
		c.in(t).waitSpecs(int(stored), 20*time.Second)
		return c.in(t).outcomeAt(stored)
	}
	failures, resolved := 0, 0
	for i := 0; i < len(corpus); {
		cat := corpus[i].Category
		for ; i < len(corpus) && corpus[i].Category == cat; i++ {
			e := corpus[i]
			ok := t.Run(cat+"/"+e.Name, func(t *testing.T) {
				hdr, body := e.Message(t, testSource)
				seq := c.in(t).publishRaw("rolecall.tasks.hostile", hdr, body)
				o := next(t)
				checkHostileOutcome(t, e, seq, o, root)
				if e.Expect == "resolved" {
					resolved++
				} else {
					failures++
				}
			})
			if !ok && stored > uint64(c.specsCount()) {
				t.Fatalf("%s produced no outcome; the remaining entries cannot be matched", e.Name)
			}
		}
		// The worker is still up and still answers a good task.
		id := "good-after-" + cat
		c.publishTask(id, fmt.Sprintf(`{"task_id":"T-good-%s","role":"architect"}`, cat), true)
		o := next(t)
		if o.ext(events.ExtCausationID) != id || o.ev.Type() != events.TypeSpecResolved {
			t.Fatalf("after %s: outcome %s for %q, want the good task resolved", cat, o.ev.Type(), o.ext(events.ExtCausationID))
		}
		if w.exited() {
			t.Fatalf("the worker exited after the %s batch: %v", cat, w.state)
		}
	}
	// An empty manifest, or one that lost every entry of one kind, would
	// pass the loop above without checking anything of that kind.
	if failures == 0 || resolved == 0 {
		t.Errorf("%d corpus entries checked as typed failures and %d as resolved: want both", failures, resolved)
	}
	hwmEnd := w.statusKB("VmHWM")
	if extra := c.specsCount() - int(stored); extra != 0 {
		t.Errorf("%d more outcomes than events: something was answered twice", extra)
	}
	if !w.waitReady(5 * time.Second).Ready {
		t.Error("worker not ready after the corpus")
	}
	t.Logf("figures: corpus_events=%d typed_failures=%d resolved=%d worker_VmHWM_before=%dKiB after=%dKiB bound=%dKiB",
		len(corpus), failures, resolved, hwmStart, hwmEnd, 256<<10)
	if hwmEnd > 256<<10 {
		t.Errorf("worker peak RSS %d KiB after the corpus, over the 256 MiB bound", hwmEnd)
	}
}

func checkHostileOutcome(t *testing.T, e hostile.Event, seq uint64, o outcome, root string) {
	t.Helper()
	cause := o.ext(events.ExtCausationID)
	if o.msgID != events.OutcomeIDForSequence(defaults.TasksStream, seq) && o.msgID != events.OutcomeID(testSource, cause) {
		t.Errorf("outcome id %s is neither OutcomeID(source, %q) nor the sequence id of %d", o.msgID, cause, seq)
	}
	assertNoHostPath(t, o.body, root)
	if e.Expect == "resolved" {
		if o.ev.Type() != events.TypeSpecResolved {
			t.Fatalf("%s (%s): got %s %s, want resolved", e.Name, e.Why, o.ev.Type(), tail(string(o.ev.Data()), 400))
		}
		if r := o.resolved(t); e.TaskID != nil && r.TaskID != *e.TaskID {
			t.Errorf("resolved task %q, want %q", r.TaskID, *e.TaskID)
		}
		return
	}
	if o.ev.Type() != events.TypeSpecFailed {
		t.Fatalf("%s (%s): got %s, want a %s failure", e.Name, e.Why, o.ev.Type(), e.Code)
	}
	if err := schematest.Validate(events.SchemaFailed, o.ev.Data()); err != nil {
		t.Errorf("failure data does not match failed.v1.json: %v", err)
	}
	f := o.failure(t)
	reason, _ := f.Details["reason"].(string)
	stage := resolve.Code(e.Code).Stage()
	if f.Stage != stage || string(f.Code) != e.Code || reason != e.Reason {
		t.Errorf("%s (%s): got %s/%s reason %q (%s), want %s/%s reason %q", e.Name, e.Why, f.Stage, f.Code, reason, f.Message, stage, e.Code, e.Reason)
	}
	if e.Subject != nil && (f.Subject == nil || *f.Subject != *e.Subject) {
		t.Errorf("%s: subject %v, want %q", e.Name, str(f.Subject), *e.Subject)
	}
	if str(f.TaskID) != str(e.TaskID) {
		t.Errorf("%s: failure task_id %s, want %s", e.Name, str(f.TaskID), str(e.TaskID))
	}
	// A failure never echoes a hostile input at length.
	if len(f.Message) > 1024 || len(str(f.Subject)) > 1024 {
		t.Errorf("%s: unbounded failure: message %d bytes, subject %d bytes", e.Name, len(f.Message), len(str(f.Subject)))
	}
	if data := o.ev.Data(); len(data) > 8<<10 {
		t.Errorf("%s: failure data is %d bytes; hostile input is echoed", e.Name, len(data))
	}
}

func str(p *string) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *p)
}
