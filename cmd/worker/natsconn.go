package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
)

// natsFlags are the connection settings of every command that talks to
// NATS. Flags beat ROLECALL_* variables, which beat rolecall.yaml.
type natsFlags struct {
	NATS     string `name:"nats" help:"NATS server URL(s), comma-separated. Empty: run starts an embedded server; other commands use nats://127.0.0.1:4222." env:"ROLECALL_NATS_URL"`
	Creds    string `help:"NATS credentials file (JWT + nkey seed)." env:"ROLECALL_NATS_CREDS" type:"path"`
	NKey     string `name:"nkey" help:"NATS nkey seed file." env:"ROLECALL_NATS_NKEY" type:"path"`
	User     string `help:"NATS user name." env:"ROLECALL_NATS_USER"`
	Password string `help:"NATS password (prefer ROLECALL_NATS_PASSWORD to a flag)." env:"ROLECALL_NATS_PASSWORD"`
	TLSCA    string `name:"tls-ca" help:"CA certificate file for the NATS server." env:"ROLECALL_NATS_TLS_CA" type:"path"`
	TLSCert  string `name:"tls-cert" help:"Client certificate file." env:"ROLECALL_NATS_TLS_CERT" type:"path"`
	TLSKey   string `name:"tls-key" help:"Client key file." env:"ROLECALL_NATS_TLS_KEY" type:"path"`
	Prefix   string `help:"Subject prefix (default rolecall)." env:"ROLECALL_SUBJECT_PREFIX"`
	// Every reply (PubAcks, API responses, pulled tasks) arrives on an
	// inbox; a prefix of its own lets the server's permissions allow the
	// worker to subscribe to <prefix>.> instead of every client's _INBOX.>.
	InboxPrefix string `name:"inbox-prefix" help:"Prefix of reply subjects (default _INBOX); grant subscribe on <prefix>.> only." env:"ROLECALL_NATS_INBOX_PREFIX"`
}

// withConfig fills settings the flags and variables left empty from the
// nats: block of rolecall.yaml.
func (f natsFlags) withConfig(c discover.NATSConfig) natsFlags {
	f.NATS = cmp.Or(f.NATS, c.URL)
	f.Creds = cmp.Or(f.Creds, c.Creds)
	f.NKey = cmp.Or(f.NKey, c.NKey)
	f.User = cmp.Or(f.User, c.User)
	f.Password = cmp.Or(f.Password, c.Password)
	f.TLSCA = cmp.Or(f.TLSCA, c.TLS.CA)
	f.TLSCert = cmp.Or(f.TLSCert, c.TLS.Cert)
	f.TLSKey = cmp.Or(f.TLSKey, c.TLS.Key)
	f.Prefix = cmp.Or(f.Prefix, c.SubjectPrefix)
	return f
}

func (f natsFlags) prefix() string { return cmp.Or(f.Prefix, "rolecall") }

// check refuses a password without a user, which connect would ignore
// without a word: it goes with --user (or a nats.user) only, and a URL
// with user info brings its own.
func (f natsFlags) check() error {
	if f.Password != "" && f.User == "" && !strings.Contains(f.NATS, "@") {
		return usageErr("--password (or ROLECALL_NATS_PASSWORD, nats.password) needs a user: give --user (or ROLECALL_NATS_USER, nats.user)")
	}
	return nil
}

// connect dials NATS and reconnects forever with jittered backoff: a worker
// must outlive a broker restart without a supervisor restarting it. extra
// options come last, so they override these.
func (f natsFlags) connect(name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("nats reconnected", "server", nc.ConnectedUrlRedacted()) }),
		nats.ErrorHandler(asyncErrors(log, nil)),
	}
	if f.Creds != "" {
		opts = append(opts, nats.UserCredentials(f.Creds))
	}
	if f.NKey != "" {
		o, err := nats.NkeyOptionFromSeed(f.NKey)
		if err != nil {
			return nil, fmt.Errorf("nkey seed %s: %w", f.NKey, err)
		}
		opts = append(opts, o)
	}
	if f.User != "" {
		opts = append(opts, nats.UserInfo(f.User, f.Password))
	}
	if f.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(f.InboxPrefix))
	}
	if f.TLSCA != "" {
		opts = append(opts, nats.RootCAs(f.TLSCA))
	}
	if f.TLSCert != "" || f.TLSKey != "" {
		opts = append(opts, nats.ClientCert(f.TLSCert, f.TLSKey))
	}
	opts = append(opts, extra...)
	urls := strings.Join(strings.Fields(strings.ReplaceAll(cmp.Or(f.NATS, nats.DefaultURL), ",", " ")), ",")
	nc, err := nats.Connect(urls, opts...)
	if err != nil {
		// The URL may carry credentials; never echo it unredacted. A URL
		// that does not parse is named by its fault alone.
		var ue *url.Error
		if errors.As(err, &ue) {
			return nil, fmt.Errorf("connect to NATS: malformed server URL: %w", ue.Err)
		}
		if errors.Is(err, nats.ErrNoServers) {
			return nil, fmt.Errorf("connect to NATS: %w (is a server running there? worker run starts an embedded one when given no URL; --nats or ROLECALL_NATS_URL names another)", err)
		}
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return nc, nil
}

// connectJS is connect, then a JetStream context on the connection; the
// connection is closed again when that fails.
func (f natsFlags) connectJS(name string, log *slog.Logger, extra ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := f.connect(name, log, extra...)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// noJetStream says what a JetStream request that no one answered means.
// runContext applies it to every command's error.
func noJetStream(err error) error {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("%w (is JetStream enabled on the server, for this account?)", err)
	}
	return err
}

// slowConsumerEvery is how often at most a slow consumer is logged.
const slowConsumerEvery = 10 * time.Second

// asyncErrors is the connection's handler of asynchronous errors. A slow
// consumer (a subscription whose buffer overflowed, so the client dropped
// messages) is reported by the client each time it happens, thousands of
// times a second under load: each report is counted (count may be nil)
// and logged at most once per slowConsumerEvery, with how many were left
// out. Other errors are rare and logged each time.
func asyncErrors(log *slog.Logger, count func(context.Context)) nats.ErrHandler {
	return asyncErrorsAt(log, count, time.Now)
}

// asyncErrorsAt is asyncErrors on the clock now.
func asyncErrorsAt(log *slog.Logger, count func(context.Context), now func() time.Time) nats.ErrHandler {
	t := &throttle{every: slowConsumerEvery, now: now}
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		if !errors.Is(err, nats.ErrSlowConsumer) {
			log.Warn("nats async error", "error", err)
			return
		}
		if count != nil {
			count(context.Background())
		}
		suppressed, ok := t.allow()
		if !ok {
			return
		}
		attrs := []any{"error", err.Error()}
		if sub != nil {
			attrs = append(attrs, "subject", sub.Subject)
		}
		if suppressed > 0 {
			attrs = append(attrs, "suppressed", suppressed)
		}
		log.Warn("nats slow consumer: the client dropped messages it could not hand over in time; "+
			"unacknowledged tasks are redelivered after ack_wait (rolecall.nats.slow_consumers counts every report)", attrs...)
	}
}

// throttle lets one event through per interval and counts the others.
type throttle struct {
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow says whether this event may be logged, and how many were held
// back since the last one that was.
func (t *throttle) allow() (suppressed int, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if !t.last.IsZero() && now.Sub(t.last) < t.every {
		t.suppressed++
		return 0, false
	}
	suppressed, t.last, t.suppressed = t.suppressed, now, 0
	return suppressed, true
}
