package bundle

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
)

// RosterValue is the value of a pack's key in ROLECALL_ROSTER.
type RosterValue struct {
	Pack    string                 `json:"pack"`
	Entries []discover.RosterEntry `json:"entries"`
}

// RosterWriter writes each pack's roster to ROLECALL_ROSTER (key = pack)
// when it differs from the value there, and deletes the keys of packs that
// are gone. Several workers write the same values, so a value is compared
// before it is written: an unchanged roster costs one read.
type RosterWriter struct {
	kv  jetstream.KeyValue
	log *slog.Logger
}

// NewRosterWriter binds the roster bucket, creating it when it is missing
// and create is set.
func NewRosterWriter(ctx context.Context, js jetstream.JetStream, replicas int, create bool, log *slog.Logger) (*RosterWriter, error) {
	kv, err := bind(ctx, create, RosterBucket, js.KeyValue, js.CreateKeyValue, jetstream.KeyValueConfig{
		Bucket: RosterBucket, Description: "rolecall rosters, key = pack", History: 1,
		Replicas: max(replicas, 1), Storage: jetstream.FileStorage,
	})
	if err != nil {
		return nil, fmt.Errorf("KV %s: %w", RosterBucket, err)
	}
	return &RosterWriter{kv: kv, log: cmp.Or(log, slog.New(slog.DiscardHandler))}, nil
}

// Write brings the bucket in line with snap and reports how many keys it
// wrote or deleted. A broken pack keeps no roster.
func (w *RosterWriter) Write(ctx context.Context, snap *discover.Snapshot) (int, error) {
	n := 0
	for _, name := range slices.Sorted(maps.Keys(snap.Packs)) {
		entries, err := snap.RosterEntries(name)
		if err != nil {
			continue
		}
		val, err := json.Marshal(RosterValue{Pack: name, Entries: entries})
		if err != nil {
			return n, err
		}
		if e, err := w.kv.Get(ctx, name); err == nil && bytes.Equal(e.Value(), val) {
			continue
		}
		if _, err := w.kv.Put(ctx, name, val); err != nil {
			return n, fmt.Errorf("roster of pack %s: %w", name, err)
		}
		n++
	}
	lister, err := w.kv.ListKeys(ctx)
	if err != nil {
		return n, err
	}
	for k := range lister.Keys() {
		if _, ok := snap.Packs[k]; ok {
			if _, broken := snap.PackErrors[k]; !broken {
				continue
			}
		}
		if err := w.kv.Delete(ctx, k); err != nil {
			return n, err
		}
		n++
	}
	if n > 0 {
		w.log.Info("rosters written", "bucket", RosterBucket, "keys", n, "revision", snap.Revision, "config_digest", snap.Digest)
	}
	return n, nil
}
