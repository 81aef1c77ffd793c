package replay

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/internal/coded"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// Code is a stable code of a replay error.
type Code string

const (
	// CodeOutcomesUnavailable: the specs stream does not exist, or
	// JetStream is off.
	CodeOutcomesUnavailable Code = "outcomes_unavailable"
	// CodeConfigUnavailable: no configuration to replay a decision
	// against (no --root, and its bundle revision cannot be loaded).
	CodeConfigUnavailable Code = "config_unavailable"
	// CodeFilterInvalid: --filter is not a subject of the specs stream.
	CodeFilterInvalid Code = "filter_invalid"
)

// Error is a typed replay failure (coded.Error with this package's
// codes). Match it with errors.As, or compare codes with errors.Is against
// another *Error carrying only a Code.
type Error = coded.Error[Code]

func fail(code Code, details map[string]any, format string, args ...any) *Error {
	return coded.New(code, details, format, args...)
}

// RevisionLoader loads the configuration snapshot of a bundle revision.
// It is the seam for bundles: the bundle package provides one.
type RevisionLoader func(ctx context.Context, revision uint64) (*discover.Snapshot, error)

// HandleFunc decides one task; pipeline.Handle by default. Tests inject
// others (a non-deterministic one must make replay fail).
type HandleFunc func(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef) pipeline.Outcome

func defaultHandle(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef) pipeline.Outcome {
	return pipeline.Handle(snap, task, ref, nil)
}

// Options say what to replay and against what.
type Options struct {
	// Config names the prefix and the specs stream.
	Config pipeline.Config
	// Filter is a subject filter inside the specs stream ("" = every
	// outcome: <prefix>.specs.>).
	Filter string
	// Since replays outcomes stored at or after it (zero: all).
	Since time.Time
	// Limit stops after this many outcomes (0: no limit).
	Limit int
	// Snapshot is the configuration to replay against (--root).
	// Revisions, when set, loads the bundle revision a decision cites
	// instead (bundle.Store.LoadRevision); a decision made from files is
	// still replayed against Snapshot.
	Snapshot  *discover.Snapshot
	Revisions RevisionLoader
	// Handle decides; nil is pipeline.Handle.
	Handle HandleFunc
}

// Status is what replay found for one decision.
type Status string

const (
	// StatusEqual: the same decision (byte-equal when the configuration
	// is the recorded one).
	StatusEqual Status = "equal"
	// StatusChanged: another configuration would decide differently.
	StatusChanged Status = "changed"
	// StatusNondeterministic: the recorded configuration decided
	// differently now: a determinism bug.
	StatusNondeterministic Status = "nondeterministic"
	// StatusSkipped: the outcome records no decision to re-make.
	StatusSkipped Status = "skipped"
	// StatusInvalid: the stored message is not a readable outcome, or its
	// decision record does not decode.
	StatusInvalid Status = "invalid"
)

// Result is one replayed outcome.
type Result struct {
	OutcomeID string `json:"outcome_id"`
	Seq       uint64 `json:"seq"`
	TaskID    string `json:"task_id"`
	Role      string `json:"role"`
	Status    Status `json:"status"`
	// SameConfig is true when replayed against the recorded configuration.
	SameConfig bool `json:"same_config"`
	// Reason says why an outcome was skipped or is invalid.
	Reason string `json:"reason,omitzero"`
	// Changes are the fields that differ, in the order of the precedence
	// table ([] when none).
	Changes []Change `json:"changes"`
	// Was and Now are the outcomes' kinds: "resolved" or the failure code.
	Was string `json:"was,omitzero"`
	Now string `json:"now,omitzero"`
}

// Change is one field that differs.
type Change struct {
	Field  string         `json:"field"`
	Before jsontext.Value `json:"before"`
	After  jsontext.Value `json:"after"`
	// Origin is where the new value is written (file:line), "" when no
	// file holds it.
	Origin string `json:"origin,omitzero"`
}

// Summary counts the results.
type Summary struct {
	Replayed         int `json:"replayed"`
	Equal            int `json:"equal"`
	Changed          int `json:"changed"`
	Nondeterministic int `json:"nondeterministic"`
	Skipped          int `json:"skipped"`
	Invalid          int `json:"invalid"`
	// ByField counts changed (or nondeterministic) decisions per field;
	// ByCode counts them per transition, "resolved → role_inactive".
	ByField map[string]int `json:"by_field"`
	ByCode  map[string]int `json:"by_code"`
}

func (s *Summary) add(r Result) {
	s.Replayed++
	switch r.Status {
	case StatusEqual:
		s.Equal++
	case StatusChanged:
		s.Changed++
	case StatusNondeterministic:
		s.Nondeterministic++
	case StatusSkipped:
		s.Skipped++
	case StatusInvalid:
		s.Invalid++
	}
	if r.Status == StatusChanged || r.Status == StatusNondeterministic {
		for _, c := range r.Changes {
			s.ByField[c.Field]++
		}
		s.ByCode[r.Was+" → "+r.Now]++
	}
}

// Run replays the outcomes the options select, oldest first, calling
// each with every result, and returns the summary. A stream that is gone
// is an outcomes_unavailable *Error; a decision without a configuration
// is config_unavailable. A message that is no outcome is a result with
// StatusInvalid, not an error: the rest still replays.
func Run(ctx context.Context, js jetstream.JetStream, opt Options, each func(Result)) (Summary, error) {
	sum := Summary{ByField: map[string]int{}, ByCode: map[string]int{}}
	cfg := opt.Config.WithDefaults()
	all := cfg.Prefix + ".specs.>"
	filter := cmp.Or(opt.Filter, all)
	if !strings.HasPrefix(filter, cfg.Prefix+".specs.") {
		return sum, fail(CodeFilterInvalid, map[string]any{"filter": filter}, "filter %q is not a subject of stream %s (%s)", filter, cfg.SpecsStream, all)
	}
	// The client passes an empty token over, and the server does not
	// answer the consumer request it makes.
	if slices.Contains(strings.Split(filter, "."), "") {
		return sum, fail(CodeFilterInvalid, map[string]any{"filter": filter}, "filter %q has an empty token", filter)
	}
	stream, err := js.Stream(ctx, cfg.SpecsStream)
	if err != nil {
		return sum, unavailable(err)
	}
	// A consumer whose filter the stream's subjects cannot match is
	// accepted and reads nothing: with another fleet's prefix, replay
	// would pass a gate having replayed no decision.
	if subjects := stream.CachedInfo().Config.Subjects; !slices.ContainsFunc(subjects, func(s string) bool { return server.SubjectsCollide(s, filter) }) {
		return sum, fail(CodeFilterInvalid, map[string]any{"filter": filter, "subjects": subjects},
			"filter %q matches no subject of stream %s (%s): is the subject prefix the fleet's?", filter, cfg.SpecsStream, strings.Join(subjects, ", "))
	}
	// Replay ends at the outcome stored last when it began: a fleet that
	// keeps deciding does not keep it running.
	last := stream.CachedInfo().State.LastSeq
	occ := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}}
	if !opt.Since.IsZero() {
		occ.DeliverPolicy, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, &opt.Since
	}
	cons, err := stream.OrderedConsumer(ctx, occ)
	if err != nil {
		if errors.Is(err, jetstream.ErrInvalidSubject) || errors.Is(err, jetstream.ErrBadRequest) {
			return sum, fail(CodeFilterInvalid, map[string]any{"filter": filter}, "filter %q: %v", filter, err)
		}
		return sum, unavailable(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return sum, unavailable(err)
	}
	pending := info.NumPending
	if last == 0 {
		pending = 0
	}
	drift := cfg.Prefix + ".specs.drift."
	snaps := map[uint64]*discover.Snapshot{}
	for pending > 0 && (opt.Limit <= 0 || sum.Replayed < opt.Limit) {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return sum, unavailable(err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return sum, err
		}
		pending = md.NumPending
		if md.Sequence.Stream >= last {
			pending = 0
		}
		if strings.HasPrefix(msg.Subject(), drift) {
			continue // drift events are about decisions, not decisions
		}
		so, perr := explain.ParseOutcome(md.Sequence.Stream, msg.Subject(), msg.Headers(), msg.Data())
		var r Result
		if perr != nil {
			r = Result{OutcomeID: msg.Headers().Get("Nats-Msg-Id"), Seq: md.Sequence.Stream, Status: StatusInvalid, Reason: perr.Error(), Changes: []Change{}}
		} else {
			snap, err := opt.snapshot(ctx, so, snaps)
			if err != nil {
				return sum, err
			}
			r = One(snap, so, opt.Handle)
		}
		sum.add(r)
		if each != nil {
			each(r)
		}
	}
	return sum, nil
}

// snapshot is the configuration so is replayed against.
func (opt Options) snapshot(ctx context.Context, so *explain.StoredOutcome, cache map[uint64]*discover.Snapshot) (*discover.Snapshot, error) {
	d := so.Decision
	// One skips what has no record; Snapshot serves a decision that cites
	// no bundle revision, or any decision when revisions cannot be loaded.
	if d == nil || opt.Snapshot != nil && (opt.Revisions == nil || d.Config.Revision == nil) {
		return opt.Snapshot, nil
	}
	if d.Config.Revision == nil {
		return nil, fail(CodeConfigUnavailable, map[string]any{"outcome_id": so.ID}, "outcome %s was decided from files (digest %s): give the config root with --root", so.ID, d.Config.Digest)
	}
	rev := *d.Config.Revision
	if opt.Revisions == nil {
		return nil, fail(CodeConfigUnavailable, map[string]any{"outcome_id": so.ID, "revision": rev}, "outcome %s cites bundle revision %d, and this worker cannot load bundles: give the config root with --root", so.ID, rev)
	}
	if s, ok := cache[rev]; ok {
		return s, nil
	}
	s, err := opt.Revisions(ctx, rev)
	if err != nil {
		return nil, fail(CodeConfigUnavailable, map[string]any{"outcome_id": so.ID, "revision": rev}, "bundle revision %d: %v", rev, err)
	}
	cache[rev] = s
	return s, nil
}

// One replays one stored outcome against snap (see the package comment).
// handle nil is pipeline.Handle.
func One(snap *discover.Snapshot, so *explain.StoredOutcome, handle HandleFunc) Result {
	if handle == nil {
		handle = defaultHandle
	}
	r := Result{OutcomeID: so.ID, Seq: so.Seq, TaskID: so.TaskID, Changes: []Change{}, Was: kindOf(so.Resolved, so.Failure)}
	skip := func(why string) Result {
		r.Status, r.Reason = StatusSkipped, why
		return r
	}
	d, f := so.Decision, so.Failure
	noTask := d != nil && (len(d.Task) == 0 || d.Task.Kind() == 'n')
	switch {
	case d == nil:
		return skip("the outcome carries no decision record")
	case f != nil && f.Code == resolve.CodeDeliveryExhausted:
		return skip("delivery_exhausted: no decision was made")
	case f != nil && f.Details["reason"] == "outcome_too_large":
		return skip("outcome_too_large: the record holds the extra prompt's digest, not the prompt")
	case noTask && f != nil && f.Stage != resolve.StageDecode:
		// The task decoded; the failure would have been over the message
		// size limit with it, so the worker left it out.
		return skip("no task was recorded: the outcome would have been too large to publish with it")
	case noTask:
		return skip("the task event could not be decoded: no task was recorded")
	case snap == nil:
		return skip("no configuration")
	}
	task, ref, err := events.DecodeTaskData(d.Task, events.DecodeOptions{})
	if err != nil {
		r.Status, r.Reason = StatusInvalid, "the recorded task does not decode: "+err.Error()
		return r
	}
	r.Role = task.Role
	r.SameConfig = d.Config.Digest == snap.Digest
	out := handle(snap, task, ref)
	r.Now = kindOf(out.Resolved, out.Failure)
	now, err := encodeLike(so, d, task, out)
	if err != nil {
		r.Status, r.Reason = StatusInvalid, err.Error()
		return r
	}
	switch {
	case r.SameConfig && bytes.Equal(now, so.Data):
		r.Status = StatusEqual
	case r.SameConfig:
		r.Status, r.Changes = StatusNondeterministic, diffJSON(so.Data, now)
	default:
		r.Status, r.Changes = StatusChanged, semanticDiff(snap, task, ref, so, out)
		if len(r.Changes) == 0 {
			r.Status = StatusEqual
		}
	}
	return r
}

// encodeLike encodes out's data as the recording worker did
// (pipeline.EncodeOutcome): the same outcome id and worker version, and
// the recorded configuration's source and revision (they say where a
// configuration came from, not what it is), read back the way the
// recorded data was read.
func encodeLike(so *explain.StoredOutcome, rec *events.Decision, task events.Task, out pipeline.Outcome) ([]byte, error) {
	if dec := out.Decision(); dec != nil {
		dec.Config.Source, dec.Config.Revision = rec.Config.Source, rec.Config.Revision
	}
	meta := events.OutcomeMeta{ID: so.ID, WorkerVersion: rec.WorkerVersion}
	m, err := pipeline.EncodeOutcome(pipeline.Config{}, meta, task, &out, 0)
	if err != nil {
		return nil, fmt.Errorf("encode the new outcome: %w", err)
	}
	ev, err := events.DecodeOutcome(m.Header, m.Data)
	if err != nil {
		return nil, fmt.Errorf("read the new outcome: %w", err)
	}
	return ev.DataEncoded, nil
}

func kindOf(r *events.ResolvedData, f *events.FailureData) string {
	if f != nil {
		return string(f.Code)
	}
	if r != nil {
		return explain.OutcomeResolved
	}
	return ""
}

// semanticDiff lists what a decision would change: for two resolved
// outcomes, each field of the explain document whose value or source
// differs, with the new value's origin; for a failure, the outcome kind,
// code and message. Provenance (digests, the decision record) is not a
// change of the decision.
func semanticDiff(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef, so *explain.StoredOutcome, out pipeline.Outcome) []Change {
	changes := []Change{}
	if so.Resolved != nil && out.Resolved != nil {
		was, now := explain.OutcomeFields(so.Resolved), explain.OutcomeFields(out.Resolved)
		var origins map[string]string
		for _, f := range explain.Changed(so.Resolved, out.Resolved) {
			if origins == nil {
				origins = fieldOrigins(snap, task, ref)
			}
			changes = append(changes, Change{Field: f, Before: marshal(was[f].Value), After: marshal(now[f].Value), Origin: origins[f]})
		}
		return append(changes, otherMembers(so.Data, out.Resolved, changes)...)
	}
	if so.Failure != nil && out.Failure != nil {
		if so.Failure.Code != out.Failure.Code {
			changes = append(changes, Change{Field: "code", Before: marshal(so.Failure.Code), After: marshal(out.Failure.Code)})
		}
		if so.Failure.Message != out.Failure.Message {
			changes = append(changes, Change{Field: "message", Before: marshal(so.Failure.Message), After: marshal(out.Failure.Message)})
		}
		return changes
	}
	return append(changes, Change{Field: "outcome", Before: marshal(kindOf(so.Resolved, so.Failure)), After: marshal(kindOf(out.Resolved, out.Failure))})
}

// outcomeMembers are the members of resolved data that the explain fields
// do not cover and that an agent receives: what they say changes with
// the configuration (a preamble edit changes system_message alone). A
// skill whose files changed keeps its name but not its digest.
var outcomeMembers = []string{"model_tier", "prompt_disposition", "prompt_overlays", "system_message",
	"grant_role_emissions", "emits", "resume_on_timeout", "skills", "diagnostics"}

// otherMembers compares outcomeMembers of the recorded data with the new
// outcome's, leaving out fields already reported.
func otherMembers(recorded jsontext.Value, now *events.ResolvedData, seen []Change) []Change {
	b, err := events.MarshalData(now)
	if err != nil {
		return nil
	}
	var was, is map[string]jsontext.Value
	if json.Unmarshal(recorded, &was) != nil || json.Unmarshal(b, &is) != nil {
		return nil
	}
	var out []Change
	for _, k := range outcomeMembers {
		if slices.ContainsFunc(seen, func(c Change) bool { return c.Field == k }) || bytes.Equal(was[k], is[k]) {
			continue
		}
		out = append(out, Change{Field: k, Before: orNull(was[k]), After: orNull(is[k])})
	}
	return out
}

// fieldOrigins reads where each field's winner is written from the
// explain document of the same task (one more run, only for decisions
// that change).
func fieldOrigins(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef) map[string]string {
	doc, _ := explain.Task(snap, task, ref)
	m := make(map[string]string, len(doc.Fields))
	for _, f := range doc.Fields {
		if f.Origin != nil {
			m[f.Field] = f.Origin.String()
		}
	}
	return m
}

// diffJSON lists the top-level members of two outcome data documents that
// differ (the decision record's members as decision.<name>).
func diffJSON(was, now []byte) []Change {
	var a, b map[string]jsontext.Value
	if json.Unmarshal(was, &a) != nil || json.Unmarshal(now, &b) != nil {
		return []Change{{Field: "data", Before: was, After: now}}
	}
	changes := []Change{}
	for _, k := range unionKeys(a, b) {
		if k == "decision" {
			var da, db map[string]jsontext.Value
			_ = json.Unmarshal(a[k], &da)
			_ = json.Unmarshal(b[k], &db)
			for _, dk := range unionKeys(da, db) {
				if !bytes.Equal(da[dk], db[dk]) {
					changes = append(changes, Change{Field: "decision." + dk, Before: orNull(da[dk]), After: orNull(db[dk])})
				}
			}
			continue
		}
		if !bytes.Equal(a[k], b[k]) {
			changes = append(changes, Change{Field: k, Before: orNull(a[k]), After: orNull(b[k])})
		}
	}
	return changes
}

func unionKeys(a, b map[string]jsontext.Value) []string {
	keys := slices.AppendSeq(slices.Collect(maps.Keys(a)), maps.Keys(b))
	slices.Sort(keys)
	return slices.Compact(keys)
}

func orNull(v jsontext.Value) jsontext.Value {
	if v == nil {
		return jsontext.Value("null")
	}
	return v
}

func marshal(v any) jsontext.Value {
	b, err := events.MarshalData(v)
	if err != nil {
		return jsontext.Value("null")
	}
	return b
}

// unavailable types the errors that mean the stream is gone.
func unavailable(err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fail(CodeOutcomesUnavailable, nil, "%v", err)
	}
	return err
}
