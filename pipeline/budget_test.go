package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rolecall/rolecall/pipeline"
)

// TestRetryForIsOneBudgetPerDelivery: retry_for bounds a delivery's
// retrying in place as a whole, not each of its steps: a look-up that
// fails for most of it leaves its publish only what is left, so the
// delivery is nak'ed retry_for after its first fault, as the duplicate
// window's rule (RequiredDuplicateWindow) assumes.
func TestRetryForIsOneBudgetPerDelivery(t *testing.T) {
	cfg := testConfig()
	cfg.RetryFor = 3 * time.Second
	h := newHarness(t, cfg)
	var mu sync.Mutex
	var last time.Time // the first delivery's last publish attempt
	h.start(loadSource(t, emptyRoot(t)), pipeline.Options{Hooks: pipeline.Hooks{BeforePublish: func(_ context.Context, o *pipeline.Outcome, delivery uint64) error {
		if o.Resolved == nil || o.Resolved.TaskID != "T-budget" || delivery > 1 {
			return nil
		}
		mu.Lock()
		last = time.Now()
		mu.Unlock()
		return context.DeadlineExceeded // the broker does not answer
	}}})
	// A first task shows the worker is running with its store.
	warm := h.submit(`{"task_id":"T-warm","role":"architect"}`, false)
	exactlyOnce(t, []string{warm}, h.waitOutcomes(1, 10*time.Second))

	// The store goes away: the look-up fails until it is back, half of
	// retry_for later; then the publish fails for the rest of the delivery.
	ctx := context.Background()
	if err := h.js.DeleteKeyValue(ctx, cfg.OutcomesBucket); err != nil {
		t.Fatal(err)
	}
	faults := time.Now()
	id := h.submit(`{"task_id":"T-budget","role":"architect"}`, false)
	time.Sleep(cfg.RetryFor / 2)
	if _, err := pipeline.Ensure(ctx, h.js, cfg); err != nil {
		t.Fatal(err)
	}
	exactlyOnce(t, []string{warm, id}, h.waitOutcomes(2, 20*time.Second))
	mu.Lock()
	defer mu.Unlock()
	if last.IsZero() {
		t.Fatal("the first delivery never reached its publish")
	}
	if spent, limit := last.Sub(faults), cfg.RetryFor+500*time.Millisecond; spent > limit {
		t.Errorf("the first delivery still tried to publish %s after its first fault, over retry_for (%s)", spent.Round(time.Millisecond), cfg.RetryFor)
	}
}
