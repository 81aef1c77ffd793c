package telemetry

// ParseResourceAttributes exposes the OTEL_RESOURCE_ATTRIBUTES decoder to
// the fuzz target.
var ParseResourceAttributes = parseResourceAttributes
