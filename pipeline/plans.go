package pipeline

import (
	"slices"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/materialize"
	"github.com/rolecall/rolecall/resolve"
)

// maxPlans bounds one goroutine's plans and the configurations it has
// seen once: a worker serving more distinct task configurations than this
// per snapshot starts over, and resolves each task in full until its
// plans fill again.
const maxPlans = 512

// Plans keeps the resolve.Plans one processing goroutine has made from
// the current snapshot, so that a task whose configuration an earlier
// task had — all but its extra prompt, which most tasks of a fleet do not
// share — is finished from the plan instead of resolved in full
// (docs/DECISIONS.md). The result is the same either way
// (bench.TestHandleMatchesOracle). A plan costs more to make than one
// resolution, so a configuration gets one the second time it is seen: a
// stream of distinct configurations pays for a key and a map entry per
// task, not for plans it never uses again. A Plans serves one goroutine at
// a time; its zero value is ready to use.
type Plans struct {
	snap *discover.Snapshot
	// scopes is keyed by what a plan reads besides the task: the pack,
	// the profile (the snapshot's own, so equal pointers are equal
	// values) and who chose the pack; then by resolve.AppendTaskKey. The
	// catalog, defaults, policy and preamble are the snapshot's.
	scopes map[planScope]map[string]*planned
	n      int // entries in scopes
	key    []byte
	// used is the plan the last HandleIn finished its outcome from (nil:
	// none), whose fixed fields the worker encodes that outcome with.
	used *planned
}

// planned is a plan and the encoding of the fields every outcome
// finished from it shares. apart is true when its tasks' results keep the
// extra prompt apart (resolve.Plan.ResolveApart), checked by the
// materializer once for all of them (apartChecked).
type planned struct {
	plan  *resolve.Plan
	fixed events.FixedFields
	apart bool
}

type planScope struct {
	pack      *resolve.Pack
	profile   *resolve.ExternalProfile
	selection resolve.PackSelection
}

// plan is the plan for ref and in, made from snap (whose Inputs made in),
// or nil the first time their configuration is seen.
func (c *Plans) plan(snap *discover.Snapshot, ref resolve.RoleRef, in resolve.Inputs) *planned {
	if c.snap != snap || c.n >= maxPlans {
		c.snap, c.scopes, c.n = snap, map[planScope]map[string]*planned{}, 0
	}
	scope := planScope{in.Pack, in.Profile, in.PackSelection}
	c.key = resolve.AppendTaskKey(c.key[:0], ref, in.Task)
	byTask := c.scopes[scope]
	if byTask == nil {
		byTask = map[string]*planned{}
		c.scopes[scope] = byTask
	}
	// A configuration seen once has an entry without a plan.
	p, seen := byTask[string(c.key)]
	switch {
	case p != nil:
	case !seen:
		byTask[string(c.key)] = nil
		c.n++
	default:
		p = &planned{plan: resolve.NewPlan(ref, in, snap.Preamble)}
		p.apart = apartChecked(p.plan, snap.Preamble)
		byTask[string(c.key)] = p
	}
	return p
}

// fixed is the fixed-field cache of the plan the last HandleIn used, or
// nil.
func (c *Plans) fixed() *events.FixedFields {
	if c == nil || c.used == nil {
		return nil
	}
	return &c.used.fixed
}

// apartChecked reports whether the results of plan may keep the task's
// extra prompt apart, with the materializer's checks run once, here,
// instead of on each: whether Apart's result passes checkedOnce.
func apartChecked(plan *resolve.Plan, preamble string) bool {
	spec, msg, ok := plan.Apart()
	return ok && checkedOnce(&spec, msg, preamble)
}

// checkedOnce reports whether a plan's Apart result (spec and msg) passes
// the materializer's checks in a way that decides them for every task's
// result. A task's result differs from it only by one more trimmed,
// non-blank block at the end of the prompt body, of the system message
// and, for a casts identity, of the overlays. When the overlays are
// themselves blocks (resolve.IsBlock, as Resolve makes them), the checks
// compose and compare both sides block by block, so they accept the
// task's result exactly when they accept this one, with its message
// (TestCheckedOnceDecidesEveryTask). Anything else is checked per task,
// as without a plan.
func checkedOnce(spec *resolve.ResolvedAgentSpec, msg, preamble string) bool {
	if slices.ContainsFunc(spec.PromptOverlays, func(o string) bool { return !resolve.IsBlock(o) }) {
		return false
	}
	got, err := materialize.MaterializeSystemMessageFrom(spec, preamble, msg)
	return err == nil && got == msg
}
