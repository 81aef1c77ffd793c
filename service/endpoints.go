package service

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/explain"
	"github.com/rolecall/rolecall/pipeline"
	"github.com/rolecall/rolecall/resolve"
)

// reply is an endpoint's answer: a body, or a typed failure.
type reply struct {
	body    []byte
	headers micro.Headers
	// status is 0 for success, else the Nats-Service-Error-Code; code is
	// the rolecall code (Nats-Service-Error).
	status int
	code   string
}

// handler serves each request with h.
func (s *Service) handler(h func(micro.Request, *discover.Snapshot) *reply) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) { s.serve(req, h) })
}

// explainHandler is handler for explain, except that a recorded outcome
// is looked up first, on the endpoint's own goroutine: the look-up waits
// on the broker (up to LookupTimeout), and a pool goroutine held by it
// would hold up every endpoint. Only the explaining runs on the pool.
func (s *Service) explainHandler() micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		if !IsRecordedRequest(nats.Header(req.Headers()), req.Data()) {
			s.serve(req, s.explain)
			return
		}
		var so *explain.StoredOutcome
		failed := s.recovered("looking an outcome up", nil, func() (r *reply) {
			so, r = s.lookupRecorded(req)
			return r
		})
		s.serve(req, func(_ micro.Request, snap *discover.Snapshot) *reply {
			if failed != nil {
				return failed
			}
			doc, err := explain.Stored(snap, so)
			if err != nil {
				return explainError(err, headersOf(snap, so.ID))
			}
			return jsonReply(doc, headersOf(snap, so.ID))
		})
	})
}

// serve hands req to the pool and waits for the pool to have answered it
// with h, so that the micro package, which reads the answer's error when
// the handler returns, counts it.
func (s *Service) serve(req micro.Request, h func(micro.Request, *discover.Snapshot) *reply) {
	s.pool.do(func() {
		r := s.recovered("answering a request", []any{"subject", req.Subject()}, func() *reply {
			snap := s.src.Snapshot()
			if snap == nil {
				return s.noConfig()
			}
			return h(req, snap)
		})
		if r.status == 0 && len(r.body) > s.maxBody(r.headers) {
			r = errorReply(&Error{Code: CodeResponseTooLarge, Status: StatusBadRequest,
				Details: map[string]any{"bytes": len(r.body), "max_payload": s.nc.MaxPayload()},
				Message: fmt.Sprintf("the answer is %d bytes, over the connection's max payload of %d", len(r.body), s.nc.MaxPayload())}, r.headers)
		}
		var err error
		if r.status != 0 {
			err = req.Error(strconv.Itoa(r.status), r.code, r.body, micro.WithHeaders(r.headers))
		} else {
			err = req.Respond(r.body, micro.WithHeaders(r.headers))
		}
		if err != nil {
			s.log.Warn("service: reply failed", "subject", req.Subject(), "error", err)
		}
	})
}

// noConfig answers a request that arrives before any configuration
// serves: a 503, with why the source has none when it says.
func (s *Service) noConfig() *reply {
	e := &Error{Code: CodeNoConfig, Status: StatusUnavailable, Details: map[string]any{},
		Message: "no configuration is in service yet; another instance may answer a retry"}
	if re, ok := s.src.(reloadErrer); ok {
		if err := re.Err(); err != nil {
			e.Details["reload_error"] = err.Error()
		}
	}
	return errorReply(e, nil)
}

// recovered is f's reply. A bug must not take the worker down with it: if
// f panics, the requester gets a 500 and the log the stack.
func (s *Service) recovered(what string, attrs []any, f func() *reply) (r *reply) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("service: panic while "+what, append(attrs, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))...)
			r = errorReply(internal("the request could not be answered (a bug; the worker's log has the stack)"), nil)
		}
	}()
	return f()
}

// maxBody is the largest body that fits one message with headers h
// (headers estimated generously; the server enforces the exact limit).
func (s *Service) maxBody(h micro.Headers) int {
	size := 256
	for k, vs := range h {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	return int(s.nc.MaxPayload()) - size
}

// jsonHeaders is a new map for each reply: a reply's message keeps the
// map it is given.
func jsonHeaders() micro.Headers { return micro.Headers{"Content-Type": {"application/json"}} }

func jsonReply(v any, h micro.Headers) *reply {
	b, err := events.MarshalData(v)
	if err != nil {
		return errorReply(internal("encode the answer: %v", err), h)
	}
	if h == nil {
		h = jsonHeaders()
	}
	return &reply{body: b, headers: h}
}

// errorReply answers a service error with its JSON.
func errorReply(e *Error, h micro.Headers) *reply {
	if h == nil {
		h = jsonHeaders()
	}
	b, err := events.MarshalData(e)
	if err != nil {
		b = []byte(`{"code":"internal","subject":null,"details":{},"message":"encode the error"}`)
	}
	return &reply{body: b, headers: h, status: e.Status, code: string(e.Code)}
}

// failureReply answers a task's typed failure with its failure JSON.
func failureReply(f *events.FailureData, body []byte, h micro.Headers) *reply {
	if body == nil {
		var err error
		if body, err = events.MarshalData(f); err != nil {
			return errorReply(internal("encode the failure: %v", err), h)
		}
	}
	return &reply{body: body, headers: h, status: StatusBadRequest, code: string(f.Code)}
}

// decodeTask decodes a resolve or explain request as the worker would,
// and makes the headers of its reply.
func (s *Service) decodeTask(req micro.Request, snap *discover.Snapshot) (TaskRequest, micro.Headers) {
	tr := DecodeTaskRequest(nats.Header(req.Headers()), req.Data(), events.DecodeOptions{MaxDataBytes: s.opt.Pipeline.MaxDataBytes})
	return tr, headersOf(snap, tr.OutcomeID)
}

func headersOf(snap *discover.Snapshot, outcomeID string) micro.Headers {
	return micro.Headers{
		"Content-Type":     {"application/json"},
		HeaderOutcomeID:    {outcomeID},
		HeaderConfigDigest: {snap.Digest},
	}
}

// resolve answers with the outcome data the worker would publish for the
// task: the worker's decode, pipeline.Handle and events encoder, with the
// data member cut out of the encoded event, so nothing can differ.
func (s *Service) resolve(req micro.Request, snap *discover.Snapshot) *reply {
	tr, h := s.decodeTask(req, snap)
	out := Preview(snap, tr)
	subject, data, err := EncodeOutcome(s.opt.Pipeline, s.opt.Version, tr, &out, s.opt.MaxPayload)
	if err != nil {
		return errorReply(internal("encode the outcome: %v", err), h)
	}
	h[HeaderOutcomeSubject] = []string{subject}
	if out.Failure != nil {
		return failureReply(out.Failure, data, h)
	}
	return &reply{body: data, headers: h}
}

// taskFailed answers a task's failure with the failure data the worker
// would publish for it, encoded as resolve encodes it (the decision's id
// and worker version included).
func (s *Service) taskFailed(tr TaskRequest, f *events.FailureData, h micro.Headers) *reply {
	out := pipeline.Outcome{Failure: f}
	_, data, err := EncodeOutcome(s.opt.Pipeline, s.opt.Version, tr, &out, s.opt.MaxPayload)
	if err != nil {
		return errorReply(internal("encode the failure: %v", err), h)
	}
	return failureReply(f, data, h)
}

// Preview is the outcome the worker would reach for a decoded request:
// the decode failure, or pipeline.Handle's outcome.
func Preview(snap *discover.Snapshot, tr TaskRequest) pipeline.Outcome {
	if tr.Err != nil {
		out := pipeline.DecodeFailed(snap, &tr.Incoming.Task.TaskID, tr.Err)
		out.SnapshotDigest = snap.Digest
		return out
	}
	return pipeline.Handle(snap, tr.Incoming.Task, tr.Incoming.Ref, nil)
}

// EncodeOutcome encodes out as the worker's runner does (the same events
// encoder, outcome id, fleet source, data schema base and, in the decision
// record, the worker's version) and returns the subject it would be
// published on and its data member. Like the runner, resolved data that
// cannot be encoded becomes a materialize_failed failure, and so does a
// resolved outcome over maxPayload (the worker's connection's max payload;
// 0: no limit) with the runner's details (reason outcome_too_large).
func EncodeOutcome(cfg pipeline.Config, version string, tr TaskRequest, out *pipeline.Outcome, maxPayload int64) (subject string, data []byte, err error) {
	// The time is not part of the data; it only makes the size the
	// too-large check sees the size of the worker's event (which may also
	// carry a trace context: its bytes can differ by that much).
	meta := events.OutcomeMeta{ID: tr.OutcomeID, Source: cfg.FleetSource, TaskID: tr.Incoming.Task.TaskID,
		CausationID: tr.Incoming.ID, DataSchemaBase: cfg.DataSchemaBase, Time: time.Now(), WorkerVersion: version}
	m, err := pipeline.EncodeOutcome(cfg, meta, tr.Incoming.Task, out, maxPayload)
	if err != nil {
		return "", nil, err
	}
	data, err = dataMember(m.Data)
	return m.Subject, data, err
}

// dataMember is the data member of a structured event, as encoded.
func dataMember(body []byte) ([]byte, error) {
	var ev struct {
		Data jsontext.Value `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, err
	}
	if len(ev.Data) == 0 {
		return nil, errors.New("the encoded event has no data")
	}
	return bytes.Clone(ev.Data), nil
}

// explain answers with the explain document of the worker's own run
// (explain.Task runs pipeline.HandleExplained); a failing task is
// answered with its failure.
func (s *Service) explain(req micro.Request, snap *discover.Snapshot) *reply {
	tr, h := s.decodeTask(req, snap)
	if tr.Err != nil {
		return s.taskFailed(tr, Preview(snap, tr).Failure, h)
	}
	doc, _ := explain.Task(snap, tr.Incoming.Task, tr.Incoming.Ref)
	if doc.Failure != nil {
		return s.taskFailed(tr, doc.Failure, h)
	}
	return jsonReply(doc, h)
}

// RosterReply is the roster endpoint's answer.
type RosterReply struct {
	// Pack is the pack listed (the default pack when none was asked).
	Pack   string                 `json:"pack"`
	Config events.DecisionConfig  `json:"config"`
	Roster []discover.RosterEntry `json:"roster"`
}

func (s *Service) roster(req micro.Request, snap *discover.Snapshot) *reply {
	r, err := DecodeRoster(req.Data())
	if err != nil {
		return requestError(err)
	}
	entries, err := snap.RosterEntries(r.Pack)
	if err != nil {
		return failureReply(pipeline.FailureFrom(nil, resolve.StageDiscover, err), nil, jsonHeaders())
	}
	pack := cmp.Or(r.Pack, snap.Config.DefaultPack, discover.DefaultPack)
	return jsonReply(RosterReply{Pack: pack, Config: explain.ConfigOf(snap), Roster: entries}, nil)
}

// Problem is one problem of the configuration, as `worker validate
// --json`, /readyz and the validate endpoint show it.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitzero"`
	Code    string `json:"code"`
	Key     string `json:"key,omitzero"`
	Subject string `json:"subject,omitzero"`
	Message string `json:"message"`
}

// ValidateReply is the validate endpoint's answer: ok is false when the
// configuration served has problems (tasks that depend on them fail;
// every other task works).
type ValidateReply struct {
	OK       bool                  `json:"ok"`
	Config   events.DecisionConfig `json:"config"`
	Problems []Problem             `json:"problems"`
}

func (s *Service) validate(req micro.Request, snap *discover.Snapshot) *reply {
	if err := DecodeEmpty(req.Data()); err != nil {
		return requestError(err)
	}
	ps := snap.Problems()
	return jsonReply(ValidateReply{OK: len(ps) == 0, Config: explain.ConfigOf(snap), Problems: Problems(ps)}, nil)
}

// Problems converts discovery problems to their JSON form (also the
// worker's validate --json and /readyz); never nil, so none is [].
func Problems(errs []*discover.Error) []Problem {
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		out = append(out, Problem{File: e.File, Line: e.Line, Code: string(e.Code), Key: e.Key, Subject: e.Subject, Message: e.Message})
	}
	return out
}

// ConfigReply is the config endpoint's answer.
type ConfigReply struct {
	events.DecisionConfig
	Instance      string `json:"instance"`
	WorkerVersion string `json:"worker_version"`
	// ReloadError is why the last reload was refused (the snapshot
	// served is then the last good one); null when it was not.
	ReloadError *string `json:"reload_error"`
}

func (s *Service) config(req micro.Request, snap *discover.Snapshot) *reply {
	if err := DecodeEmpty(req.Data()); err != nil {
		return requestError(err)
	}
	out := ConfigReply{DecisionConfig: explain.ConfigOf(snap), Instance: s.opt.Instance, WorkerVersion: SemVer(s.opt.Version)}
	if re, ok := s.src.(reloadErrer); ok {
		if err := re.Err(); err != nil {
			msg := err.Error()
			out.ReloadError = &msg
		}
	}
	return jsonReply(out, nil)
}

// requestError answers a decoder's refusal (always an *Error).
func requestError(err error) *reply {
	var e *Error
	if !errors.As(err, &e) {
		e = internal("decode the request: %v", err)
	}
	return errorReply(e, nil)
}

// lookupRecorded finds the recorded outcome a request names, in the
// outcome store and the specs stream; on failure it returns the reply.
// explain.Stored then explains its task against the configuration served:
// the document says whether that is the configuration the decision was
// made with.
func (s *Service) lookupRecorded(req micro.Request) (*explain.StoredOutcome, *reply) {
	r, err := DecodeRecorded(req.Data())
	if err != nil {
		return nil, requestError(err)
	}
	id := r.OutcomeID
	if id == "" {
		id = events.OutcomeID(r.Source, r.ID)
	}
	h := micro.Headers{"Content-Type": {"application/json"}, HeaderOutcomeID: {id}}
	if s.opt.JetStream == nil {
		return nil, explainError(&explain.Error{Code: explain.CodeOutcomesUnavailable, Details: map[string]any{},
			Message: "this instance has no JetStream access for looking outcomes up"}, h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opt.LookupTimeout)
	defer cancel()
	o, err := s.outcomes(ctx)
	if err != nil {
		return nil, explainError(err, h)
	}
	var so *explain.StoredOutcome
	if r.OutcomeID != "" {
		so, err = explain.Lookup(ctx, o, r.OutcomeID)
	} else {
		so, err = explain.LookupEvent(ctx, o, r.Source, r.ID)
	}
	if err != nil {
		return nil, explainError(err, h)
	}
	return so, nil
}

// outcomes opens the outcome store once it exists (the worker creates
// it), and keeps it.
func (s *Service) outcomes(ctx context.Context) (*pipeline.Outcomes, error) {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.out != nil {
		return s.out, nil
	}
	o, err := explain.Open(ctx, s.opt.JetStream, s.opt.Pipeline)
	if err != nil {
		return nil, err
	}
	s.out = o
	return o, nil
}

// explainError answers a failed look-up: explain's typed errors with
// their JSON (503 when the store cannot be reached, else 400); a broker
// that does not answer is outcomes_unavailable too.
func explainError(err error, h micro.Headers) *reply {
	var xe *explain.Error
	if !errors.As(err, &xe) {
		xe = &explain.Error{Code: explain.CodeOutcomesUnavailable, Details: map[string]any{}, Message: err.Error()}
	}
	st := StatusBadRequest
	if xe.Code == explain.CodeOutcomesUnavailable {
		st = StatusUnavailable
	}
	b, merr := events.MarshalData(xe)
	if merr != nil {
		return errorReply(internal("encode the error: %v", merr), h)
	}
	return &reply{body: b, headers: h, status: st, code: string(xe.Code)}
}
