package reliability_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// loadRoles is the mix of the load tests: four built-in Roles that
// resolve and one that does not exist, so both outcome kinds are counted.
var loadRoles = []string{"architect", "analyst", "critic", "tester", "nobody"}

func loadTask(i int) string {
	return fmt.Sprintf(`{"task_id":"T-%05d","role":%q}`, i, loadRoles[i%len(loadRoles)])
}

// checkLoadAnswers asserts that every outcome is the right answer for its
// task: a resolved spec of the asked Role, or role_unknown for "nobody".
// A kill or a restart must never turn one into the other.
func checkLoadAnswers(t testing.TB, outs []outcome) {
	t.Helper()
	wrong := 0
	for _, o := range outs {
		id := o.ext(events.ExtTaskID)
		i, err := strconv.Atoi(strings.TrimPrefix(id, "T-"))
		if err != nil {
			t.Fatalf("outcome %d has task id %q", o.seq, id)
		}
		role := loadRoles[i%len(loadRoles)]
		var problem string
		switch {
		case role == "nobody":
			if f := o.failure(t); f.Code != resolve.CodeRoleUnknown {
				problem = fmt.Sprintf("failure %s, want role_unknown", f.Code)
			}
		case o.ev.Type() != events.TypeSpecResolved:
			problem = fmt.Sprintf("type %s (%s), want resolved", o.ev.Type(), o.ev.Data())
		default:
			if r := o.resolved(t); r.Identity.Name != role || r.TaskID != id {
				problem = fmt.Sprintf("resolved %s for task %s", r.Identity.Name, r.TaskID)
			}
		}
		if problem != "" {
			wrong++
			if wrong <= 5 {
				t.Errorf("task %s (%s): %s", id, role, problem)
			}
		}
	}
	if wrong > 5 {
		t.Errorf("%d wrong answers in all", wrong)
	}
}

// submitPaced publishes n load tasks spread over about d, as a planner
// would, so that faults can be injected while tasks are still arriving.
// It returns the task event ids and a channel closed when all are stored.
func (c *client) submitPaced(prefix string, n int, d time.Duration) ([]string, <-chan struct{}) {
	c.t.Helper()
	const batch = 50
	ids := make([]string, n)
	msgs := make([]*nats.Msg, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s-%05d", prefix, i)
		hdr, body, err := events.EncodeTask(testSource, ids[i], []byte(loadTask(i)), "", "", i%2 == 1)
		if err != nil {
			c.t.Fatal(err)
		}
		msgs[i] = &nats.Msg{Subject: "rolecall.tasks.load", Header: hdr, Data: body}
	}
	done := make(chan struct{})
	errs := make(chan error, 1)
	pause := d / time.Duration((n+batch-1)/batch)
	go func() {
		defer close(done)
		var futures []jetstream.PubAckFuture
		for i := 0; i < n; i += batch {
			for _, m := range msgs[i:min(i+batch, n)] {
				f, err := c.js.PublishMsgAsync(m)
				if err != nil {
					errs <- err
					return
				}
				futures = append(futures, f)
			}
			time.Sleep(pause)
		}
		<-c.js.PublishAsyncComplete()
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				errs <- err
				return
			}
		}
	}()
	c.t.Cleanup(func() {
		<-done
		select {
		case err := <-errs:
			c.t.Errorf("submitting load: %v", err)
		default:
		}
	})
	return ids, done
}

// figures are the numbers a load test reports for docs/RELIABILITY.md.
type figures struct {
	tasks, outcomes, publishes, duplicates int
	deliveries, redeliveries               int
	naks                                   int
	maxHWMKB                               int64
	elapsed                                time.Duration
}

func (f figures) String() string {
	return fmt.Sprintf("tasks=%d outcomes=%d outcome_publishes=%d duplicates_suppressed=%d deliveries=%d redeliveries=%d naks=%d max_worker_VmHWM=%.1fMiB elapsed=%s",
		f.tasks, f.outcomes, f.publishes, f.duplicates, f.deliveries, f.redeliveries, f.naks, float64(f.maxHWMKB)/1024, f.elapsed.Round(time.Millisecond))
}
