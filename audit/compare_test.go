package audit_test

import (
	"testing"

	"github.com/rolecall/rolecall/audit"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/resolve"
)

func TestCompare(t *testing.T) {
	s := func(v string) *string { return &v }
	resolved := &explain.StoredOutcome{Resolved: &events.ResolvedData{ResolvedAgentSpec: resolve.ResolvedAgentSpec{Model: "m", Effort: s("high")}}}
	noEffort := &explain.StoredOutcome{Resolved: &events.ResolvedData{ResolvedAgentSpec: resolve.ResolvedAgentSpec{Model: "m"}}}
	failed := &explain.StoredOutcome{Failure: &events.FailureData{Code: resolve.CodeRoleUnknown}}
	ev := func(model, effort *string) audit.AllocatedEvent {
		return audit.AllocatedEvent{ID: "a", Source: "s", Data: audit.Allocation{DecisionID: "rc-1", Model: model, Effort: effort}}
	}
	for _, c := range []struct {
		name string
		ev   audit.AllocatedEvent
		so   *explain.StoredOutcome
		want []string // field=decided→allocated
	}{
		{"match", ev(s("m"), s("high")), resolved, nil},
		{"nothing reported", ev(nil, nil), resolved, nil},
		{"model", ev(s("x"), s("high")), resolved, []string{"model=m→x"}},
		{"both, model first", ev(s("x"), s("low")), resolved, []string{"model=m→x", "effort=high→low"}},
		{"effort decided by the provider", ev(s("m"), s("low")), noEffort, []string{"effort=null→low"}},
		{"a failed decision", ev(s("m"), nil), failed, []string{"model=null→m"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := audit.Compare(c.ev, c.so)
			if (d == nil) != (c.want == nil) {
				t.Fatalf("drift %+v, want one only when a field differs (%v)", d, c.want)
			}
			var got []string
			if d != nil {
				if d.Code != nil || d.DecisionID != "rc-1" || d.AllocationID != "a" {
					t.Errorf("drift %+v", d)
				}
				for _, f := range d.Fields {
					dec := "null"
					if f.Decided != nil {
						dec = *f.Decided
					}
					got = append(got, f.Field+"="+dec+"→"+f.Allocated)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("got %v, want %v", got, c.want)
				}
			}
		})
	}
	if a, b := audit.DriftID("s", "a"), audit.DriftID("s", "b"); a == b || a != "rd-"+a[3:] || len(a) != 35 {
		t.Error("drift ids are not derived from the allocation")
	}
}
