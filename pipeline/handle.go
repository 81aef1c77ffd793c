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

// StageFunc observes the stages of Handle (for spans and metrics). It is
// called with the stage name before the stage runs and returns a function
// that is called with the stage's error (nil on success) when it ends.
type StageFunc func(stage resolve.Stage) func(err error)

func noStage(resolve.Stage) func(error) { return func(error) {} }

// Handle runs discover → resolve → materialize for one decoded task
// against one snapshot. It does no I/O (the snapshot is in memory), so the
// worker and the offline `worker resolve` share it and give the same answer.
func Handle(snap *discover.Snapshot, task events.Task, ref resolve.RoleRef, observe StageFunc) Outcome {
	if observe == nil {
		observe = noStage
	}
	out := Outcome{Role: task.Role, Ref: ref, SnapshotDigest: snap.Digest}
	if task.Pack != nil {
		out.Pack = *task.Pack
	}
	taskID := task.TaskID

	end := observe(resolve.StageDiscover)
	in, err := snap.Inputs(discover.Request{Ref: ref, Pack: task.Pack, Profile: task.Profile, Task: task.Overrides()})
	end(err)
	if err != nil {
		out.Failure = FailureFrom(&taskID, resolve.StageDiscover, err)
		return out
	}
	if in.Pack != nil {
		out.Pack = in.Pack.Name
	}
	out.Inputs = in

	end = observe(resolve.StageResolve)
	spec, err := resolve.Resolve(ref, in)
	end(err)
	if err != nil {
		out.Failure = FailureFrom(&taskID, resolve.StageResolve, err)
		return out
	}

	end = observe(resolve.StageMaterialize)
	m, err := materialize.Materialize(&spec, snap.Preamble)
	end(err)
	if err != nil {
		out.Failure = FailureFrom(&taskID, resolve.StageMaterialize, err)
		return out
	}
	out.Resolved = &events.ResolvedData{
		TaskID:            taskID,
		ResolvedAgentSpec: spec,
		SystemMessage:     m.SystemMessage,
		InputsDigest:      resolve.InputsDigest(ref, in),
	}
	return out
}

// FailureFrom turns any error into failure data. Typed errors keep their
// code and subject. An untyped error is a bug; it is still reported, with
// the stage's generic code, rather than dropped.
func FailureFrom(taskID *string, stage resolve.Stage, err error) *events.FailureData {
	f := &events.FailureData{TaskID: nonEmpty(taskID), Stage: stage, Details: map[string]any{}}
	var (
		re *resolve.ResolutionError
		de *discover.Error
		ee *events.DecodeError
		me *materialize.Error
	)
	switch {
	case errors.As(err, &re):
		f.Code, f.Subject, f.Message = re.Code, strPtr(re.Subject), re.Message
		if re.Details != nil {
			f.Details = re.Details
		}
	case errors.As(err, &de):
		f.Code, f.Message, f.Details = de.Code, de.Error(), de.Details()
		switch {
		case de.Subject != "":
			f.Subject = strPtr(de.Subject)
		case de.Key != "":
			f.Subject = strPtr(de.Key)
		}
	case errors.As(err, &ee):
		f.Code, f.Subject, f.Message = ee.Code, strPtr(ee.Subject), ee.Message
		if ee.Details != nil {
			f.Details = ee.Details
		}
	case errors.As(err, &me):
		f.Code, f.Message = me.Code, me.Message
	default:
		f.Code, f.Message = codeForStage(stage), fmt.Sprintf("untyped %s error: %v", stage, err)
	}
	if f.Message == "" {
		f.Message = err.Error()
	}
	// The stage is a property of the code (DESIGN.md §4): a resolver code
	// that Snapshot.Inputs returns (external_profile_missing) is still a
	// resolve-stage failure, and task_invalid is always decode.
	f.Stage = f.Code.Stage()
	return f
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

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonEmpty(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	v := *s
	return &v
}
