package audit_test

import (
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/audit"
)

// FuzzDecodeAllocated: any body, in either content mode, decodes or is an
// allocation_invalid error; never a panic, and a decoded event holds
// printable ids and bounded values.
func FuzzDecodeAllocated(f *testing.F) {
	f.Add(allocated("a-1", "rc-1", "m", "high"), false)
	f.Add(allocated("a-2", "rc-1", "", ""), false)
	f.Add([]byte(`{"decision_id": "rc-1", "model": "m"}`), true)
	f.Add([]byte(`{"specversion": "1.0", "id": "x", "source": "s", "type": "dev.rolecall.agentspec.allocated.v1", "data": null}`), false)
	f.Add([]byte(`{"decision_id": 7}`), true)
	f.Fuzz(func(t *testing.T, body []byte, binary bool) {
		h := nats.Header{}
		if binary {
			h.Set("ce-specversion", "1.0")
			h.Set("ce-id", "a-1")
			h.Set("ce-source", "allocator")
			h.Set("ce-type", audit.TypeAllocated)
		}
		ev, err := audit.DecodeAllocated(h, body)
		if err != nil {
			if e, ok := err.(*audit.Error); !ok || e.Code != audit.CodeAllocationInvalid {
				t.Fatalf("untyped error %T %v", err, err)
			}
			return
		}
		if ev.ID == "" || ev.Source == "" || ev.Data.DecisionID == "" {
			t.Fatalf("decoded without ids: %+v", ev)
		}
		for _, v := range []*string{ev.Data.Model, ev.Data.Effort, ev.Data.Provider} {
			if v != nil && (len(*v) > 256 || !utf8.ValidString(*v)) {
				t.Fatalf("value %q", *v)
			}
		}
	})
}
