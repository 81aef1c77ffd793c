package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/pipeline"
)

// TestConfigRevisionOnEveryOutcome: every outcome decided under a config
// bundle carries Rolecall-Config-Revision, the revision its decision
// record cites: a resolved one, a decode failure and the dead-letter
// path's delivery_exhausted alike.
func TestConfigRevisionOnEveryOutcome(t *testing.T) {
	cfg := testConfig()
	cfg.MaxDeliver = 2
	h := newHarness(t, cfg)
	src := loadSource(t, emptyRoot(t))
	src.snap.ConfigSource, src.snap.Revision = discover.ConfigFromNATS, 42
	h.start(src, pipeline.Options{Hooks: pipeline.Hooks{BeforePublish: func(_ context.Context, o *pipeline.Outcome, _ uint64) error {
		if o.Resolved != nil && o.Resolved.TaskID == "T-dead" {
			return errors.New("injected transient fault")
		}
		return nil
	}}})
	h.submit(`{"task_id":"T-ok","role":"architect"}`, false)
	h.publishRaw(nats.Header{"Content-Type": []string{events.ContentTypeCloudEventsJSON}}, []byte(`{"specversion":"1.0",`))
	h.submit(`{"task_id":"T-dead","role":"architect"}`, false)
	outs := h.waitOutcomes(3, 20*time.Second)
	s, err := h.js.Stream(context.Background(), h.cfg.SpecsStream)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		m, err := s.GetMsg(context.Background(), uint64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Header.Get(pipeline.HeaderConfigRevision); got != "42" {
			t.Errorf("outcome %s (%s): %s %q, want 42", o.subject, o.ev.Type(), pipeline.HeaderConfigRevision, got)
		}
	}
}
