package ui

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/explain"
)

// Limits of /api/decisions.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// maxFilter bounds a filter value: names and codes are short.
	maxFilter = 128
	// maxDrift bounds the drift events /api/decisions/{id} reads after
	// the decision.
	maxDrift = 200
)

// List is the body of /api/decisions.
type List struct {
	Decisions []Entry `json:"decisions"`
	// Next is the cursor of the next (older) page: pass it as cursor=.
	// "" when the stream holds nothing older, or a since= bound was
	// reached.
	Next string `json:"next"`
	// Scanned is how many sequences this page read (a deleted message
	// counts), at most Options.MaxScan: a page may hold fewer than limit
	// decisions and still have a next one.
	Scanned int `json:"scanned"`
}

type filter struct {
	role, code, model, kind string
	since                   time.Time
}

func (f filter) match(e Entry) bool {
	eq := func(want string, got *string) bool { return want == "" || got != nil && *got == want }
	return eq(f.role, e.Role) && eq(f.code, e.Code) && eq(f.model, e.Model) && (f.kind == "" || e.Kind == f.kind)
}

// list answers /api/decisions: the specs stream read backwards from the
// cursor (default: the newest message), one message at a time, until the
// page is full, the stream's start, the since bound, or MaxScan messages.
func (a *api) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := filter{role: q.Get("role"), code: q.Get("code"), model: q.Get("model"), kind: q.Get("kind")}
	if slices.ContainsFunc([]string{f.role, f.code, f.model, f.kind}, func(v string) bool { return len(v) > maxFilter }) {
		writeError(w, http.StatusBadRequest, "bad_request", "a filter value is longer than 128 bytes")
		return
	}
	if !slices.Contains([]string{"", KindResolved, KindFailed, KindDrift, KindInvalid}, f.kind) {
		writeError(w, http.StatusBadRequest, "bad_request", "kind must be resolved, failed, drift or invalid")
		return
	}
	limit := DefaultLimit
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			writeError(w, http.StatusBadRequest, "bad_request", "limit must be an integer from 1 to 1000")
			return
		}
		limit = n
	}
	var cursor uint64
	if s := q.Get("cursor"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			writeError(w, http.StatusBadRequest, "bad_request", "cursor must be a positive sequence number, as next gave it")
			return
		}
		cursor = n
	}
	if s := q.Get("since"); s != "" {
		t, err := parseSince(s, a.opt.Now())
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "since must be an RFC 3339 time or a duration such as 1h")
			return
		}
		f.since = t
	}

	ctx := r.Context()
	stream, err := a.opt.JetStream.Stream(ctx, a.opt.Config.SpecsStream)
	if err != nil {
		a.fail(w, err)
		return
	}
	st := stream.CachedInfo().State
	seq := st.LastSeq
	if cursor != 0 && cursor < seq {
		seq = cursor
	}
	out := List{Decisions: []Entry{}}
	for ; seq >= st.FirstSeq && seq > 0 && len(out.Decisions) < limit && out.Scanned < a.opt.MaxScan; seq-- {
		// A deleted sequence counts too: each is a request to the server,
		// and a long run of them must not make one page unbounded.
		out.Scanned++
		m, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted, or aged out meanwhile
		}
		if err != nil {
			a.fail(w, err)
			return
		}
		e, _ := entryOf(a.opt.Config.Prefix, m)
		if !f.since.IsZero() && e.at.Before(f.since) {
			seq = 0 // the rest is older still
			break
		}
		if f.match(e) {
			out.Decisions = append(out.Decisions, e)
		}
	}
	if seq >= st.FirstSeq && seq > 0 {
		out.Next = strconv.FormatUint(seq, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// Detail is the body of /api/decisions/{id}.
type Detail struct {
	Decision Entry `json:"decision"`
	// Data is the outcome's data as stored, decision record included.
	Data jsontext.Value `json:"data"`
	// Explain is the explain document of the recorded task against the
	// worker's current configuration; its recorded.same_config says
	// whether that is the configuration of the decision. Null when the
	// decision cannot be explained, and then ExplainError says why.
	Explain      *explain.Document `json:"explain"`
	ExplainError *explain.Error    `json:"explain_error"`
	// Drift lists the drift events about this decision among the next
	// drift events of the stream.
	Drift []Entry `json:"drift"`
}

// detail answers /api/decisions/{id}: the outcome (by seq= when the page
// gives it and it holds that id, else through the outcome store), its
// explain chain and its drift.
func (a *api) detail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	if len(id) > 256 {
		writeError(w, http.StatusBadRequest, "bad_request", "the id is longer than 256 bytes")
		return
	}
	m, err := a.find(ctx, id, r.URL.Query().Get("seq"))
	if err != nil {
		a.fail(w, err)
		return
	}
	e, so := entryOf(a.opt.Config.Prefix, m)
	if so == nil {
		a.fail(w, &explain.Error{Code: explain.CodeOutcomeInvalid, Message: "the message is not an outcome: " + deref(e.Error), Details: map[string]any{"seq": m.Sequence}})
		return
	}
	d := Detail{Decision: e, Data: so.Data, Drift: []Entry{}}
	doc, err := explain.Stored(a.opt.Snapshots.Snapshot(), so)
	var xe *explain.Error
	switch {
	case errors.As(err, &xe):
		d.ExplainError = xe
	case err != nil:
		a.fail(w, err)
		return
	default:
		d.Explain = doc
	}
	if d.Drift, err = a.drift(ctx, id, m.Sequence); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// find reads the outcome with id: at seq when given and it holds that
// outcome, else where the outcome store recorded it.
func (a *api) find(ctx context.Context, id, seqParam string) (*jetstream.RawStreamMsg, error) {
	if seq, err := strconv.ParseUint(seqParam, 10, 64); err == nil && seq > 0 {
		stream, err := a.opt.JetStream.Stream(ctx, a.opt.Config.SpecsStream)
		if err != nil {
			return nil, err
		}
		// A drift event has a message id too, and is no outcome.
		m, err := stream.GetMsg(ctx, seq)
		if err == nil && m.Header.Get("Nats-Msg-Id") == id && !strings.HasPrefix(m.Subject, a.opt.Config.Prefix+".specs.drift.") {
			return m, nil
		}
	}
	o, err := explain.Open(ctx, a.opt.JetStream, a.opt.Config)
	if err != nil {
		return nil, err
	}
	so, err := explain.Lookup(ctx, o, id)
	if err != nil {
		return nil, err
	}
	stream, err := a.opt.JetStream.Stream(ctx, a.opt.Config.SpecsStream)
	if err != nil {
		return nil, err
	}
	return stream.GetMsg(ctx, so.Seq)
}

// drift reads the drift events after seq (a drift event always follows
// its decision), at most maxDrift of them, and keeps those about id.
func (a *api) drift(ctx context.Context, id string, seq uint64) ([]Entry, error) {
	stream, err := a.opt.JetStream.Stream(ctx, a.opt.Config.SpecsStream)
	if err != nil {
		return nil, err
	}
	subject := a.opt.Config.Prefix + ".specs.drift.>"
	out := []Entry{}
	for range maxDrift {
		m, err := stream.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		seq = m.Sequence
		if e, _ := entryOf(a.opt.Config.Prefix, m); e.Drift != nil && e.Drift.DecisionID == id {
			out = append(out, e)
		}
	}
	return out, nil
}

// fail answers an error: typed explain errors with their code, others as
// an internal fault (logged, not shown).
func (a *api) fail(w http.ResponseWriter, err error) {
	var xe *explain.Error
	switch {
	case errors.As(err, &xe):
	case errors.Is(err, jetstream.ErrStreamNotFound):
		xe = &explain.Error{Code: explain.CodeOutcomesUnavailable, Message: err.Error(), Details: map[string]any{}}
	default:
		a.opt.Logger.Error("audit view", "error", err)
		writeError(w, http.StatusInternalServerError, "internal", "the specs stream could not be read; see the worker's log")
		return
	}
	status := http.StatusInternalServerError
	switch xe.Code {
	case explain.CodeOutcomeNotFound:
		status = http.StatusNotFound
	case explain.CodeOutcomesUnavailable:
		status = http.StatusServiceUnavailable
	case explain.CodeOutcomeInvalid:
		status = http.StatusUnprocessableEntity
	}
	body := errorBody(string(xe.Code), xe.Message)
	if xe.Details != nil {
		body.Error.Details = xe.Details
	}
	writeJSON(w, status, body)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
