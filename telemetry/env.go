package telemetry

import (
	"cmp"
	"fmt"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Setup hands the OTEL_* environment to autoexport and the SDK, which read it
// themselves. What is here are the checks of values they would log and
// replace with a default (or misread): a worker that silently exports
// nowhere is worse than one that does not start.

// ConfigError reports an OTEL_* variable whose value Setup refuses.
type ConfigError struct {
	Var    string // the environment variable
	Value  string // its value as read
	Reason string // what is wrong with it
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("telemetry: %s=%q: %s", e.Var, e.Value, e.Reason)
}

// exporter is what one signal exports with: an exporter name and, for otlp,
// the protocol and the endpoint the exporter will use.
type exporter struct {
	name, protocol, endpoint string
}

// settings is the checked environment, kept for Summary.
type settings struct {
	disabled        bool
	traces, metrics exporter
	sampler         string // with its ratio, for the ratio samplers
}

func loadSettings() (settings, error) {
	// Only "true" disables (any case), as the specification says.
	s := settings{disabled: strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true")}
	var err error
	if s.traces, err = loadExporter("traces", "none", "otlp", "console", "none"); err != nil {
		return s, err
	}
	if s.metrics, err = loadExporter("metrics", "prometheus", "otlp", "prometheus", "console", "none"); err != nil {
		return s, err
	}
	if s.sampler, err = checkSampler(); err != nil {
		return s, err
	}
	return s, checkResourceAttributes()
}

// loadExporter reads OTEL_<SIGNAL>_EXPORTER the way autoexport does: one
// name, exactly as written. def is rolecall's default.
func loadExporter(signal, def string, names ...string) (exporter, error) {
	v := "OTEL_" + strings.ToUpper(signal) + "_EXPORTER"
	e := exporter{name: cmp.Or(os.Getenv(v), def)}
	if !slices.Contains(names, e.name) {
		reason := "unsupported exporter (want one of " + strings.Join(names, ", ") + ")"
		if strings.Contains(e.name, ",") {
			// autoexport takes one exporter per signal
			// (opentelemetry-go-contrib#4471).
			reason = "one exporter per signal; a list is not supported"
		}
		return e, &ConfigError{Var: v, Value: os.Getenv(v), Reason: reason}
	}
	var err error
	if e.name == "otlp" {
		e.protocol, e.endpoint, err = otlpTarget(signal)
	}
	return e, err
}

// otlpTarget returns the protocol and endpoint of one signal's OTLP exporter.
// autoexport refuses an unknown protocol too, but without naming the
// variable. The exporters drop an endpoint that does not parse as a URL, and
// read "collector:4318" as a URL with the scheme "collector"; both would
// send nowhere.
func otlpTarget(signal string) (protocol, endpoint string, err error) {
	sig := strings.ToUpper(signal)
	pv := "OTEL_EXPORTER_OTLP_" + sig + "_PROTOCOL"
	if protocol = os.Getenv(pv); protocol == "" {
		pv = "OTEL_EXPORTER_OTLP_PROTOCOL"
		protocol = os.Getenv(pv)
	}
	switch protocol {
	case "":
		protocol = "http/protobuf"
	case "grpc", "http/protobuf":
	default:
		return "", "", &ConfigError{Var: pv, Value: protocol, Reason: "unsupported protocol (want grpc or http/protobuf)"}
	}
	ev := "OTEL_EXPORTER_OTLP_" + sig + "_ENDPOINT"
	endpoint = strings.TrimSpace(os.Getenv(ev))
	base := endpoint == ""
	if base {
		ev = "OTEL_EXPORTER_OTLP_ENDPOINT"
		endpoint = strings.TrimSpace(os.Getenv(ev))
	}
	if endpoint == "" {
		// The exporters' defaults (TLS unless told otherwise).
		if protocol == "grpc" {
			return protocol, "localhost:4317", nil
		}
		return protocol, "localhost:4318/v1/" + signal, nil
	}
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return "", "", &ConfigError{Var: ev, Value: redactUserinfo(endpoint), Reason: "not a URL"}
	case u.Scheme == "http" || u.Scheme == "https":
		if u.Host == "" {
			return "", "", &ConfigError{Var: ev, Value: redactUserinfo(endpoint), Reason: "URL has no host"}
		}
	case protocol == "http/protobuf":
		// gRPC also takes a bare host:port target.
		return "", "", &ConfigError{Var: ev, Value: redactUserinfo(endpoint), Reason: "want an http:// or https:// URL"}
	}
	if base && protocol == "http/protobuf" {
		// What the exporter sends to: the base URL plus the signal's path.
		u.Path = path.Join("/", u.Path, "v1", signal)
		endpoint = u.String()
	}
	return protocol, redactUserinfo(endpoint), nil
}

// redactUserinfo hides what an endpoint holds before its last @ (a user
// and password, a token): it is logged at start and named in errors. It
// works on the string, so an endpoint that does not parse is hidden too.
func redactUserinfo(endpoint string) string {
	at := strings.LastIndex(endpoint, "@")
	if at < 0 {
		return endpoint
	}
	start := 0
	if i := strings.Index(endpoint[:at], "://"); i >= 0 {
		start = i + len("://")
	}
	return endpoint[:start] + "xxxxx" + endpoint[at:]
}

// checkSampler checks OTEL_TRACES_SAMPLER and its argument, which the SDK
// reads itself: it would replace an unknown sampler with its default and a
// bad ratio with 1. It returns the sampler for Summary.
func checkSampler() (string, error) {
	name := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	switch name {
	case "":
		return "parentbased_always_on", nil
	case "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return name, nil
	case "traceidratio", "parentbased_traceidratio":
		arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return name + ":1", nil
		}
		// Written so that NaN fails too.
		if r, err := strconv.ParseFloat(arg, 64); err != nil || !(r >= 0 && r <= 1) {
			return "", &ConfigError{Var: "OTEL_TRACES_SAMPLER_ARG", Value: arg, Reason: "want a ratio between 0 and 1"}
		}
		return name + ":" + arg, nil
	}
	return "", &ConfigError{Var: "OTEL_TRACES_SAMPLER", Value: name,
		Reason: "unsupported sampler (want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio)"}
}

// checkResourceAttributes checks the key=value pairs of
// OTEL_RESOURCE_ATTRIBUTES, which the SDK parses: it would drop a pair with an
// empty key without a word.
func checkResourceAttributes() error {
	v := strings.TrimSpace(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if v == "" {
		return nil
	}
	for p := range strings.SplitSeq(v, ",") {
		if k, _, ok := strings.Cut(p, "="); !ok || strings.TrimSpace(k) == "" {
			return &ConfigError{Var: "OTEL_RESOURCE_ATTRIBUTES", Value: v, Reason: fmt.Sprintf("pair %q is not key=value", p)}
		}
	}
	return nil
}
