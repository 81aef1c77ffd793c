package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"

	"github.com/rolecall/rolecall/bundle"
	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/service"
	"github.com/rolecall/rolecall/telemetry"
)

type runCmd struct {
	natsFlags
	Concurrency    int           `help:"Deliveries processed at once, each waiting on the broker most of the time (default 128)." env:"ROLECALL_CONCURRENCY"`
	HTTP           string        `name:"http" help:"Serve /healthz, /readyz and /metrics on ADDR (e.g. :8080)." env:"ROLECALL_HTTP" placeholder:"ADDR"`
	Store          string        `help:"Store directory of the embedded NATS server: streams, the outcome store and consumer state (default: <user cache dir>/rolecall/nats)." env:"ROLECALL_STORE" type:"path" placeholder:"DIR"`
	Data           string        `hidden:"" help:"Old name of --store." env:"ROLECALL_DATA" type:"path"`
	Strict         bool          `help:"Refuse to start when the config root has a problem worker validate would report." env:"ROLECALL_STRICT"`
	Listen         string        `help:"Listen address of the embedded NATS server." default:"127.0.0.1:4222" env:"ROLECALL_EMBEDDED_LISTEN"`
	DrainTimeout   time.Duration `help:"How long SIGINT/SIGTERM may take to finish in-flight tasks." default:"30s" env:"ROLECALL_DRAIN_TIMEOUT"`
	ReloadInterval time.Duration `help:"How often a background sweep stats every file of the config root (tasks never wait for it). Default: 10s while file events name the changes, 500ms with --no-file-events or where events are unavailable." env:"ROLECALL_RELOAD_INTERVAL"`
	FileEvents     bool          `help:"Watch the config root's directories for file events (inotify) and reload what they name at once; the sweep stays as the safety net. Turn off on network file systems, which send no events." default:"true" negatable:"" env:"ROLECALL_FILE_EVENTS"`
	Replicas       int           `help:"Stream and consumer replicas." env:"ROLECALL_REPLICAS"`
	MaxDeliver     int           `help:"Deliveries of one task before the dead-letter path answers it." env:"ROLECALL_MAX_DELIVER"`
	AckWait        time.Duration `help:"Time a task may stay unacknowledged before redelivery." env:"ROLECALL_ACK_WAIT"`
	RetryFor       time.Duration `help:"How long a delivery retries a transient broker fault in place before the task is redelivered (default 30s)." env:"ROLECALL_RETRY_FOR"`
	Horizon        string        `name:"idempotency-horizon" help:"How long each task event's outcome is remembered, so a re-sent event gets no second outcome (default 24h; 0 turns the store off)." env:"ROLECALL_IDEMPOTENCY_HORIZON" placeholder:"DURATION"`
	NoCreate       bool          `help:"Require the streams and consumer to exist instead of creating them." env:"ROLECALL_NO_CREATE"`
	Instance       string        `help:"Worker instance id (default hostname-pid)." env:"ROLECALL_INSTANCE"`
	Fleet          string        `help:"CloudEvents source of outcomes: the fleet's name." default:"rolecall" env:"ROLECALL_FLEET"`
	ConfigFrom     string        `name:"config-from" help:"Where packs, profiles and catalog come from: files (the config root) or nats (the bundle at ROLECALL_CONFIG current; the root still gives the nats: block)." enum:"files,nats" default:"files" env:"ROLECALL_CONFIG_FROM"`
	uiFlags
	auditFlags
	serviceFlags
}

func (c *runCmd) Run(ctx context.Context, g *globals) error {
	if err := c.checkNumbers(); err != nil {
		return err
	}
	if err := c.uiFlags.check(); err != nil {
		return err
	}
	log, err := newLogger(g)
	if err != nil {
		return err
	}
	opts := g.discoverOptions()
	opts.ReloadInterval, opts.PollOnly = c.ReloadInterval, !c.FileEvents
	src, err := discover.NewSource(g.Root, opts, log)
	if err != nil {
		return fmt.Errorf("load config root %s: %w", g.Root, err)
	}
	src.Start(ctx)
	defer src.Stop()
	snap := src.Snapshot()
	problems := &configProblems{log: log}
	if n := len(problems.check(snap)); n > 0 && c.Strict {
		return &exitError{code: exitProblems, err: fmt.Errorf("--strict: the config root %s has %d problem(s), logged above; worker validate --root %s lists them", g.Root, n, g.Root)}
	}
	store, err := c.storeDir()
	if err != nil {
		return err
	}
	nf := c.natsFlags.withConfig(snap.Config.NATS)
	if err := nf.check(); err != nil {
		return err
	}
	if p := nf.prefix(); !server.IsValidLiteralSubject(p) || strings.ContainsAny(p, " \t\r\n") {
		return usageErr("subject prefix %q (--prefix, ROLECALL_SUBJECT_PREFIX or nats.subject_prefix) is not a literal NATS subject", p)
	}

	instance := c.Instance
	if instance == "" {
		host, _ := os.Hostname()
		instance = host + "-" + strconv.Itoa(os.Getpid())
	}
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "rolecall-worker", ServiceVersion: version, InstanceID: instance})
	if err != nil {
		return err // Setup's errors start with "telemetry:" already
	}
	defer func() {
		if err := shutdownWithin(5*time.Second, tel.Shutdown); err != nil {
			log.Warn("telemetry flush", "error", err)
		}
	}()
	otel.SetErrorHandler(telemetry.ErrorHandler(log))
	log.LogAttrs(ctx, slog.LevelInfo, "telemetry", tel.Summary()...)
	inst, err := telemetry.NewInstruments(tel.MeterProvider)
	if err != nil {
		return err
	}
	reg, err := inst.ObserveConfigProblems(problems.count.Load)
	if err != nil {
		return err
	}
	defer func() { _ = reg.Unregister() }()

	if nf.NATS == "" {
		srv, err := c.startEmbedded(log, store)
		if err != nil {
			return err
		}
		defer func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		}()
		nf.NATS = srv.ClientURL()
		fmt.Fprintf(g.stdout, "embedded NATS server with JetStream listening on %s\n", nf.NATS)
		fmt.Fprintf(g.stdout, "embedded NATS store: %s\n", store)
	}
	nc, js, err := nf.connectJS("rolecall-worker "+instance, log, nats.ErrorHandler(asyncErrors(log, inst.SlowConsumer)))
	if err != nil {
		return err
	}
	defer nc.Close()

	cfg := pipelineConfig(snap.Config.NATS)
	cfg.Prefix = nf.prefix()
	cfg.FleetSource = c.Fleet
	setPositive(&cfg.Concurrency, c.Concurrency)
	setPositive(&cfg.Replicas, c.Replicas)
	setPositive(&cfg.MaxDeliver, c.MaxDeliver)
	setPositive(&cfg.AckWait, c.AckWait)
	setPositive(&cfg.RetryFor, c.RetryFor)
	if c.Horizon != "" {
		h, err := parseHorizon(c.Horizon)
		if err != nil {
			return usageErr("--idempotency-horizon: %v", err)
		}
		cfg.IdempotencyHorizon = h
	}
	if c.NoCreate {
		cfg.CreateStreams = false
	}
	var decideFrom snapshotSource = src
	var bundles *bundle.Source
	if c.ConfigFrom == discover.ConfigFromNATS {
		var stop func()
		if bundles, stop, err = watchBundles(ctx, js, tel.MeterProvider, cfg.CreateStreams, cfg.Replicas, log); err != nil {
			return err
		}
		defer stop()
		decideFrom = bundles
	}
	w, err := pipeline.New(js, decideFrom, cfg, pipeline.Options{
		Logger:         log,
		TracerProvider: tel.TracerProvider,
		Propagator:     tel.Propagator,
		Instruments:    inst,
		Version:        readBuildInfo().Version,
	})
	if err != nil {
		return err
	}
	wc := w.Config() // cfg with the runner's defaults filled in

	if c.Service {
		stopService, err := c.startService(nf, instance, decideFrom, wc, log)
		if err != nil {
			return err
		}
		defer stopService()
	}
	if c.UI != "" {
		stopUI, err := c.serveUI(js, wc, uiSnapshots(decideFrom), log)
		if err != nil {
			return err
		}
		defer stopUI()
	}
	defer c.startAudit(ctx, js, wc, tel.MeterProvider, log)()
	if c.HTTP != "" {
		stopHTTP, err := serveHTTP(c.HTTP, nc, w, decideFrom, problems, tel, log)
		if err != nil {
			return err
		}
		defer stopHTTP()
	}

	horizon := "off"
	if wc.Idempotent() {
		horizon = wc.IdempotencyHorizon.String()
	}
	log.Info("worker starting", "instance", instance, "concurrency", wc.Concurrency,
		"tasks_stream", wc.TasksStream, "specs_stream", wc.SpecsStream, "idempotency_horizon", horizon, "snapshot", snap.Digest)
	if bundles != nil {
		// No task is taken before a bundle serves.
		log.Info("waiting for a config bundle", "bucket", bundle.Bucket, "key", bundle.KeyCurrent)
		if err := bundles.Wait(ctx); err != nil {
			return nil
		}
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go problems.watch(watchCtx, decideFrom.Snapshot, max(c.ReloadInterval, time.Second))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	flushWithin := 10 * time.Second // nats.Conn.Flush's own limit
	select {
	case err = <-done:
	case <-ctx.Done():
		log.Info("draining: no new tasks are fetched; in-flight tasks finish", "timeout", c.DrainTimeout.String())
		deadline := time.Now().Add(c.DrainTimeout)
		select {
		case err = <-done:
		case <-time.After(c.DrainTimeout):
			return fmt.Errorf("drain did not finish within %s; unacknowledged tasks will be redelivered", c.DrainTimeout)
		}
		// The flush of the last acks is part of the drain: with the
		// broker down it would otherwise wait its own 10 s past the
		// timeout.
		flushWithin = time.Until(deadline)
	}
	if err != nil {
		return err
	}
	switch {
	case flushWithin <= 0:
		log.Warn("flush", "error", "drain timeout reached; acks not yet sent are lost and their tasks redelivered")
	case !nc.IsConnected():
		// A flush would wait out the timeout for a broker that is not
		// there; the acks it holds are lost either way.
		log.Warn("flush", "error", "the broker is unreachable; acks not yet sent are lost and their tasks redelivered")
	default:
		if err := nc.FlushTimeout(flushWithin); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			log.Warn("flush", "error", err)
		}
	}
	log.Info("worker stopped")
	return nil
}

// parseHorizon reads --idempotency-horizon: a positive duration, or 0 for
// no store.
func parseHorizon(s string) (time.Duration, error) {
	if s == "0" {
		return pipeline.IdempotencyOff, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, err
	case d < 0:
		return 0, fmt.Errorf("%s is negative", s)
	case d == 0:
		return pipeline.IdempotencyOff, nil
	}
	return d, nil
}

// checkNumbers refuses, before anything starts, a negative count or
// duration, which used to be ignored without a word (the default served
// instead), a drain timeout that is not positive, which failed every stop
// at once, more than 5 replicas and an --http address that does not parse.
func (c *runCmd) checkNumbers() error {
	if c.DrainTimeout <= 0 {
		return usageErr("--drain-timeout %s: must be positive", c.DrainTimeout)
	}
	if c.Replicas > 5 {
		return usageErr("--replicas %d: must be between 1 and 5 (0 or unset: the default)", c.Replicas)
	}
	if c.HTTP != "" {
		_, port, err := net.SplitHostPort(c.HTTP)
		if err == nil {
			_, err = net.LookupPort("tcp", port)
		}
		if err != nil {
			return usageErr("--http %q: %v", c.HTTP, err)
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"--concurrency", int64(c.Concurrency)},
		{"--service-concurrency", int64(c.ServiceConcurrency)},
		{"--replicas", int64(c.Replicas)},
		{"--max-deliver", int64(c.MaxDeliver)},
		{"--ack-wait", int64(c.AckWait)},
		{"--retry-for", int64(c.RetryFor)},
		{"--reload-interval", int64(c.ReloadInterval)},
	} {
		if f.v < 0 {
			return usageErr("%s must not be negative (0 or unset: the default)", f.name)
		}
	}
	return nil
}

// setPositive sets *dst to v unless v is zero (unset) or negative.
func setPositive[T int | time.Duration](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

// pipelineConfig maps the nats: block of rolecall.yaml onto the runner's
// config; zero values keep the runner's defaults.
func pipelineConfig(n discover.NATSConfig) pipeline.Config {
	cfg := pipeline.DefaultConfig()
	cfg.TasksStream = cmp.Or(n.TasksStream, cfg.TasksStream)
	cfg.SpecsStream = cmp.Or(n.SpecsStream, cfg.SpecsStream)
	cfg.Consumer = cmp.Or(n.Consumer, cfg.Consumer)
	setPositive(&cfg.Replicas, n.Replicas)
	setPositive(&cfg.MaxDeliver, n.MaxDeliver)
	setPositive(&cfg.Concurrency, n.Concurrency)
	setPositive(&cfg.AckWait, n.AckWait)
	setPositive(&cfg.DuplicateWindow, n.DuplicateWindow)
	setPositive(&cfg.RetryFor, n.RetryFor)
	if n.Backoff != nil {
		cfg.Backoff = n.Backoff
	}
	if h := n.IdempotencyHorizon; h != nil {
		cfg.IdempotencyHorizon = *h
		if *h == 0 {
			cfg.IdempotencyHorizon = pipeline.IdempotencyOff
		}
	}
	if n.CreateStreams != nil {
		cfg.CreateStreams = *n.CreateStreams
	}
	return cfg
}

// storeDir is the embedded server's store directory: --store, else the
// old --data, else <user cache dir>/rolecall/nats.
func (c *runCmd) storeDir() (string, error) {
	switch {
	case c.Store != "" && c.Data != "" && c.Store != c.Data:
		return "", usageErr("--store %s and --data %s disagree; --data is the old name of --store", c.Store, c.Data)
	case c.Store != "":
		return c.Store, nil
	case c.Data != "":
		return c.Data, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "rolecall", "nats"), nil
}

// startEmbedded runs an in-process nats-server with JetStream for the
// single-machine setup, storing in dir.
func (c *runCmd) startEmbedded(log *slog.Logger, dir string) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return nil, usageErr("--listen %q: %v", c.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, usageErr("--listen %q: bad port", c.Listen)
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
func serveHTTP(addr string, nc *nats.Conn, w *pipeline.Worker, src snapshotSource, problems *configProblems, tel *telemetry.Telemetry, log *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("/readyz", func(rw http.ResponseWriter, _ *http.Request) {
		var status map[string]any
		var ok bool
		if b, isBundle := src.(*bundle.Source); isBundle {
			status, ok = bundleReadyz(nc, w, b, problems)
		} else {
			snap := src.Snapshot()
			status = map[string]any{
				"nats_connected": nc.IsConnected(),
				"consumer_bound": w.Ready(),
				"snapshot":       snap.Digest,
				"snapshot_error": nil,
				// What worker validate reports for the snapshot served: detail
				// for the operator, not a reason to be unready (every other
				// pack works).
				"problems": service.Problems(problems.check(snap)),
			}
			ok = nc.IsConnected() && w.Ready()
			if err := src.Err(); err != nil {
				status["snapshot_error"] = err.Error()
				ok = false
			}
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
	return func() { _ = shutdownWithin(2*time.Second, srv.Shutdown) }, nil
}

// shutdownWithin calls shutdown with a context that ends after d.
func shutdownWithin(d time.Duration, shutdown func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return shutdown(ctx)
}

func newLogger(g *globals) (*slog.Logger, error) {
	level, err := telemetry.ParseLevel(g.LogLevel)
	if err != nil {
		return nil, usageErr("--log-level: %v", err)
	}
	return telemetry.NewLogger(g.stderr, level, !isTerminal(g.stderr)), nil
}

// isTerminal reports whether w is an *os.File on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && telemetry.IsTerminal(f)
}
