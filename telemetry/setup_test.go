package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/rolecall/rolecall/telemetry"
)

// TestMain clears the OTEL_* variables of the environment the tests run in,
// so each test sees only what it sets with setenv.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			os.Unsetenv(k)
		}
	}
	os.Exit(m.Run())
}

// setenv sets the variables in m for the rest of the test.
func setenv(t *testing.T, m map[string]string) {
	t.Helper()
	for k, v := range m {
		t.Setenv(k, v)
	}
}

func setup(t *testing.T, cfg telemetry.Config) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Setup: %v", err)
	}
	return tel
}

func shutdown(t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// processSpan starts and ends a rolecall.process span with a child, the
// shape the pipeline produces.
func processSpan(tel *telemetry.Telemetry) trace.SpanContext {
	ctx, span := tel.Tracer().Start(context.Background(), telemetry.SpanProcess,
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(telemetry.MessagingSystemNATS, attribute.String(telemetry.AttrTaskID, "T-42")))
	_, child := tel.Tracer().Start(ctx, telemetry.SpanResolve)
	child.End()
	span.End()
	return span.SpanContext()
}

// The console exporter writes to the os.Stdout of the time the exporter
// package was loaded, so the test runs itself again, as a child process
// whose standard output it reads.
func TestConsoleTracesPrintToStdout(t *testing.T) {
	if os.Getenv("TELEMETRY_CONSOLE_CHILD") == "1" {
		setenv(t, map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"})
		tel := setup(t, telemetry.Config{InstanceID: "w-1"})
		sc := processSpan(tel)
		shutdown(t, tel)
		fmt.Fprintln(os.Stderr, sc.TraceID())
		os.Exit(0) // before the test binary prints PASS to standard output
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConsoleTracesPrintToStdout$")
	cmd.Env = append(os.Environ(), "TELEMETRY_CONSOLE_CHILD=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, errOut.String())
	}
	traceID := strings.TrimSpace(errOut.String())

	// stdouttrace writes one JSON object per span.
	var names []string
	dec := json.NewDecoder(&out)
	for {
		var s struct {
			Name        string
			SpanContext struct{ TraceID string }
		}
		if err := dec.Decode(&s); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("console output is not a JSON stream: %v", err)
		}
		if s.SpanContext.TraceID != traceID {
			t.Errorf("span %s has trace id %s, want %s", s.Name, s.SpanContext.TraceID, traceID)
		}
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{telemetry.SpanResolve, telemetry.SpanProcess}, names); diff != "" {
		t.Errorf("spans printed (-want +got):\n%s", diff)
	}
}

func TestNoneExportsNothing(t *testing.T) {
	c, srv := newHTTPCollector(t)
	setenv(t, map[string]string{
		"OTEL_TRACES_EXPORTER":        "none",
		"OTEL_METRICS_EXPORTER":       "none",
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
	})
	tel := setup(t, telemetry.Config{})
	if tel.MetricsHandler != nil {
		t.Error("MetricsHandler is set with OTEL_METRICS_EXPORTER=none")
	}
	_, span := tel.Tracer().Start(context.Background(), telemetry.SpanProcess)
	if span.IsRecording() {
		t.Error("span is recording with OTEL_TRACES_EXPORTER=none")
	}
	span.End()
	ins, err := telemetry.NewInstruments(tel.MeterProvider)
	if err != nil {
		t.Fatal(err)
	}
	ins.TaskDone(context.Background(), telemetry.OutcomeResolved, "")
	shutdown(t, tel)
	if n := c.requests(); n != 0 {
		t.Errorf("collector received %d requests, want 0", n)
	}
}

// With tracing off, the no-op tracer keeps the parent's span context, so an
// outcome still carries the task's trace.
func TestNoneTracesPassContextThrough(t *testing.T) {
	tel := setup(t, telemetry.Config{})
	in := nats.Header{"traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	ctx := telemetry.ExtractTask(context.Background(), tel.Propagator, in, "", "")
	ctx, span := tel.Tracer().Start(ctx, telemetry.SpanPublish)
	defer span.End()
	tp, _ := telemetry.Inject(ctx, tel.Propagator, nats.Header{})
	if tp != in.Get("traceparent") {
		t.Errorf("outcome traceparent = %q, want the task's %q", tp, in.Get("traceparent"))
	}
}

func TestDefaults(t *testing.T) {
	tel := setup(t, telemetry.Config{})
	defer shutdown(t, tel)
	if _, ok := tel.TracerProvider.(interface{ Shutdown(context.Context) error }); ok {
		t.Error("traces are on by default; want a no-op provider")
	}
	if tel.MetricsHandler == nil {
		t.Error("no MetricsHandler by default; want the prometheus reader")
	}
	got, _ := tel.Resource.Set().Value("service.name")
	if got.AsString() != telemetry.DefaultServiceName {
		t.Errorf("service.name = %q, want %q", got.AsString(), telemetry.DefaultServiceName)
	}
}

func TestSDKDisabled(t *testing.T) {
	setenv(t, map[string]string{
		"OTEL_SDK_DISABLED":     "TRUE",
		"OTEL_TRACES_EXPORTER":  "console",
		"OTEL_METRICS_EXPORTER": "prometheus",
	})
	tel := setup(t, telemetry.Config{})
	if tel.MetricsHandler != nil || tel.Resource != nil {
		t.Error("OTEL_SDK_DISABLED=true still built a metrics handler or resource")
	}
	_, span := tel.Tracer().Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("span is recording with OTEL_SDK_DISABLED=true")
	}
	shutdown(t, tel)
}

func TestShutdownTwice(t *testing.T) {
	_, srv := newHTTPCollector(t)
	setenv(t, map[string]string{
		"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
	})
	tel := setup(t, telemetry.Config{})
	shutdown(t, tel)
	shutdown(t, tel) // the providers would report "already shut down"
}

func TestSampler(t *testing.T) {
	tests := []struct {
		sampler, arg string
		sampled      bool
	}{
		{"", "", true},
		{"always_on", "", true},
		{"always_off", "", false},
		{"traceidratio", "0", false},
		{"traceidratio", "1", true},
		{"parentbased_traceidratio", "0", false},
		{"parentbased_always_off", "", false},
		{"PARENTBASED_ALWAYS_ON", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.sampler+"/"+tt.arg, func(t *testing.T) {
			_, srv := newHTTPCollector(t)
			setenv(t, map[string]string{
				"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none",
				"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
				"OTEL_TRACES_SAMPLER":         tt.sampler, "OTEL_TRACES_SAMPLER_ARG": tt.arg,
			})
			tel := setup(t, telemetry.Config{})
			defer shutdown(t, tel)
			_, span := tel.Tracer().Start(context.Background(), telemetry.SpanProcess)
			defer span.End()
			if got := span.SpanContext().IsSampled(); got != tt.sampled {
				t.Errorf("sampled = %v, want %v", got, tt.sampled)
			}
		})
	}
}

func TestSetupRejects(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		vr   string // the variable the error names
	}{
		{"unknown trace exporter", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"},
		{"prometheus is not a trace exporter", map[string]string{"OTEL_TRACES_EXPORTER": "prometheus"}, "OTEL_TRACES_EXPORTER"},
		{"unknown metric exporter", map[string]string{"OTEL_METRICS_EXPORTER": "statsd"}, "OTEL_METRICS_EXPORTER"},
		{"none with others", map[string]string{"OTEL_TRACES_EXPORTER": "otlp,none"}, "OTEL_TRACES_EXPORTER"},
		{"a list", map[string]string{"OTEL_METRICS_EXPORTER": "prometheus,otlp"}, "OTEL_METRICS_EXPORTER"},
		{"listed twice", map[string]string{"OTEL_METRICS_EXPORTER": "otlp, otlp"}, "OTEL_METRICS_EXPORTER"},
		{"name not as autoexport spells it", map[string]string{"OTEL_TRACES_EXPORTER": "OTLP"}, "OTEL_TRACES_EXPORTER"},
		{"empty list item", map[string]string{"OTEL_TRACES_EXPORTER": "console,"}, "OTEL_TRACES_EXPORTER"},
		{"unknown protocol", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"unknown signal protocol", map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "udp"}, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"},
		{"http endpoint without scheme", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"endpoint without host", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http:///v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"endpoint not a URL", map[string]string{"OTEL_METRICS_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://[::1"}, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"},
		{"endpoint with credentials not a URL", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://u:s3cret@collector:xx/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"endpoint with credentials without host", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://u:s3cret@/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"unknown sampler", map[string]string{"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{"ratio above one", map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{"ratio not a number", map[string]string{"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, "OTEL_TRACES_SAMPLER_ARG"},
		{"ratio NaN", map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "NaN"}, "OTEL_TRACES_SAMPLER_ARG"},
		{"resource pair without =", map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "team=core,region"}, "OTEL_RESOURCE_ATTRIBUTES"},
		{"resource pair without key", map[string]string{"OTEL_RESOURCE_ATTRIBUTES": "=core"}, "OTEL_RESOURCE_ATTRIBUTES"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, tt.env)
			tel, err := telemetry.Setup(context.Background(), telemetry.Config{})
			var ce *telemetry.ConfigError
			if !errors.As(err, &ce) {
				if tel != nil {
					_ = tel.Shutdown(context.Background())
				}
				t.Fatalf("Setup error = %v, want a *ConfigError", err)
			}
			if ce.Var != tt.vr {
				t.Errorf("error names %s, want %s (%v)", ce.Var, tt.vr, err)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error shows the credentials of the endpoint: %v", err)
			}
		})
	}
}

// OTLP settings matter only when an otlp exporter is on.
func TestProtocolIgnoredWithoutOTLP(t *testing.T) {
	setenv(t, map[string]string{
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318",
	})
	tel := setup(t, telemetry.Config{})
	shutdown(t, tel)
}

func TestOTLP(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		grpc bool
		// endpointVar is the variable that names the collector; a
		// base endpoint gets /v1/traces appended, a signal one does not.
		endpointVar, suffix string
		wantTracePath       string
		serviceName         string // OTEL_SERVICE_NAME
		wantService         string
	}{
		{name: "http, base endpoint", endpointVar: "OTEL_EXPORTER_OTLP_ENDPOINT",
			wantTracePath: "/v1/traces", wantService: "rc-test"},
		{name: "http, base endpoint with path", endpointVar: "OTEL_EXPORTER_OTLP_ENDPOINT", suffix: "/otel",
			wantTracePath: "/otel/v1/traces", wantService: "rc-test"},
		{name: "http, traces endpoint as is", endpointVar: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", suffix: "/ingest/traces",
			wantTracePath: "/ingest/traces", wantService: "rc-test"},
		{name: "http, OTEL_SERVICE_NAME wins", endpointVar: "OTEL_EXPORTER_OTLP_ENDPOINT",
			wantTracePath: "/v1/traces", serviceName: "from-env", wantService: "from-env"},
		{name: "grpc", grpc: true, endpointVar: "OTEL_EXPORTER_OTLP_ENDPOINT", wantService: "rc-test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c *collector
			var url string
			if tt.grpc {
				c, url = newGRPCCollector(t)
			} else {
				var srv *httptest.Server
				c, srv = newHTTPCollector(t)
				url = srv.URL
			}
			vars := map[string]string{
				"OTEL_TRACES_EXPORTER":     "otlp",
				"OTEL_METRICS_EXPORTER":    "otlp",
				tt.endpointVar:             url + tt.suffix,
				"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=ci,team=rolecall%20core",
				"OTEL_SERVICE_NAME":        tt.serviceName,
			}
			if tt.endpointVar != "OTEL_EXPORTER_OTLP_ENDPOINT" {
				// Metrics go to the base endpoint.
				vars["OTEL_EXPORTER_OTLP_ENDPOINT"] = url
			}
			if tt.grpc {
				vars["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
			}
			setenv(t, vars)
			tel := setup(t, telemetry.Config{ServiceName: "rc-test", ServiceVersion: "1.2.3", InstanceID: "w-1"})
			sc := processSpan(tel)
			ins, err := telemetry.NewInstruments(tel.MeterProvider)
			if err != nil {
				t.Fatal(err)
			}
			ins.TaskDone(context.Background(), telemetry.OutcomeFailed, "mode_disallowed")
			shutdown(t, tel) // flushes both exporters

			spans, resources := c.spans()
			var names []string
			for i, s := range spans {
				names = append(names, s.GetName())
				if got := trace.TraceID(s.GetTraceId()); got != sc.TraceID() {
					t.Errorf("span %s trace id %s, want %s", s.GetName(), got, sc.TraceID())
				}
				want := map[string]string{
					"service.name":                tt.wantService,
					"service.version":             "1.2.3",
					"service.instance.id":         "w-1",
					"host.name":                   host,
					"deployment.environment.name": "ci",
					"team":                        "rolecall core",
				}
				for k, v := range want {
					if resources[i][k] != v {
						t.Errorf("resource %s = %q, want %q", k, resources[i][k], v)
					}
				}
				if s.GetName() == telemetry.SpanProcess {
					if s.GetKind() != tracepb.Span_SPAN_KIND_CONSUMER {
						t.Errorf("process span kind %v, want consumer", s.GetKind())
					}
					if got := stringAttrs(s.GetAttributes()); got["rolecall.task_id"] != "T-42" || got["messaging.system"] != "nats" {
						t.Errorf("process span attributes %v", got)
					}
				}
			}
			if diff := cmp.Diff([]string{telemetry.SpanResolve, telemetry.SpanProcess}, names); diff != "" {
				t.Errorf("spans received (-want +got):\n%s", diff)
			}
			if !tt.grpc {
				c.mu.Lock()
				if len(c.paths) == 0 || c.paths[0] != tt.wantTracePath {
					t.Errorf("request paths %v, want the first to be %s", c.paths, tt.wantTracePath)
				}
				c.mu.Unlock()
			}
			found := false
			for _, n := range c.metricNames() {
				found = found || n == telemetry.MetricTasks
			}
			if !found {
				t.Errorf("metrics received %v, want %s among them", c.metricNames(), telemetry.MetricTasks)
			}
		})
	}
}

func TestMetricsHandlerServesPrometheus(t *testing.T) {
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	tel := setup(t, telemetry.Config{InstanceID: "w-1"})
	defer shutdown(t, tel)
	ins, err := telemetry.NewInstruments(tel.MeterProvider)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ins.TaskDone(ctx, telemetry.OutcomeFailed, "mode_disallowed")
	ins.TaskDone(ctx, telemetry.OutcomeFailed, "mode_disallowed")
	if _, err := ins.ObserveInflight(func() int64 { return 3 }); err != nil {
		t.Fatal(err)
	}
	if _, err := ins.ObservePending(func(context.Context) (int64, bool) { return 12, true }); err != nil {
		t.Fatal(err)
	}

	rec := httptest.NewRecorder()
	tel.MetricsHandler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []sample{
		{"rolecall_tasks_total", map[string]string{"outcome": "failed", "code": "mode_disallowed"}, "2"},
		{"rolecall_inflight", nil, "3"},
		{"rolecall_consumer_pending", nil, "12"},
		{"target_info", map[string]string{"service_name": telemetry.DefaultServiceName, "service_instance_id": "w-1"}, "1"},
	} {
		if !want.in(body) {
			t.Errorf("/metrics has no %s%v %s; got:\n%s", want.name, want.labels, want.value, body)
		}
	}
}

// The start-up line states the exporters, the OTLP protocol and endpoint of
// each signal that uses otlp, and the sampler when traces are on.
func TestSummary(t *testing.T) {
	_, httpSrv := newHTTPCollector(t)
	_, grpcURL := newGRPCCollector(t)
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"defaults", nil, "traces=none metrics=prometheus"},
		{"otlp over http and grpc", map[string]string{
			"OTEL_TRACES_EXPORTER":                "otlp",
			"OTEL_EXPORTER_OTLP_ENDPOINT":         httpSrv.URL + "/otel",
			"OTEL_TRACES_SAMPLER":                 "parentbased_traceidratio",
			"OTEL_TRACES_SAMPLER_ARG":             "0.25",
			"OTEL_METRICS_EXPORTER":               "otlp",
			"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": grpcURL,
		}, "traces=otlp traces_protocol=http/protobuf traces_endpoint=" + httpSrv.URL + "/otel/v1/traces" +
			" sampler=parentbased_traceidratio:0.25 metrics=otlp metrics_protocol=grpc metrics_endpoint=" + grpcURL},
		{"otlp to the exporter's default endpoint", map[string]string{
			"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none",
		}, "traces=otlp traces_protocol=http/protobuf traces_endpoint=localhost:4318/v1/traces sampler=parentbased_always_on metrics=none"},
		{"credentials in the endpoint are hidden", map[string]string{
			"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_ENDPOINT":         "http://user:s3cret@" + strings.TrimPrefix(httpSrv.URL, "http://"),
			"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://s3cret@" + strings.TrimPrefix(grpcURL, "http://"),
		}, "traces=otlp traces_protocol=http/protobuf traces_endpoint=http://xxxxx@" + strings.TrimPrefix(httpSrv.URL, "http://") + "/v1/traces" +
			" sampler=parentbased_always_on metrics=otlp metrics_protocol=grpc metrics_endpoint=http://xxxxx@" + strings.TrimPrefix(grpcURL, "http://")},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"},
			"traces=none metrics=none sdk_disabled=true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setenv(t, tt.env)
			tel := setup(t, telemetry.Config{})
			defer shutdown(t, tel)
			var buf bytes.Buffer
			noTime := func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: noTime}))
			log.LogAttrs(context.Background(), slog.LevelInfo, "telemetry", tel.Summary()...)
			if got, want := buf.String(), "level=INFO msg=telemetry "+tt.want+"\n"; got != want {
				t.Errorf("start-up line:\n got %s\nwant %s", got, want)
			}
		})
	}
}
