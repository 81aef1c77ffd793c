package events_test

import (
	"errors"
	"fmt"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// A task event in binary content mode (ce- headers, data in the body),
// decoded the way a worker does.
func ExampleDecodeTask() {
	header, body, _ := events.EncodeTask("urn:planner", "evt-1",
		[]byte(`{"task_id":"T-42","role":"architect","modes":[]}`), "", "", true)
	inc, err := events.DecodeTask(header, body, events.DecodeOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(inc.Task.TaskID, inc.Ref.Token(), inc.Task.Modes != nil, len(inc.Task.Modes))
	fmt.Println(events.OutcomeID(inc.Source, inc.ID))
	// Output:
	// T-42 architect true 0
	// rc-934daff3d7f8780e02cf44f0ac4d1163
}

// A rejected task names the offending field by its JSON path.
func ExampleDecodeTaskData() {
	_, _, err := events.DecodeTaskData([]byte(`{"task_id":"T-1","role":"architect","overrides":{"model":""}}`), events.DecodeOptions{})
	var de *events.DecodeError
	if errors.As(err, &de) {
		fmt.Println(de.Code, de.Subject, de.Reason())
	}
	fmt.Println(errors.Is(err, &events.DecodeError{Code: resolve.CodeTaskInvalid}))
	// Output:
	// task_invalid overrides.model empty
	// true
}

// A failure outcome: its subject carries the code, its Nats-Msg-Id the
// outcome id shared by every outcome of the input.
func ExampleEncodeFailed() {
	subject, header, _, err := events.EncodeFailed("rolecall", events.OutcomeMeta{
		ID:     events.OutcomeID("urn:planner", "evt-1"),
		TaskID: "T-42",
	}, &events.FailureData{
		TaskID:  ptr("T-42"),
		Code:    resolve.CodeRoleUnknown,
		Subject: ptr("archtect"),
		Message: `role "archtect" is not in the catalog`,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(subject)
	fmt.Println(header.Get("Nats-Msg-Id"), header.Get("content-type"))
	// Output:
	// rolecall.specs.failed.role_unknown
	// rc-934daff3d7f8780e02cf44f0ac4d1163 application/cloudevents+json
}

func ExampleResolvedSubject() {
	fmt.Println(events.ResolvedSubject("rolecall", "external:foo"))
	// Output: rolecall.specs.resolved.external_foo
}
