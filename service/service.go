package service

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/pipeline"
)

// Name is the micro service's name; QueueGroup its queue group.
const (
	Name       = "rolecall"
	QueueGroup = "rolecall"
)

// Endpoint names; each is served on <prefix>.svc.<name>.
const (
	EndpointResolve  = "resolve"
	EndpointRoster   = "roster"
	EndpointExplain  = "explain"
	EndpointValidate = "validate"
	EndpointConfig   = "config"
)

// Metadata keys of every instance.
const (
	MetaInstance       = "instance"
	MetaConfigSource   = "config_source"
	MetaConfigDigest   = "config_digest"
	MetaConfigRevision = "config_revision"
)

// Reply headers of resolve and explain (set on errors too).
const (
	// HeaderOutcomeID is the id the outcome has (or would have).
	HeaderOutcomeID = "Rolecall-Outcome-Id"
	// HeaderOutcomeSubject is the subject the worker would publish the
	// outcome on (resolve only).
	HeaderOutcomeSubject = "Rolecall-Outcome-Subject"
	// HeaderConfigDigest is the digest of the configuration that answered.
	HeaderConfigDigest = "Rolecall-Config-Digest"
)

// SnapshotSource yields the configuration snapshot to answer from
// (*discover.Source implements it, and the optional Err that config
// reports).
type SnapshotSource interface {
	Snapshot() *discover.Snapshot
}

// reloadErrer is the optional part of a source that reports why its last
// reload was refused.
type reloadErrer interface{ Err() error }

// Options configure a service instance. Zero values take the defaults
// noted.
type Options struct {
	// Pipeline is the worker's configuration: its prefix (the endpoints'
	// subjects are <Prefix>.svc.*), fleet source, data schema base and
	// task size limit, so that a preview is encoded as the worker would.
	Pipeline pipeline.Config
	// Version is the worker's version; made semver by SemVer.
	Version string
	// Instance names the worker instance (metadata "instance").
	Instance string
	// Concurrency bounds the requests worked on at once across all
	// endpoints (default GOMAXPROCS/2, at least 1).
	Concurrency int
	// PendingMsgs bounds the requests waiting in one endpoint's
	// subscription (default 10,000); beyond it the client drops requests,
	// which time out at their sender, rather than grow without bound.
	PendingMsgs int
	// Watch is how often the served configuration is compared with the
	// registered metadata (default 1s).
	Watch time.Duration
	// MaxPayload is the max payload of the worker's own connection: a
	// resolved outcome over it is previewed as the failure the worker
	// publishes instead (0: the service connection's).
	MaxPayload int64
	// JetStream, when set, lets explain find recorded outcomes in the
	// outcome store and the specs stream; without it such a request is
	// answered outcomes_unavailable.
	JetStream jetstream.JetStream
	// LookupTimeout bounds one such look-up (default 5s).
	LookupTimeout time.Duration
	// Logger (default: discard).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	o.Pipeline = o.Pipeline.WithDefaults()
	if o.Concurrency <= 0 {
		o.Concurrency = max(runtime.GOMAXPROCS(0)/2, 1)
	}
	if o.PendingMsgs <= 0 {
		o.PendingMsgs = 10_000
	}
	if o.Watch <= 0 {
		o.Watch = time.Second
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = 5 * time.Second
	}
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	return o
}

// Service is one registered instance of the micro service, re-registered
// when the configuration it serves changes.
type Service struct {
	nc   *nats.Conn
	src  SnapshotSource
	opt  Options
	log  *slog.Logger
	pool *pool

	mu     sync.Mutex
	cur    micro.Service
	key    configKey
	closed bool

	stopWatch chan struct{}
	watchDone chan struct{}

	outMu sync.Mutex
	out   *pipeline.Outcomes
}

// configKey is what the metadata says about the configuration.
type configKey struct{ source, digest, revision string }

func keyOf(snap *discover.Snapshot) configKey {
	if snap == nil {
		return configKey{revision: "none"} // nothing serves yet
	}
	c := explain.ConfigOf(snap)
	rev := "none"
	if c.Revision != nil {
		rev = strconv.FormatUint(*c.Revision, 10)
	}
	return configKey{source: c.Source, digest: c.Digest, revision: rev}
}

// Start registers the service on nc, which should be the service's own
// connection (the micro package takes over its closed and error
// handlers). Stop it with Stop.
func Start(nc *nats.Conn, src SnapshotSource, opt Options) (*Service, error) {
	opt = opt.withDefaults()
	if err := opt.Pipeline.Validate(); err != nil {
		return nil, err
	}
	if opt.MaxPayload <= 0 {
		opt.MaxPayload = nc.MaxPayload()
	}
	s := &Service{nc: nc, src: src, opt: opt, log: opt.Logger, pool: newPool(opt.Concurrency),
		stopWatch: make(chan struct{}), watchDone: make(chan struct{})}
	k := keyOf(src.Snapshot())
	svc, err := s.register(k)
	if err != nil {
		s.pool.stop()
		return nil, err
	}
	s.cur, s.key = svc, k
	go s.watch()
	return s, nil
}

// Subject is the subject of an endpoint under prefix ("" is rolecall).
func Subject(prefix, endpoint string) string {
	return cmp.Or(prefix, events.DefaultPrefix) + ".svc." + endpoint
}

// ID is the current instance's id (it changes when the configuration
// does).
func (s *Service) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Info().ID
}

// Stats are the current instance's statistics.
func (s *Service) Stats() micro.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur.Stats()
}

func (s *Service) register(k configKey) (micro.Service, error) {
	svc, err := micro.AddService(s.nc, micro.Config{
		Name:        Name,
		Version:     SemVer(s.opt.Version),
		Description: "rolecall: preview and explain decisions, rosters, the configuration served",
		QueueGroup:  QueueGroup,
		Metadata: map[string]string{
			MetaInstance: s.opt.Instance, MetaConfigSource: k.source, MetaConfigDigest: k.digest, MetaConfigRevision: k.revision,
		},
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.log.Warn("service: NATS error; requests may have been dropped", "subject", e.Subject, "error", e.Description)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("service: register: %w", err)
	}
	g := svc.AddGroup(cmp.Or(s.opt.Pipeline.Prefix, events.DefaultPrefix) + ".svc")
	for _, ep := range []struct {
		name, request, response string
		h                       micro.Handler
	}{
		{EndpointResolve, "task data or a task CloudEvent", "the outcome data the worker would publish", s.handler(s.resolve)},
		{EndpointRoster, `{"pack": NAME}`, "the pack's roster", s.handler(s.roster)},
		{EndpointExplain, "task data, a task CloudEvent, or {\"outcome_id\"} / {\"source\", \"id\"} of a recorded outcome", "the explain document (rolecall.explain.v1)", s.explainHandler()},
		{EndpointValidate, "{}", "the problems of the configuration served", s.handler(s.validate)},
		{EndpointConfig, "{}", "the configuration served", s.handler(s.config)},
	} {
		err := g.AddEndpoint(ep.name, ep.h,
			micro.WithEndpointMetadata(map[string]string{"request": ep.request, "response": ep.response}),
			micro.WithEndpointPendingLimits(s.opt.PendingMsgs, 64<<20))
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("service: endpoint %s: %w", ep.name, err)
		}
	}
	// Once the server has the subscriptions, a request finds the new
	// instance: a caller (or a test) may rely on that when Start returns.
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("service: register: %w", err)
	}
	return svc, nil
}

// watch re-registers the service when the configuration served changes:
// the micro package cannot change an instance's metadata, and a stale
// config_revision would hide exactly the fleet drift it is there to show.
// The new instance registers before the old one stops, so the queue group
// is never empty.
func (s *Service) watch() {
	defer close(s.watchDone)
	t := time.NewTicker(s.opt.Watch)
	defer t.Stop()
	for {
		select {
		case <-s.stopWatch:
			return
		case <-t.C:
			s.Refresh()
		}
	}
}

// Refresh compares the served configuration with the registered metadata
// now, re-registering if they differ (as the periodic watch does); it
// reports whether it re-registered.
func (s *Service) Refresh() bool {
	k := keyOf(s.src.Snapshot())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || k == s.key {
		return false
	}
	svc, err := s.register(k)
	if err != nil {
		s.log.Error("service: re-registering with the new configuration failed; the metadata still names the old one",
			"error", err, "config_digest", k.digest)
		return false
	}
	old := s.cur
	s.cur, s.key = svc, k
	if err := old.Stop(); err != nil {
		s.log.Warn("service: stopping the instance of the previous configuration", "error", err)
	}
	// Stop only queues the unsubscriptions; once the server has them, no
	// discovery request finds the old instance.
	_ = s.nc.FlushTimeout(5 * time.Second)
	s.log.Info("service: re-registered for the new configuration", "id", svc.Info().ID, "config_digest", k.digest, "config_revision", k.revision)
	return true
}

// Stop drains the endpoints (requests already received are answered) and
// stops the pool. It does not close the connection.
func (s *Service) Stop() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cur := s.cur
	s.mu.Unlock()
	close(s.stopWatch)
	<-s.watchDone
	err := cur.Stop()
	s.pool.stop()
	if errors.Is(err, nats.ErrConnectionClosed) {
		err = nil
	}
	return err
}

var semver = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// SemVer is the service version for a worker version: the version
// without a leading "v" when that is semver (a release, a module
// pseudo-version), else "0.0.0-dev" (a dev build). The micro package
// refuses anything else.
func SemVer(v string) string {
	v = strings.TrimPrefix(v, "v")
	if semver.MatchString(v) {
		return v
	}
	return "0.0.0-dev"
}
