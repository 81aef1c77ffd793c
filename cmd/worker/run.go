package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/telemetry"
)

type runCmd struct {
	natsFlags
	Concurrency    int           `help:"Tasks processed at once (default 4 × GOMAXPROCS)." env:"ROLECALL_CONCURRENCY"`
	HTTP           string        `name:"http" help:"Serve /healthz, /readyz and /metrics on ADDR (e.g. :8080)." env:"ROLECALL_HTTP" placeholder:"ADDR"`
	Data           string        `help:"Store directory of the embedded NATS server (default: the user cache dir)." env:"ROLECALL_DATA" type:"path"`
	Listen         string        `help:"Listen address of the embedded NATS server." default:"127.0.0.1:4222" env:"ROLECALL_EMBEDDED_LISTEN"`
	DrainTimeout   time.Duration `help:"How long SIGINT/SIGTERM may take to finish in-flight tasks." default:"30s" env:"ROLECALL_DRAIN_TIMEOUT"`
	ReloadInterval time.Duration `help:"How often the config root is checked for changes." default:"1s" env:"ROLECALL_RELOAD_INTERVAL"`
	Replicas       int           `help:"Stream and consumer replicas." env:"ROLECALL_REPLICAS"`
	MaxDeliver     int           `help:"Deliveries of one task before the dead-letter path answers it." env:"ROLECALL_MAX_DELIVER"`
	AckWait        time.Duration `help:"Time a task may stay unacknowledged before redelivery." env:"ROLECALL_ACK_WAIT"`
	NoCreate       bool          `help:"Require the streams and consumer to exist instead of creating them." env:"ROLECALL_NO_CREATE"`
	Instance       string        `help:"Worker instance id (default hostname-pid)." env:"ROLECALL_INSTANCE"`
	Fleet          string        `help:"CloudEvents source of outcomes: the fleet's name." default:"rolecall" env:"ROLECALL_FLEET"`
}

func (c *runCmd) Run(ctx context.Context, g *globals) error {
	log, err := newLogger(g)
	if err != nil {
		return err
	}
	src, err := discover.NewSource(g.Root, discover.Options{ReloadInterval: c.ReloadInterval}, log)
	if err != nil {
		return fmt.Errorf("load config root %s: %w", g.Root, err)
	}
	snap := src.Snapshot()
	nf := c.natsFlags.withConfig(snap.Config.NATS)

	instance := c.Instance
	if instance == "" {
		host, _ := os.Hostname()
		instance = host + "-" + strconv.Itoa(os.Getpid())
	}
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "rolecall-worker", ServiceVersion: version, InstanceID: instance})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("telemetry flush", "error", err)
		}
	}()
	otel.SetErrorHandler(telemetry.ErrorHandler(log))
	inst, err := telemetry.NewInstruments(tel.MeterProvider)
	if err != nil {
		return err
	}

	if nf.NATS == "" {
		srv, err := c.startEmbedded(log)
		if err != nil {
			return err
		}
		defer func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		}()
		nf.NATS = srv.ClientURL()
		fmt.Fprintf(g.stdout, "embedded NATS server with JetStream listening on %s\n", nf.NATS)
	}
	nc, err := nf.connect("rolecall-worker "+instance, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	cfg := pipelineConfig(snap.Config.NATS)
	cfg.Prefix = nf.prefix()
	cfg.FleetSource = c.Fleet
	setInt(&cfg.Concurrency, c.Concurrency)
	setInt(&cfg.Replicas, c.Replicas)
	setInt(&cfg.MaxDeliver, c.MaxDeliver)
	if c.AckWait > 0 {
		cfg.AckWait = c.AckWait
	}
	if c.NoCreate {
		cfg.CreateStreams = false
	}
	w, err := pipeline.New(js, src, cfg, pipeline.Options{
		Logger:         log,
		TracerProvider: tel.TracerProvider,
		Propagator:     tel.Propagator,
		Instruments:    inst,
	})
	if err != nil {
		return err
	}

	if c.HTTP != "" {
		stopHTTP, err := serveHTTP(c.HTTP, nc, w, src, tel, log)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}

	log.Info("worker starting", "instance", instance, "concurrency", w.Config().Concurrency,
		"tasks_stream", w.Config().TasksStream, "specs_stream", w.Config().SpecsStream, "snapshot", snap.Digest)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		log.Info("draining: no new tasks are fetched; in-flight tasks finish", "timeout", c.DrainTimeout)
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-time.After(c.DrainTimeout):
			return fmt.Errorf("drain did not finish within %s; unacknowledged tasks will be redelivered", c.DrainTimeout)
		}
	}
	if err := nc.Flush(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		log.Warn("flush", "error", err)
	}
	log.Info("worker stopped")
	return nil
}

func setInt(dst *int, v int) {
	if v > 0 {
		*dst = v
	}
}

// pipelineConfig maps the nats: block of rolecall.yaml onto the runner's
// config; zero values keep the runner's defaults.
func pipelineConfig(n discover.NATSConfig) pipeline.Config {
	cfg := pipeline.DefaultConfig()
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&cfg.TasksStream, n.TasksStream)
	set(&cfg.SpecsStream, n.SpecsStream)
	set(&cfg.Consumer, n.Consumer)
	setInt(&cfg.Replicas, n.Replicas)
	setInt(&cfg.MaxDeliver, n.MaxDeliver)
	setInt(&cfg.Concurrency, n.Concurrency)
	if n.AckWait > 0 {
		cfg.AckWait = n.AckWait
	}
	if n.Backoff != nil {
		cfg.Backoff = n.Backoff
	}
	if n.DuplicateWindow > 0 {
		cfg.DuplicateWindow = n.DuplicateWindow
	}
	if n.CreateStreams != nil {
		cfg.CreateStreams = *n.CreateStreams
	}
	return cfg
}

// startEmbedded runs an in-process nats-server with JetStream for the
// single-machine setup.
func (c *runCmd) startEmbedded(log *slog.Logger) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return nil, usageErr("--listen %q: %v", c.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, usageErr("--listen %q: bad port", c.Listen)
	}
	dir := c.Data
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "rolecall", "nats")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded NATS store %s: %w", dir, err)
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "rolecall-embedded",
		Host:       host, Port: port,
		JetStream: true, StoreDir: dir,
		NoSigs: true, NoLog: true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not start on %s (is the port in use? set --listen or --nats)", c.Listen)
	}
	log.Info("embedded NATS started", "url", srv.ClientURL(), "store", dir)
	return srv, nil
}

// serveHTTP exposes liveness, readiness and metrics.
func serveHTTP(addr string, nc *nats.Conn, w *pipeline.Worker, src *discover.Source, tel *telemetry.Telemetry, log *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
		status := map[string]any{
			"nats_connected": nc.IsConnected(),
			"consumer_bound": w.Ready(),
			"snapshot":       src.Snapshot().Digest,
			"snapshot_error": nil,
		}
		ok := nc.IsConnected() && w.Ready()
		if err := src.Err(); err != nil {
			status["snapshot_error"] = err.Error()
			ok = false
		}
		status["ready"] = ok
		rw.Header().Set("Content-Type", "application/json")
		if !ok {
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(rw).Encode(status)
	})
	if tel.MetricsHandler != nil {
		mux.Handle("/metrics", tel.MetricsHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "error", err)
		}
	}()
	log.Info("http listening", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

func newLogger(g *globals) (*slog.Logger, error) {
	level, err := telemetry.ParseLevel(g.LogLevel)
	if err != nil {
		return nil, usageErr("--log-level: %v", err)
	}
	jsonLogs := true
	if f, ok := g.stderr.(*os.File); ok && telemetry.IsTerminal(f) {
		jsonLogs = false
	}
	return telemetry.NewLogger(g.stderr, level, jsonLogs), nil
}
