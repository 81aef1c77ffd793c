package audit_test

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/audit"
)

// TestDecodeAllocatedNamesTheFirstBadField: of several bad fields the
// error names the first in the data's order (provider, model, effort),
// every time.
func TestDecodeAllocatedNamesTheFirstBadField(t *testing.T) {
	long := strings.Repeat("x", 1<<10)
	for _, tc := range []struct {
		data, want string
	}{
		{`{"decision_id":"rc-1","provider":"` + long + `","model":"` + long + `","effort":"` + long + `"}`, "data.provider"},
		{`{"decision_id":"rc-1","provider":"p","model":"` + long + `","effort":"` + long + `"}`, "data.model"},
		{`{"decision_id":"rc-1","model":"m","effort":"` + long + `"}`, "data.effort"},
	} {
		body := `{"specversion":"1.0","id":"a-1","source":"alloc","type":"` + audit.TypeAllocated + `","data":` + tc.data + `}`
		for range 20 {
			_, err := audit.DecodeAllocated(nil, []byte(body))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		}
	}
}

func TestAllocationsSubject(t *testing.T) {
	for _, tc := range []struct{ role, want string }{
		{"architect", "rolecall.allocations.architect"},
		{"external:incident-commander", "rolecall.allocations.external_incident-commander"},
	} {
		if got := audit.AllocationsSubject("rolecall", tc.role); got != tc.want {
			t.Errorf("AllocationsSubject(%q) = %q, want %q", tc.role, got, tc.want)
		}
	}
}

// TestDecodeAllocatedBinaryHeaderCase: binary mode is read whatever the
// case of the ce- header names, as the worker reads a task's.
func TestDecodeAllocatedBinaryHeaderCase(t *testing.T) {
	data := []byte(`{"decision_id": "rc-1", "model": "m"}`)
	for _, h := range []nats.Header{
		{"ce-specversion": {"1.0"}, "ce-id": {"a-1"}, "ce-source": {"alloc"}, "ce-type": {audit.TypeAllocated}},
		{"Ce-Specversion": {"1.0"}, "Ce-Id": {"a-1"}, "Ce-Source": {"alloc"}, "Ce-Type": {audit.TypeAllocated}},
		{"CE-SPECVERSION": {"1.0"}, "ce-Id": {"a-1"}, "CE-source": {"alloc"}, "Ce-type": {audit.TypeAllocated}},
	} {
		ev, err := audit.DecodeAllocated(h, data)
		if err != nil || ev.ID != "a-1" || ev.Source != "alloc" || ev.Data.DecisionID != "rc-1" || ev.Data.Model == nil || *ev.Data.Model != "m" {
			t.Errorf("headers %v: %+v, %v", h, ev, err)
		}
	}
}
