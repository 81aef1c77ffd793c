package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName is service.name when neither Config.ServiceName nor the
// environment names the service.
const DefaultServiceName = "rolecall-worker"

// Config is what the worker knows about itself; everything else comes from
// the OTEL_* environment.
type Config struct {
	// ServiceName is service.name; default DefaultServiceName.
	// OTEL_RESOURCE_ATTRIBUTES and then OTEL_SERVICE_NAME override it.
	ServiceName string
	// ServiceVersion is service.version; omitted when empty.
	ServiceVersion string
	// InstanceID is service.instance.id, the worker instance; omitted when
	// empty.
	InstanceID string
	// Env looks up OTEL_* variables; nil means os.Getenv. When set, every
	// value this package and the SDK's resource detector would read is read
	// through it and passed to the SDK explicitly, so tests are hermetic.
	// Exporter details the SDK alone reads (OTLP headers, TLS files,
	// timeouts, compression, batch and export intervals) still come from the
	// process environment.
	Env func(string) string
	// Stdout receives the console exporters' output; nil means os.Stdout.
	Stdout io.Writer
}

// Telemetry holds the providers the worker passes to its pipeline.
type Telemetry struct {
	// TracerProvider is a no-op provider when traces are off
	// (OTEL_TRACES_EXPORTER=none, the default): spans cost nothing and a
	// parent context passes through unchanged.
	TracerProvider trace.TracerProvider
	// MeterProvider is a no-op provider when metrics are off.
	MeterProvider metric.MeterProvider
	// Propagator is W3C tracecontext plus baggage.
	Propagator propagation.TextMapPropagator
	// MetricsHandler serves the Prometheus text format for /metrics when the
	// prometheus metrics exporter is on (the default), else nil.
	MetricsHandler http.Handler
	// Resource describes this process; nil when the SDK is disabled.
	Resource *resource.Resource
	// Shutdown flushes and stops every exporter; call it when draining.
	// It is safe to call more than once and returns the first result.
	Shutdown func(context.Context) error
}

// Tracer is the worker's tracer from TracerProvider.
func (t *Telemetry) Tracer() trace.Tracer { return t.TracerProvider.Tracer(ScopeName) }

// Meter is the worker's meter from MeterProvider.
func (t *Telemetry) Meter() metric.Meter { return t.MeterProvider.Meter(ScopeName) }

// NewPropagator returns the propagator the worker uses: W3C tracecontext and
// baggage. OTEL_PROPAGATORS is not read: the event contract (DESIGN.md §6)
// fixes the format.
func NewPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Setup reads the OTEL_* environment (see the package documentation) and
// builds the providers. A value it cannot honour is a *ConfigError; nothing is
// started then. Setup installs no global provider: the caller passes
// Telemetry to what needs it (and may call otel.SetTracerProvider itself).
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	lookup, explicit := cfg.Env, cfg.Env != nil
	if !explicit {
		lookup = os.Getenv
	}
	s, err := loadSettings(lookup)
	if err != nil {
		return nil, err
	}
	stdout := cfg.Stdout
	if stdout == nil {
		stdout = os.Stdout
	}

	t := &Telemetry{
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
		Propagator:     NewPropagator(),
	}
	var stops []func(context.Context) error
	t.Shutdown = onceShutdown(&stops)
	if s.disabled {
		return t, nil
	}
	fail := func(err error) (*Telemetry, error) {
		// Release what was built already; the Setup error is what matters.
		_ = t.Shutdown(ctx)
		return nil, err
	}

	if t.Resource, err = newResource(ctx, cfg, s, explicit); err != nil {
		return fail(err)
	}

	if len(s.traces.exporters) > 0 {
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(t.Resource), sdktrace.WithSampler(s.sampler)}
		for _, name := range s.traces.exporters {
			exp, err := newSpanExporter(ctx, name, s.traces, explicit, stdout)
			if err != nil {
				return fail(err)
			}
			opts = append(opts, sdktrace.WithBatcher(exp))
		}
		tp := sdktrace.NewTracerProvider(opts...)
		stops = append(stops, tp.Shutdown)
		t.TracerProvider = tp
	}

	if len(s.metrics.exporters) > 0 {
		opts := []sdkmetric.Option{sdkmetric.WithResource(t.Resource)}
		for _, name := range s.metrics.exporters {
			var r sdkmetric.Reader
			if name == ExporterPrometheus {
				r, t.MetricsHandler, err = newPrometheus()
			} else {
				var exp sdkmetric.Exporter
				exp, err = newMetricExporter(ctx, name, s.metrics, explicit, stdout)
				if exp != nil {
					r = sdkmetric.NewPeriodicReader(exp)
				}
			}
			if err != nil {
				return fail(err)
			}
			opts = append(opts, sdkmetric.WithReader(r))
		}
		mp := sdkmetric.NewMeterProvider(opts...)
		stops = append(stops, mp.Shutdown)
		t.MeterProvider = mp
	}
	return t, nil
}

// onceShutdown stops everything in *stops (read at the first call), in
// order, once.
func onceShutdown(stops *[]func(context.Context) error) func(context.Context) error {
	var once sync.Once
	var err error
	return func(ctx context.Context) error {
		once.Do(func() {
			var errs []error
			for _, stop := range *stops {
				errs = append(errs, stop(ctx))
			}
			if err = errors.Join(errs...); err != nil {
				err = fmt.Errorf("telemetry: shutdown: %w", err)
			}
		})
		return err
	}
}

func newResource(ctx context.Context, cfg Config, s settings, explicit bool) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	base := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.ServiceVersion != "" {
		base = append(base, attribute.String("service.version", cfg.ServiceVersion))
	}
	if cfg.InstanceID != "" {
		base = append(base, attribute.String("service.instance.id", cfg.InstanceID))
	}
	// Later options win: the environment overrides what the code says.
	opts := []resource.Option{resource.WithTelemetrySDK(), resource.WithHost(), resource.WithAttributes(base...)}
	if explicit {
		opts = append(opts, resource.WithAttributes(s.resourceAttrs...))
		if s.serviceName != "" {
			opts = append(opts, resource.WithAttributes(attribute.String("service.name", s.serviceName)))
		}
	} else {
		opts = append(opts, resource.WithFromEnv())
	}
	res, err := resource.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

func newSpanExporter(ctx context.Context, name string, sig signal, explicit bool, stdout io.Writer) (sdktrace.SpanExporter, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch {
	case name == ExporterConsole:
		exp, err = stdouttrace.New(stdouttrace.WithWriter(stdout))
	case sig.protocol == ProtocolGRPC:
		var opts []otlptracegrpc.Option
		if explicit && sig.endpoint != "" {
			opts = append(opts, grpcEndpoint(sig.endpoint, otlptracegrpc.WithEndpointURL, otlptracegrpc.WithEndpoint))
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		var opts []otlptracehttp.Option
		if explicit {
			opts = append(opts, otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf))
			if sig.endpoint != "" {
				opts = append(opts, otlptracehttp.WithEndpointURL(sig.endpoint))
			}
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s trace exporter: %w", name, err)
	}
	return exp, nil
}

func newMetricExporter(ctx context.Context, name string, sig signal, explicit bool, stdout io.Writer) (sdkmetric.Exporter, error) {
	var exp sdkmetric.Exporter
	var err error
	switch {
	case name == ExporterConsole:
		exp, err = stdoutmetric.New(stdoutmetric.WithWriter(stdout))
	case sig.protocol == ProtocolGRPC:
		var opts []otlpmetricgrpc.Option
		if explicit && sig.endpoint != "" {
			opts = append(opts, grpcEndpoint(sig.endpoint, otlpmetricgrpc.WithEndpointURL, otlpmetricgrpc.WithEndpoint))
		}
		exp, err = otlpmetricgrpc.New(ctx, opts...)
	default:
		var opts []otlpmetrichttp.Option
		if explicit && sig.endpoint != "" {
			opts = append(opts, otlpmetrichttp.WithEndpointURL(sig.endpoint))
		}
		exp, err = otlpmetrichttp.New(ctx, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s metric exporter: %w", name, err)
	}
	return exp, nil
}

// grpcEndpoint picks the option for a gRPC endpoint: a URL (whose scheme says
// whether to use TLS) or a bare host:port target.
func grpcEndpoint[O any](v string, withURL, withTarget func(string) O) O {
	if isHTTPURL(v) {
		return withURL(v)
	}
	return withTarget(v)
}

// newPrometheus builds a pull reader on a private registry, so several
// Telemetry values (tests, or a process embedding two workers) never collide
// on the global one. The registry also carries the Go runtime and process
// collectors operators expect on /metrics.
func newPrometheus() (sdkmetric.Reader, http.Handler, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, fmt.Errorf("telemetry: prometheus: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, fmt.Errorf("telemetry: prometheus: %w", err)
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		// Pinned: the exporter's default is due to change upstream, and
		// dashboards depend on rolecall_tasks_total-style names.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("telemetry: prometheus: %w", err)
	}
	return exp, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), nil
}
