package events_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/rolecall/rolecall/events"
)

// TestFixedFields: outcomes that differ only in what a plan leaves to the
// task (task id, prompt body, prompt overlays, system message, inputs
// digest) encode to the same bytes with FixedFields filled by the first
// of them as without; an outcome the fast encoder leaves to the
// reflection one (artifact defaults nested too deep) fills nothing, and
// is still encoded as without.
func TestFixedFields(t *testing.T) {
	first := resolvedFor(t, `{"task_id":"T-1","role":"architect","modes":["systematic"],"overrides":{"tools":["read"],"extra_prompt":"One."}}`, nil)
	second := resolvedFor(t, `{"task_id":"T-2","role":"architect","modes":["systematic"],"overrides":{"tools":["read"],"extra_prompt":"Two, longer, with \"quotes\" and a line\nbreak."}}`, nil)
	noExtra := resolvedFor(t, `{"task_id":"T-3","role":"architect","modes":["systematic"],"overrides":{"tools":["read"]}}`, nil)
	deep := resolvedFor(t, `{"task_id":"T-4","role":"architect"}`, nil)
	deep.ArtifactDefaults = nested(100)

	encode := func(d *events.ResolvedData, fixed *events.FixedFields) []byte {
		t.Helper()
		meta := events.OutcomeMeta{ID: "rc-" + d.TaskID, TaskID: d.TaskID, Time: time.Unix(1700000000, 0).UTC(), Fixed: fixed}
		_, _, body, err := events.AppendResolved(nil, "rolecall", meta, d)
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	var fixed events.FixedFields
	for i, d := range []*events.ResolvedData{first, second, noExtra, second} {
		if got, want := encode(d, &fixed), encode(d, nil); !bytes.Equal(got, want) {
			t.Errorf("outcome %d (%s): with FixedFields\n%s\nwant\n%s", i, d.TaskID, got, want)
		}
	}
	if !events.FixedFilled(&fixed) {
		t.Error("FixedFields was not filled by a valid outcome")
	}
	var bad events.FixedFields
	if got, want := encode(deep, &bad), encode(deep, nil); !bytes.Equal(got, want) {
		t.Errorf("deep artifact defaults: with FixedFields\n%s\nwant\n%s", got, want)
	}
	if events.FixedFilled(&bad) {
		t.Error("FixedFields was filled by an outcome the fast encoder could not write")
	}
}
