// Package telemetry sets up OpenTelemetry traces and metrics, structured
// logs and trace-context propagation for the rolecall worker, and names every
// span, attribute and instrument the worker emits (DESIGN.md §8).
//
// # Setup
//
// Setup reads the standard OTEL_* environment and returns the providers; the
// pipeline is handed them explicitly (no global provider is installed):
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceVersion: version, InstanceID: id})
//	...
//	defer tel.Shutdown(drainCtx)
//
// The variables, and what this package does with them:
//
//   - OTEL_TRACES_EXPORTER: otlp, console or none (default none). With none
//     the tracer provider is a no-op: spans cost nothing, and an incoming
//     trace context still passes through to the outcome's traceparent.
//   - OTEL_METRICS_EXPORTER: otlp, prometheus, console or none (default
//     prometheus, unlike the OpenTelemetry default of otlp, so that the
//     worker's /metrics works with no configuration). prometheus yields
//     Telemetry.MetricsHandler.
//   - Both take a comma-separated list ("otlp,console"); none stands alone;
//     an unknown name is a *ConfigError.
//   - OTEL_EXPORTER_OTLP_PROTOCOL (and the _TRACES_/_METRICS_ variants, which
//     win): grpc or http/protobuf (default http/protobuf).
//   - OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
//     OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, and the other OTLP exporter
//     variables (headers, TLS, timeout, compression): read by the OTLP
//     exporters themselves. Setup only checks that the endpoints are URLs.
//   - OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: read by the SDK's resource
//     detector, and they override Config; Setup refuses a pair without "="
//     (the SDK would drop it). The resource also has
//     service.name (default "rolecall-worker"), service.version,
//     service.instance.id, host.name and telemetry.sdk.*.
//   - OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG: the SDK's sampler names
//     (default parentbased_always_on). Setup parses them itself so that an
//     unknown sampler or a bad ratio is an error rather than a logged
//     fallback.
//   - OTEL_SDK_DISABLED=true: everything is a no-op.
//   - OTEL_BSP_*, OTEL_METRIC_EXPORT_INTERVAL and span limits: read by the
//     SDK.
//
// Config.Env replaces os.Getenv for tests: then the endpoints, service name
// and resource attributes are read through it and passed to the SDK as
// explicit options, and the process environment only supplies the exporter
// details listed above.
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
