package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EnsureRetry is Ensure for a worker starting beside a cluster: while the
// cluster cannot answer JetStream requests yet it logs and retries with
// backoff until ctx is done. A fresh 3-node cluster takes seconds to elect
// its JetStream meta leader, and until then every API request times out;
// workers started together with it (docker compose up, a Kubernetes
// rollout) would otherwise all exit. It also waits until the consumers it
// created answer lookups (see errNotVisibleYet). Any other error is
// returned at once: a configuration the server refuses does not get
// better by waiting.
func EnsureRetry(ctx context.Context, js jetstream.JetStream, c Config, log *slog.Logger) (jetstream.Consumer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	delay := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cons, err := Ensure(ctx, js, c)
		if err == nil {
			err = visible(ctx, js, c)
		}
		if err == nil || !jetStreamUnavailable(ctx, err) {
			return cons, err
		}
		log.WarnContext(ctx, "JetStream is not available yet; retrying", "attempt", attempt, "retry_in", delay.String(), "error", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// errNotVisibleYet marks a consumer that was just created but is not yet
// served: until its RAFT group has a leader, a clustered member may
// reply "consumer not found" to an info request (nats-server answers so on
// purpose, after a delay that lets a leader speak first). Worker.Run looks
// the dead-letter consumer up right after Ensure, and three workers
// starting together hit that window; seen as err_code=10014 in the
// container tests.
var errNotVisibleYet = errors.New("pipeline: consumer created but not visible yet")

// visible checks that both consumers Ensure created answer an info
// request and, when replicated, have a leader: the lookups that follow
// Ensure find them, and the first pull requests reach a leader. A pull
// request sent while a new consumer has no leader yet is lost without an
// error, and nats.go asks again only after two missed heartbeats (1 s
// with the worker's pull heartbeat; 30 s with the library's default, which
// in the container tests left one worker in three idle for a whole run
// when the workers started together).
func visible(ctx context.Context, js jetstream.JetStream, c Config) error {
	c = c.withDefaults()
	for _, lookup := range [][2]string{{c.TasksStream, c.Consumer}, {c.DeadLetter, c.Consumer + "-deadletter"}} {
		cons, err := js.Consumer(ctx, lookup[0], lookup[1])
		if err != nil {
			if errors.Is(err, jetstream.ErrConsumerNotFound) && c.CreateStreams {
				return fmt.Errorf("%w: %s on %s: %w", errNotVisibleYet, lookup[1], lookup[0], err)
			}
			return err
		}
		if cl := cons.CachedInfo().Cluster; cl != nil && cl.Leader == "" {
			return fmt.Errorf("%w: %s on %s has no leader yet", errNotVisibleYet, lookup[1], lookup[0])
		}
	}
	return nil
}

// Server error codes that mean "the cluster cannot serve this yet".
const (
	errCodeClusterNoPeers   = 10005 // not enough peers for the replicas (yet)
	errCodeClusterNotAvail  = 10008 // JetStream system temporarily unavailable
	errCodeClusterNotLeader = 10009 // no meta leader to handle the request
)

// jetStreamUnavailable reports whether err is a cluster that is still
// forming (or electing) rather than a refusal: a request that timed out
// while ctx itself is still live, or one of the cluster-unavailable codes.
func jetStreamUnavailable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, errNotVisibleYet) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case errCodeClusterNoPeers, errCodeClusterNotAvail, errCodeClusterNotLeader:
			return true
		}
	}
	return false
}
