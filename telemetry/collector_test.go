package telemetry_test

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// collector is an in-process OTLP receiver (HTTP and gRPC) that keeps every
// request it decoded.
type collector struct {
	coltrace.UnimplementedTraceServiceServer

	t       *testing.T
	mu      sync.Mutex
	paths   []string
	traces  []*coltrace.ExportTraceServiceRequest
	metrics []*colmetric.ExportMetricsServiceRequest
}

// newHTTPCollector serves OTLP/HTTP: request paths containing "metrics" are
// decoded as metrics, all others as traces.
func newHTTPCollector(t *testing.T) (*collector, *httptest.Server) {
	c := &collector{t: t}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			c.fail(w, err)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		c.fail(w, err)
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paths = append(c.paths, r.URL.Path)
	var resp proto.Message
	if strings.Contains(r.URL.Path, "metrics") {
		req := new(colmetric.ExportMetricsServiceRequest)
		err, resp = proto.Unmarshal(raw, req), new(colmetric.ExportMetricsServiceResponse)
		c.metrics = append(c.metrics, req)
	} else {
		req := new(coltrace.ExportTraceServiceRequest)
		err, resp = proto.Unmarshal(raw, req), new(coltrace.ExportTraceServiceResponse)
		c.traces = append(c.traces, req)
	}
	if err != nil {
		c.fail(w, err)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *collector) fail(w http.ResponseWriter, err error) {
	c.t.Errorf("collector: %v", err)
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// newGRPCCollector serves OTLP/gRPC on a loopback port and returns its
// http:// URL (the scheme tells the exporter to skip TLS).
func newGRPCCollector(t *testing.T) (*collector, string) {
	c := &collector{t: t}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(s, c)
	colmetric.RegisterMetricsServiceServer(s, metricsServer{c: c})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return c, "http://" + lis.Addr().String()
}

func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.traces = append(c.traces, req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// metricsServer adapts the collector to the metrics service, whose Export
// method has the same name as the trace service's.
type metricsServer struct {
	colmetric.UnimplementedMetricsServiceServer
	c *collector
}

func (m metricsServer) Export(_ context.Context, req *colmetric.ExportMetricsServiceRequest) (*colmetric.ExportMetricsServiceResponse, error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	m.c.metrics = append(m.c.metrics, req)
	return &colmetric.ExportMetricsServiceResponse{}, nil
}

// spans returns every span received, with the string attributes of the
// resource it came with.
func (c *collector) spans() ([]*tracepb.Span, []map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var spans []*tracepb.Span
	var res []map[string]string
	for _, req := range c.traces {
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans = append(spans, s)
					res = append(res, stringAttrs(rs.GetResource().GetAttributes()))
				}
			}
		}
	}
	return spans, res
}

// metricNames returns the names of every metric received.
func (c *collector) metricNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, req := range c.metrics {
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					names = append(names, m.GetName())
				}
			}
		}
	}
	return names
}

func (c *collector) requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.traces) + len(c.metrics)
}

func stringAttrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		if v, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok {
			m[kv.GetKey()] = v.StringValue
		}
	}
	return m
}
