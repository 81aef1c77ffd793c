package telemetry

import "go.opentelemetry.io/otel/attribute"

// ScopeName is the instrumentation scope of every tracer and meter the worker
// creates, so a backend can tell rolecall's own telemetry from a library's.
const ScopeName = "github.com/rolecall/rolecall"

// Span names. SpanProcess is the consumer span of one task;
// the others are its children, one per pipeline stage.
const (
	SpanProcess     = "rolecall.process"
	SpanDecode      = "rolecall.decode"
	SpanDiscover    = "rolecall.discover"
	SpanResolve     = "rolecall.resolve"
	SpanMaterialize = "rolecall.materialize"
	SpanPublish     = "rolecall.publish"
)

// Span attribute keys. The messaging.* and cloudevents.* keys
// are OpenTelemetry semantic-convention names, so generic dashboards work.
// The keys are untyped constants so they serve both attribute.String(k, v)
// and attribute.Key(k).
const (
	AttrMessagingSystem      = "messaging.system"
	AttrMessagingDestination = "messaging.destination.name"
	AttrEventID              = "cloudevents.event_id"
	AttrEventType            = "cloudevents.event_type"
	AttrTaskID               = "rolecall.task_id"
	AttrRole                 = "rolecall.role"
	AttrPack                 = "rolecall.pack"
	AttrOutcome              = "rolecall.outcome"
	AttrErrorCode            = "rolecall.error.code"
	AttrSnapshotDigest       = "rolecall.snapshot.digest"
	AttrInputsDigest         = "rolecall.inputs_digest"
	// The OpenTelemetry messaging and general conventions, on the consumer
	// (rolecall.process) and producer (rolecall.publish) spans.
	AttrMessagingOperationType = "messaging.operation.type"
	AttrMessagingOperationName = "messaging.operation.name"
	AttrMessagingConsumerGroup = "messaging.consumer.group.name"
	AttrMessagingMessageID     = "messaging.message.id"
	AttrServerAddress          = "server.address"
	AttrServerPort             = "server.port"
	AttrErrorType              = "error.type"
	AttrEventSource            = "cloudevents.event_source"
)

// Values of messaging.operation.type and messaging.operation.name.
const (
	OperationProcess = "process" // the consumer span: one task delivery
	OperationSend    = "send"    // the producer span: publishing an outcome
	OperationPublish = "publish" // the producer span's operation name
)

// MessagingSystemNATS is the messaging.system attribute of every span that
// touches a NATS message.
var MessagingSystemNATS = attribute.String(AttrMessagingSystem, "nats")

// Metric instrument names.
const (
	MetricTasks           = "rolecall.tasks"
	MetricStageDuration   = "rolecall.stage.duration"
	MetricInflight        = "rolecall.inflight"
	MetricConsumerPending = "rolecall.consumer.pending"
	// MetricConsumerPendingStale is 1 while the backlog could not be read
	// at the last collection (the broker is down or slow): the pending
	// gauge then holds the last value read, or is absent if there was none.
	MetricConsumerPendingStale = "rolecall.consumer.pending.stale"
	// MetricConfigProblems is the number of problems `worker validate`
	// would report for the snapshot being served.
	MetricConfigProblems = "rolecall.config.problems"
	// MetricSlowConsumers counts the NATS client's slow-consumer reports
	// (a subscription's buffer overflowed and messages were dropped).
	MetricSlowConsumers = "rolecall.nats.slow_consumers"
)

// Metric attribute keys. They are unprefixed (unlike span attributes)
// because they become Prometheus labels.
const (
	MetricAttrOutcome = "outcome"
	MetricAttrCode    = "code"
	MetricAttrStage   = "stage"
)

// Outcome values for rolecall.outcome and the outcome metric attribute.
const (
	// OutcomeResolved: a resolved-spec event was published.
	OutcomeResolved = "resolved"
	// OutcomeFailed: a failure event was published (the code says why).
	OutcomeFailed = "failed"
	// OutcomeRetry: a transient fault; the task was nak'ed and no outcome
	// was published yet.
	OutcomeRetry = "retry"
	// OutcomeDuplicate: the task event already had its outcome (the
	// idempotency store); acked, nothing published.
	OutcomeDuplicate = "duplicate"
)

// Stage values for the stage metric attribute, one per child span.
const (
	StageDecode      = "decode"
	StageDiscover    = "discover"
	StageResolve     = "resolve"
	StageMaterialize = "materialize"
	StagePublish     = "publish"
)

// W3C trace-context header names, written lowercase as the event contract
// (docs/EVENTS.md) has them. They are also the attribute names of the
// CloudEvents distributed-tracing extension.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// Log attribute keys added by the trace handler, and the per-task key callers
// add themselves.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
	LogTaskID  = "task_id"
)
