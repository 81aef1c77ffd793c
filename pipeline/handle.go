package pipeline

import (
	"errors"
	"fmt"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/resolve"
)

// Outcome is what one task turns into: exactly one of Resolved or Failure.
// It is a value; publishing it is the runner's job.
type Outcome struct {
	Resolved *events.ResolvedData
	Failure  *events.FailureData
	// Role and Pack name what was asked for, for telemetry ("" if unknown).
	Role string
	Pack string
	// Ref and Inputs are what was resolved (zero when discovery failed),
	// kept for explain output.
	Ref    resolve.RoleRef
	Inputs resolve.Inputs
	// SnapshotDigest identifies the configuration the outcome was made from.
	SnapshotDigest string
}

// Code returns the failure code, or "" for a resolved outcome.
func (o *Outcome) Code() resolve.Code {
	if o.Failure != nil {
		return o.Failure.Code
	}
	return ""
}

// Observer watches the stages of Handle (for spans and metrics):
// StageStart is called before a stage runs and StageEnd when it ends, with
// its error (nil on success). Stages run one after another.
type Observer interface {
	StageStart(stage resolve.Stage)
	StageEnd(stage resolve.Stage, err error)
}

type noObserver struct{}

func (noObserver) StageStart(resolve.Stage)      {}
func (noObserver) StageEnd(resolve.Stage, error) {}

// Handle runs discover → resolve → materialize for one decoded task
// against one snapshot. It does no I/O (the snapshot is in memory), so the
// worker and the offline `worker resolve` share it and give the same answer.
// The outcome carries its decision record (NewDecision); the encoder
// fills its id and worker version.
func Handle(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef, observe Observer) Outcome {
	return handle(snap, task, ref, observe, false)
}

// HandleExplained is Handle with the resolver asked to record each field's
// candidates (resolve.Inputs.Explain), so the resolved spec carries the
// chains that decided it: explain output comes from the run that decided,
// not from a second look.
func HandleExplained(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef, observe Observer) Outcome {
	return handle(snap, task, ref, observe, true)
}

func handle(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef, observe Observer, explain bool) Outcome {
	out := decide(snap, task, ref, observe, explain)
	inputs := decisionInputs(snap, &task, ref, &out)
	if out.Resolved != nil {
		out.Resolved.Decision = NewDecision(snap, &task, inputs, &out.Resolved.PromptBody)
	} else {
		out.Failure.Decision = NewDecision(snap, &task, inputs, nil)
	}
	return out
}

func decide(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef, observe Observer, explain bool) Outcome {
	if observe == nil {
		observe = noObserver{}
	}
	out := Outcome{Role: task.Role, Ref: ref, SnapshotDigest: snap.Digest}
	if task.Pack != nil {
		out.Pack = *task.Pack
	}
	taskID := task.TaskID

	observe.StageStart(resolve.StageDiscover)
	in, err := snap.Inputs(discover.Request{Ref: ref, Pack: task.Pack, Profile: task.Profile, Task: task.Overrides()})
	observe.StageEnd(resolve.StageDiscover, err)
	if err != nil {
		out.Failure = FailureFrom(&taskID, resolve.StageDiscover, err)
		return out
	}
	if in.Pack != nil {
		out.Pack = in.Pack.Name
	}
	in.Explain = explain
	out.Inputs = in

	observe.StageStart(resolve.StageResolve)
	spec, err := resolve.Resolve(ref, in)
	observe.StageEnd(resolve.StageResolve, err)
	if err != nil {
		out.Failure = FailureFrom(&taskID, resolve.StageResolve, err)
		return out
	}

	observe.StageStart(resolve.StageMaterialize)
	msg, err := materialize.SystemMessage(&spec, snap.Preamble)
	observe.StageEnd(resolve.StageMaterialize, err)
	if err != nil {
		out.Failure = FailureFrom(&taskID, resolve.StageMaterialize, err)
		return out
	}
	out.Resolved = &events.ResolvedData{
		TaskID:            taskID,
		ResolvedAgentSpec: spec,
		SystemMessage:     msg,
		InputsDigest:      resolve.InputsDigest(ref, in),
	}
	return out
}

// FailureFrom turns any error into failure data. Typed errors keep their
// code and subject. An untyped error is a bug; it is still reported, with
// the stage's generic code, rather than dropped.
func FailureFrom(taskID *string, stage resolve.Stage, err error) *events.FailureData {
	// The failure, its task id and its subject in one allocation.
	a := &struct {
		f       events.FailureData
		taskID  string
		subject string
	}{}
	f := &a.f
	f.Stage = stage
	if taskID != nil && *taskID != "" {
		a.taskID = *taskID
		f.TaskID = &a.taskID
	}
	subject := func(s string) {
		if s != "" {
			a.subject = s
			f.Subject = &a.subject
		}
	}
	re, de, ee, me := typedError(err)
	switch {
	case re != nil:
		f.Code, f.Message, f.Details = re.Code, re.Message, re.Details
		subject(re.Subject)
	case de != nil:
		f.Code, f.Message, f.Details = de.Code, de.Error(), de.Details()
		switch {
		case de.Subject != "":
			subject(de.Subject)
		case de.Key != "":
			subject(de.Key)
		}
	case ee != nil:
		f.Code, f.Message, f.Details = ee.Code, ee.Message, ee.Details
		subject(ee.Subject)
	case me != nil:
		f.Code, f.Message = me.Code, me.Message
	default:
		f.Code, f.Message = codeForStage(stage), fmt.Sprintf("untyped %s error: %v", stage, err)
	}
	// A discover error's details stand as they are; the others' default
	// to an empty object.
	if f.Details == nil && de == nil {
		f.Details = map[string]any{}
	}
	if f.Message == "" {
		f.Message = err.Error()
	}
	// The stage is a property of the code (docs/CONFIG.md): a resolver code
	// that Snapshot.Inputs returns (external_profile_missing) is still a
	// resolve-stage failure, and task_invalid is always decode.
	f.Stage = f.Code.Stage()
	return f
}

// typedError finds the first of the typed errors in err's chain, in the
// order FailureFrom checks them. None of the four types wraps another or
// has an As method, so an error that is one of them directly is matched by
// its type alone, without errors.As (whose targets would be allocated).
func typedError(err error) (*resolve.ResolutionError, *discover.Error, *events.DecodeError, *materialize.Error) {
	switch e := err.(type) {
	case *resolve.ResolutionError:
		return e, nil, nil, nil
	case *discover.Error:
		return nil, e, nil, nil
	case *events.DecodeError:
		return nil, nil, e, nil
	case *materialize.Error:
		return nil, nil, nil, e
	}
	return typedErrorAs(err)
}

func typedErrorAs(err error) (*resolve.ResolutionError, *discover.Error, *events.DecodeError, *materialize.Error) {
	var (
		re *resolve.ResolutionError
		de *discover.Error
		ee *events.DecodeError
		me *materialize.Error
	)
	switch {
	case errors.As(err, &re):
		return re, nil, nil, nil
	case errors.As(err, &de):
		return nil, de, nil, nil
	case errors.As(err, &ee):
		return nil, nil, ee, nil
	case errors.As(err, &me):
		return nil, nil, nil, me
	}
	return nil, nil, nil, nil
}

func codeForStage(s resolve.Stage) resolve.Code {
	switch s {
	case resolve.StageDecode:
		return resolve.CodeEventInvalid
	case resolve.StageDiscover:
		return resolve.CodeCatalogInvalid
	case resolve.StageDeliver:
		return resolve.CodeDeliveryExhausted
	default:
		return resolve.CodeMaterializeFailed
	}
}

func nonEmpty(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	v := *s
	return &v
}
