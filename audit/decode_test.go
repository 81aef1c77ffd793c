package audit_test

import (
	"strings"
	"testing"

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
