// Package telemetry sets up OpenTelemetry traces and metrics, structured
// logs and trace-context propagation for the rolecall worker, and names every
// span, attribute and instrument the worker emits.
//
// # Setup
//
// Setup reads the standard OTEL_* environment and returns the providers; the
// pipeline is handed them explicitly (no global provider is installed):
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceVersion: version, InstanceID: id})
//	...
//	defer tel.Shutdown(drainCtx)
//	log.LogAttrs(ctx, slog.LevelInfo, "telemetry", tel.Summary()...)
//
// The OTLP and console exporters come from
// go.opentelemetry.io/contrib/exporters/autoexport, and the exporters and the
// SDK read their own variables (endpoints, headers, TLS, batching, sampler,
// resource). What this package adds (docs/OPERATIONS.md lists every
// variable):
//
//   - Defaults: OTEL_TRACES_EXPORTER is none and the tracer provider a no-op
//     (spans cost nothing; an incoming trace context still passes through to
//     the outcome). OTEL_METRICS_EXPORTER is prometheus, served by
//     Telemetry.MetricsHandler on the worker's own listener rather than on
//     the separate HTTP server autoexport would start.
//   - Refusals: a value the libraries would log and replace with a default,
//     or misread, is a *ConfigError and Setup starts nothing: an unknown
//     exporter or a list of them (autoexport takes one per signal), an
//     unknown OTLP protocol or sampler, a sampler ratio outside [0, 1], an
//     OTLP endpoint that is not a URL, an OTEL_RESOURCE_ATTRIBUTES pair
//     without "=" or key.
//   - OTEL_SDK_DISABLED=true makes everything a no-op (the Go SDK does not
//     read it).
//
// Summary describes what Setup turned on, for one log line at start.
// Tests set the variables with t.Setenv.
//
// # Names
//
// The Span*, Attr*, Metric* and Stage*/Outcome* constants are the public
// telemetry contract; docs/OPERATIONS.md explains each and gives queries.
// NewInstruments creates the metric instruments on a MeterProvider.
//
// # Propagation
//
// A task's parent context comes from the lowercase traceparent/tracestate
// NATS headers, else from the CloudEvents distributed-tracing extension
// (ExtractTask). An outcome carries both (Inject returns the values for the
// extension). HeaderCarrier keeps header names as written, because
// nats.Header is case-sensitive and OTel's HTTP carrier would write
// "Traceparent".
//
// # Logs
//
// NewLogger returns a log/slog logger (JSON or text) whose records carry
// trace_id and span_id when logged with a context that holds a span
// (logger.InfoContext(ctx, ...)); per-task lines add task_id themselves.
//
// This package does not create spans or record measurements for the
// pipeline; the pipeline does, with these names.
package telemetry
