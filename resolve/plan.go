package resolve

import (
	"bytes"
	"crypto/sha256"
	"hash"
	"slices"
	"strings"
)

// A Plan is a resolution of everything but the task's extra prompt. The
// extra prompt is the one input that differs between most tasks of a
// fleet, and it decides only the prompt's last block (DESIGN.md §3): every
// other field, every failure and every source comes from the rest of the
// inputs. So a caller that resolves many tasks against one snapshot can
// make the plan once per distinct rest and finish it per task, for the
// same result as ResolveShared and the same digest as InputsDigest. A Plan
// is immutable and safe for concurrent use.
type Plan struct {
	err error
	// out is the resolution without the extra prompt, shared as
	// ResolveShared's result is; message is its system message.
	out     ResolvedAgentSpec
	message string
	head    string // MessageHead: what message puts before the body
	replace bool   // a replacement identity: the extra prompt is no overlay
	// before and after are the canonical encoding of the inputs up to and
	// after the extra prompt; state is the SHA-256 state after before,
	// kept when before is long enough for that to pay (see cloneMin).
	before []byte
	after  []byte
	state  hash.Cloner
	// apartBody and apartMessage are what Resolve composes before the
	// extra prompt's block (the body's blocks trimmed, the message's head):
	// ResolveApart's body and message. apartBody is "" when the planned
	// body is blank, and nothing is kept apart then.
	apartBody    string
	apartMessage string
}

// cloneMin is the shortest encoding before the extra prompt whose hash
// state a plan keeps. Finishing a cloned state costs three allocations
// and the hash's interface (what is written through it escapes), about
// what hashing 1 KB costs; a shorter prefix is hashed again per task
// with the rest, in one call on the stack. An inline profile's body puts
// a task over it, a casts task without one stays under.
const cloneMin = 1 << 10

// NewPlan resolves ref and in as ResolveShared does, leaving out
// in.Task.ExtraPrompt (it may be set; it is not read). The plan holds
// lists and maps of in, like ResolveShared's result: neither may be
// modified while the plan is in use. A failing resolution is a plan too:
// its Err, and its Resolve, return the error.
func NewPlan(ref RoleRef, in Inputs, preamble string) *Plan {
	in.Task.ExtraPrompt = nil
	r := resolution{preamble: preamble, shared: true}
	if err := r.run(ref, in); err != nil {
		return &Plan{err: err}
	}
	// Both encodings are built on the stack and copied once: grown from
	// nil they took a dozen allocations.
	var mem [inputsBuf]byte
	p := &Plan{
		out:     r.out,
		message: r.message,
		head:    r.head(),
		replace: r.replace,
		before:  bytes.Clone(canon(mem[:0]).beforeExtra(ref, in)),
		after:   bytes.Clone(canon(mem[:0]).afterExtra(in)),
	}
	// Composed once here so that every task's result shares them: the
	// same text at the same address, which an encoder caching quoted
	// prompts compares by pointer.
	p.apartBody, p.apartMessage = joinBlocksAfter(nil, p.head, p.out.PromptBody)
	if len(p.before) >= cloneMin {
		h := sha256.New()
		_, _ = h.Write(p.before)
		// Not a Cloner only with GOFIPS140=v1.0.0: then the whole
		// encoding is hashed per task.
		p.state, _ = h.(hash.Cloner)
	}
	return p
}

// Err is the resolution's failure, or nil.
func (p *Plan) Err() error { return p.err }

// Resolve finishes the plan with the task's extra prompt: it returns what
// ResolveShared(ref, in, preamble, arena) returns for the plan's ref,
// preamble and inputs with in.Task.ExtraPrompt = extra. The result shares
// lists with the plan and its inputs, and must only be read.
func (p *Plan) Resolve(extra *string, arena *TextArena) (ResolvedAgentSpec, string, error) {
	if p.err != nil {
		return ResolvedAgentSpec{}, "", p.err
	}
	out, x := p.withExtra(extra)
	if x == "" {
		return out, p.message, nil
	}
	// The extra prompt is the body's last block: the planned body (its
	// blocks already trimmed and joined, so a block that trims to itself)
	// and x.
	var message string
	out.PromptBody, message = joinBlocksAfter(arena, p.head, out.PromptBody, x)
	return out, message, nil
}

// withExtra is the plan's result but for the prompt body and message:
// the extra prompt trimmed (x, "" when blank) and, for a casts identity,
// appended to the overlays (to a copy: the plan's list is every
// result's). The plan must not have failed.
func (p *Plan) withExtra(extra *string) (out ResolvedAgentSpec, x string) {
	out = p.out
	if extra != nil {
		x = strings.TrimSpace(*extra)
	}
	if x != "" && !p.replace {
		out.PromptOverlays = append(slices.Clip(out.PromptOverlays), x)
	}
	return out, x
}

// Apart is the result ResolveApart builds on, without an extra prompt:
// the spec, with the planned body as Resolve composes it before the extra
// prompt's block, and its system message. A caller that checks each
// task's result (the materializer) can check this one once instead: a
// task's result differs from it only by one more trimmed, non-blank block
// at the end of the body, the message and (for a casts identity) the
// overlays. ok is false for a failed plan and for one whose body is blank,
// where ResolveApart keeps nothing apart.
func (p *Plan) Apart() (spec ResolvedAgentSpec, message string, ok bool) {
	if p.err != nil || p.apartBody == "" {
		return ResolvedAgentSpec{}, "", false
	}
	spec = p.out
	spec.PromptBody = p.apartBody
	return spec, p.apartMessage, true
}

// ResolveApart is Resolve without composing the prompt. When Apart's ok is
// true and the extra prompt is not blank, it returns Apart's spec with the
// extra prompt's block appended to PromptOverlays (as Resolve appends it,
// for a casts identity), Apart's message, and the block as tail: Resolve's
// PromptBody is then spec.PromptBody + BlockSeparator + tail, and its
// message is message + BlockSeparator + tail. Otherwise tail is "" and the
// results are Resolve's. Composing the prompt, a few KB per task, and
// comparing it were the largest cost the worker could still shed
// (docs/PERFORMANCE.md).
func (p *Plan) ResolveApart(extra *string, arena *TextArena) (spec ResolvedAgentSpec, message, tail string, err error) {
	if p.err != nil || p.apartBody == "" {
		spec, message, err = p.Resolve(extra, arena)
		return spec, message, "", err
	}
	spec, tail = p.withExtra(extra)
	if tail == "" {
		return spec, p.message, "", nil
	}
	spec.PromptBody = p.apartBody
	return spec, p.apartMessage, tail, nil
}

// InputsDigest is InputsDigest(ref, in) for the plan's ref and inputs
// with in.Task.ExtraPrompt = extra.
func (p *Plan) InputsDigest(extra *string) string {
	if p.state != nil {
		if h, err := p.state.Clone(); err == nil {
			// Sized exactly: what goes through hash.Hash's Write escapes,
			// so a stack array would be moved to the heap at its size.
			n := 1 + len(p.after)
			if extra != nil {
				n += 8 + len(*extra)
			}
			_, _ = h.Write(append(canon(make([]byte, 0, n)).optStr(extra), p.after...))
			var sum [sha256.Size]byte
			h.Sum(sum[:0])
			return digestString(sum)
		}
	}
	var mem [inputsBuf]byte
	e := append(canon(mem[:0]), p.before...)
	return append(e.optStr(extra), p.after...).digest()
}
