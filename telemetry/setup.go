package telemetry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
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

	settings settings
}

// Tracer is the worker's tracer from TracerProvider.
func (t *Telemetry) Tracer() trace.Tracer { return t.TracerProvider.Tracer(ScopeName) }

// Meter is the worker's meter from MeterProvider.
func (t *Telemetry) Meter() metric.Meter { return t.MeterProvider.Meter(ScopeName) }

// NewPropagator returns the propagator the worker uses: W3C tracecontext and
// baggage. OTEL_PROPAGATORS is not read: the event contract fixes the format.
func NewPropagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// Setup reads the OTEL_* environment (see the package documentation) and
// builds the providers. A value it cannot honour is a *ConfigError; nothing is
// started then. Setup installs no global provider: the caller passes
// Telemetry to what needs it (and may call otel.SetTracerProvider itself).
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	s, err := loadSettings()
	if err != nil {
		return nil, err
	}
	t := &Telemetry{
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
		Propagator:     NewPropagator(),
		settings:       s,
	}
	var stops []func(context.Context) error
	var once sync.Once
	var stopErr error
	t.Shutdown = func(ctx context.Context) error {
		once.Do(func() {
			var errs []error
			for _, stop := range stops {
				errs = append(errs, stop(ctx))
			}
			if stopErr = errors.Join(errs...); stopErr != nil {
				stopErr = fmt.Errorf("telemetry: shutdown: %w", stopErr)
			}
		})
		return stopErr
	}
	if s.disabled {
		return t, nil
	}
	fail := func(err error) (*Telemetry, error) {
		// Release what was built already; the Setup error is what matters.
		_ = t.Shutdown(ctx)
		return nil, err
	}

	if t.Resource, err = newResource(ctx, cfg); err != nil {
		return fail(err)
	}

	// none is a no-op provider rather than autoexport's exporter that drops
	// what a real provider recorded: spans then cost nothing.
	if s.traces.name != "none" {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return fail(fmt.Errorf("telemetry: %s trace exporter: %w", s.traces.name, err))
		}
		// The SDK reads OTEL_TRACES_SAMPLER itself (checked in loadSettings).
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(t.Resource), sdktrace.WithBatcher(exp))
		stops = append(stops, tp.Shutdown)
		t.TracerProvider = tp
	}

	var r sdkmetric.Reader
	switch s.metrics.name {
	case "none":
	case "prometheus":
		// autoexport's prometheus starts an HTTP server of its own; the
		// worker serves /metrics on its --http listener instead.
		r, t.MetricsHandler, err = newPrometheus()
	default:
		if r, err = autoexport.NewMetricReader(ctx); err != nil {
			err = fmt.Errorf("telemetry: %s metric exporter: %w", s.metrics.name, err)
		}
	}
	if err != nil {
		return fail(err)
	}
	if r != nil {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(t.Resource), sdkmetric.WithReader(r))
		stops = append(stops, mp.Shutdown)
		t.MeterProvider = mp
	}
	return t, nil
}

// Summary describes what Setup turned on, for one log line at start:
// the traces and metrics exporters, with protocol and endpoint for otlp, and
// the sampler when traces are on.
func (t *Telemetry) Summary() []slog.Attr {
	s := t.settings
	if s.disabled {
		return []slog.Attr{slog.String("traces", "none"), slog.String("metrics", "none"), slog.Bool("sdk_disabled", true)}
	}
	var attrs []slog.Attr
	add := func(signal string, e exporter) {
		attrs = append(attrs, slog.String(signal, e.name))
		if e.name == "otlp" {
			attrs = append(attrs, slog.String(signal+"_protocol", e.protocol), slog.String(signal+"_endpoint", e.endpoint))
		}
	}
	add("traces", s.traces)
	if s.traces.name != "none" {
		attrs = append(attrs, slog.String("sampler", s.sampler))
	}
	add("metrics", s.metrics)
	return attrs
}

// newResource describes the process; the detectors listed last win, so
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME override Config.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := []attribute.KeyValue{attribute.String("service.name", cmp.Or(cfg.ServiceName, DefaultServiceName))}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.ServiceVersion))
	}
	if cfg.InstanceID != "" {
		attrs = append(attrs, attribute.String("service.instance.id", cfg.InstanceID))
	}
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// newPrometheus builds a pull reader on a private registry, so several
// Telemetry values (tests, or a process embedding two workers) never collide
// on the global one. The registry also carries the Go runtime and process
// collectors operators expect on /metrics.
func newPrometheus() (sdkmetric.Reader, http.Handler, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
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
