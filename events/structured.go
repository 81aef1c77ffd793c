package events

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// outEvent is an event to write in the JSON event format. Writing it
// directly (rather than building an sdk-go event and calling
// event.WriteJson) keeps the source verbatim and the data marshaled once,
// straight into the body: a third of the encoding cost. The layout is
// sdk-go's: attributes in the order specversion, id, source, type,
// subject, datacontenttype, dataschema, time, then data, then extensions
// sorted by name; a test holds the two writers to the same bytes.
type outEvent struct {
	id, source, typ, subject string
	// dataschema is dataSchema + schemaFile (kept apart so that the fast
	// encoder need not build the string).
	dataSchema, schemaFile string
	time                   time.Time
	// Extensions, written only when non-empty.
	causationID, taskID, traceParent, traceState string
	// fixed is OutcomeMeta.Fixed, for the fast encoder.
	fixed *FixedFields
}

var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// write renders the event with data: a jsontext.Value is copied verbatim
// (EncodeTask's data, which tests fill with duplicate names or invalid
// UTF-8 on purpose), anything else is marshaled with dataOptions.
func (ev *outEvent) write(data any) ([]byte, error) { return ev.appendTo(nil, data) }

// appendTo is write with the body appended to dst[:0] (reusing its
// array when it is large enough), for callers that pool body buffers.
// Outcomes are written by appendFast (fastenc.go), which gives the same
// bytes; appendTo writes what it defers, and is the tests' reference.
func (ev *outEvent) appendTo(dst []byte, data any) ([]byte, error) {
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()

	var err error
	member := func(name, value string) {
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		b, qerr := jsontext.AppendQuote(buf.AvailableBuffer(), name)
		b = append(b, ':')
		b, verr := jsontext.AppendQuote(b, value)
		buf.Write(b)
		if err == nil {
			err = errors.Join(qerr, verr)
		}
	}
	optional := func(name, value string) {
		if value != "" {
			member(name, value)
		}
	}
	buf.WriteByte('{')
	member("specversion", SpecVersion)
	member("id", ev.id)
	member("source", ev.source)
	member("type", ev.typ)
	optional("subject", ev.subject)
	member("datacontenttype", ContentTypeJSON)
	optional("dataschema", ev.dataSchema+ev.schemaFile)
	if !ev.time.IsZero() {
		member("time", ev.time.UTC().Format(time.RFC3339Nano))
	}
	buf.WriteString(`,"data":`)
	if raw, ok := data.(jsontext.Value); ok {
		buf.Write(raw)
	} else if merr := json.MarshalWrite(buf, data, dataOptions); merr != nil && err == nil {
		err = merr
	}
	optional(ExtCausationID, ev.causationID)
	optional(ExtTaskID, ev.taskID)
	optional(ExtTraceParent, ev.traceParent)
	optional(ExtTraceState, ev.traceState)
	buf.WriteByte('}')
	if err != nil {
		return nil, fmt.Errorf("events: encode %s event: %w", ev.typ, err)
	}
	if dst == nil {
		return bytes.Clone(buf.Bytes()), nil
	}
	return append(dst[:0], buf.Bytes()...), nil
}
