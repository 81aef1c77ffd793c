package telemetry

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Environment variables this package reads itself. The OTLP exporters and the
// SDK read further OTEL_* variables (headers, TLS, timeouts, batching,
// export interval) from the process environment on their own.
const (
	EnvSDKDisabled          = "OTEL_SDK_DISABLED"
	EnvTracesExporter       = "OTEL_TRACES_EXPORTER"
	EnvMetricsExporter      = "OTEL_METRICS_EXPORTER"
	EnvProtocol             = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol       = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvMetricsProtocol      = "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"
	EnvEndpoint             = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint       = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvMetricsEndpoint      = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
	EnvServiceName          = "OTEL_SERVICE_NAME"
	EnvResourceAttributes   = "OTEL_RESOURCE_ATTRIBUTES"
	EnvTracesSampler        = "OTEL_TRACES_SAMPLER"
	EnvTracesSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	defaultTracesExporters  = "none"
	defaultMetricsExporters = "prometheus"
	defaultProtocol         = ProtocolHTTPProtobuf
)

// Exporter and protocol names accepted in the OTEL_* variables.
const (
	ExporterOTLP       = "otlp"
	ExporterConsole    = "console"
	ExporterPrometheus = "prometheus"
	ExporterNone       = "none"

	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// ConfigError reports an OTEL_* variable whose value Setup refuses. The SDK
// would often log such a value and carry on with a default; a worker that
// silently exports nowhere is worse than one that does not start.
type ConfigError struct {
	Var    string // the environment variable
	Value  string // its value as read
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("telemetry: %s=%q: %s", e.Var, e.Value, e.Reason)
}

// signal holds what one signal (traces or metrics) is configured to do.
type signal struct {
	exporters []string // empty: the signal is off
	protocol  string   // for the otlp exporter
	endpoint  string   // full URL (or grpc target) for the otlp exporter; "" = exporter default
}

// settings is everything Setup takes from the environment, validated.
type settings struct {
	disabled bool
	traces   signal
	metrics  signal
	sampler  sdktrace.Sampler

	// Read for Config.Env only; with os.Getenv the SDK's resource detector
	// reads them itself.
	serviceName   string
	resourceAttrs []attribute.KeyValue
}

func loadSettings(lookup func(string) string) (settings, error) {
	var s settings
	get := func(k string) string { return strings.TrimSpace(lookup(k)) }

	// The specification disables the SDK only for the exact value "true".
	s.disabled = strings.EqualFold(get(EnvSDKDisabled), "true")

	var err error
	if s.traces, err = loadSignal(get, EnvTracesExporter, defaultTracesExporters,
		[]string{ExporterOTLP, ExporterConsole}, EnvTracesProtocol, EnvTracesEndpoint, "v1/traces"); err != nil {
		return s, err
	}
	if s.metrics, err = loadSignal(get, EnvMetricsExporter, defaultMetricsExporters,
		[]string{ExporterOTLP, ExporterPrometheus, ExporterConsole}, EnvMetricsProtocol, EnvMetricsEndpoint, "v1/metrics"); err != nil {
		return s, err
	}
	if s.sampler, err = parseSampler(get(EnvTracesSampler), get(EnvTracesSamplerArg)); err != nil {
		return s, err
	}
	s.serviceName = get(EnvServiceName)
	if s.resourceAttrs, err = parseResourceAttributes(get(EnvResourceAttributes)); err != nil {
		return s, err
	}
	return s, nil
}

func loadSignal(get func(string) string, exporterVar, def string, allowed []string,
	protocolVar, endpointVar, signalPath string) (signal, error) {
	var sig signal
	raw := get(exporterVar)
	list := raw
	if list == "" {
		list = def
	}
	names, err := parseExporters(list, allowed)
	if err != nil {
		return sig, &ConfigError{Var: exporterVar, Value: raw, Reason: err.Error()}
	}
	sig.exporters = names
	if !slices.Contains(names, ExporterOTLP) {
		// Protocol and endpoint matter only to the OTLP exporter.
		return sig, nil
	}

	// The signal-specific variable wins over the general one (OTel spec).
	protoVar := protocolVar
	sig.protocol = get(protocolVar)
	if sig.protocol == "" {
		protoVar, sig.protocol = EnvProtocol, get(EnvProtocol)
	}
	if sig.protocol == "" {
		sig.protocol = defaultProtocol
	}
	if sig.protocol != ProtocolGRPC && sig.protocol != ProtocolHTTPProtobuf {
		return sig, &ConfigError{Var: protoVar, Value: sig.protocol,
			Reason: "unsupported protocol (want grpc or http/protobuf)"}
	}

	// Endpoints: a signal-specific URL is used as given; the general one is a
	// base URL to which OTLP/HTTP appends the signal's path.
	if v := get(endpointVar); v != "" {
		if err := checkEndpoint(v, sig.protocol); err != nil {
			return sig, &ConfigError{Var: endpointVar, Value: v, Reason: err.Error()}
		}
		sig.endpoint = v
	} else if v := get(EnvEndpoint); v != "" {
		if err := checkEndpoint(v, sig.protocol); err != nil {
			return sig, &ConfigError{Var: EnvEndpoint, Value: v, Reason: err.Error()}
		}
		sig.endpoint = v
		if sig.protocol == ProtocolHTTPProtobuf {
			u, _ := url.Parse(v) // checked above
			u.Path = path.Join("/", u.Path, signalPath)
			sig.endpoint = u.String()
		}
	}
	return sig, nil
}

// parseExporters reads a comma-separated exporter list. "none" stands alone.
func parseExporters(list string, allowed []string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, p := range strings.Split(list, ",") {
		name := strings.ToLower(strings.TrimSpace(p))
		switch {
		case name == "":
			return nil, fmt.Errorf("empty exporter name")
		case seen[name]:
			return nil, fmt.Errorf("exporter %q listed twice", name)
		case name == ExporterNone:
			if list = strings.TrimSpace(list); !strings.EqualFold(list, ExporterNone) {
				return nil, fmt.Errorf("%q cannot be combined with other exporters", ExporterNone)
			}
			return nil, nil
		}
		if !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("unsupported exporter %q (want %s or none)", name, strings.Join(allowed, ", "))
		}
		seen[name] = true
		names = append(names, name)
	}
	return names, nil
}

func checkEndpoint(v, protocol string) error {
	u, err := url.Parse(v)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return fmt.Errorf("URL has no host")
		}
	default:
		// gRPC also takes a bare host:port target; OTLP/HTTP needs a URL.
		if protocol == ProtocolHTTPProtobuf {
			return fmt.Errorf("want an http:// or https:// URL")
		}
	}
	return nil
}

// parseSampler mirrors the SDK's OTEL_TRACES_SAMPLER names but rejects what
// the SDK would only report and replace with its default.
func parseSampler(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, &ConfigError{Var: EnvTracesSamplerArg, Value: arg, Reason: "want a ratio between 0 and 1"}
		}
		return r, nil
	}
	switch strings.ToLower(name) {
	case "", "parentbased_always_on":
		// Set explicitly even when unset, so a Config.Env lookup is not
		// overridden by the SDK's own read of the process environment.
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.TraceIDRatioBased(r), nil
	case "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, &ConfigError{Var: EnvTracesSampler, Value: name,
		Reason: "unsupported sampler (want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio)"}
}

// parseResourceAttributes reads OTEL_RESOURCE_ATTRIBUTES: comma-separated
// key=value pairs with percent-encoded values. Like the SDK it keeps a value
// whose escapes are invalid as written; unlike the SDK it refuses a pair
// without "=" or with an empty key instead of dropping it.
func parseResourceAttributes(s string) ([]attribute.KeyValue, error) {
	if s == "" {
		return nil, nil
	}
	var kvs []attribute.KeyValue
	for _, p := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(p, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, &ConfigError{Var: EnvResourceAttributes, Value: s,
				Reason: fmt.Sprintf("pair %q is not key=value", p)}
		}
		v = strings.TrimSpace(v)
		if d, err := url.PathUnescape(v); err == nil {
			v = d
		}
		kvs = append(kvs, attribute.String(k, v))
	}
	return kvs, nil
}

func isHTTPURL(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https")
}
