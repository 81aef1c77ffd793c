package bench

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rolecall/rolecall/events"
)

// Kind is one shape of task in the workload.
type Kind int

// The task shapes the issue asks for. Each exercises a different path
// through discovery and the resolver.
const (
	// KindCasts: a built-in Role from a pack file, two requested Modes and
	// a full set of task overrides (model, effort, extra prompt, tools,
	// permissions, flags).
	KindCasts Kind = iota
	// KindOverlay: a built-in Role with an overlay profile and a task
	// extra prompt, on the pack's default Modes.
	KindOverlay
	// KindReplacement: an external:<name> replacement identity.
	KindReplacement
	// KindFailing: requested Modes that conflict (fast + slow): a typed
	// resolver failure, published as a failure outcome.
	KindFailing
	numKinds
)

var kindNames = [numKinds]string{"casts", "overlay", "replacement", "failing"}

func (k Kind) String() string {
	if k < 0 || k >= numKinds {
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
	return kindNames[k]
}

// expectedSubject is the outcome subject (after the prefix) each kind must
// produce against the generated root; a different one means the workload
// is not measuring what it claims to.
var expectedSubject = [numKinds]string{
	".specs.resolved.architect",
	".specs.resolved.architect",
	".specs.resolved.external_bench-scribe",
	".specs.failed.mode_conflict",
}

// Mix weights the kinds; tasks are assigned kinds in a fixed weighted
// round-robin, so two runs with one mix see the same sequence.
type Mix [numKinds]int

// DefaultMix is mostly successful resolutions with one failure in ten.
var DefaultMix = Mix{5, 2, 2, 1}

// ParseMix reads "casts=5,overlay=2,replacement=2,failing=1"; kinds not
// named get weight 0, and at least one weight must be positive.
func ParseMix(s string) (Mix, error) {
	var m Mix
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return Mix{}, fmt.Errorf("mix %q: want kind=weight, got %q", s, part)
		}
		k := slices.Index(kindNames[:], name)
		if k < 0 {
			return Mix{}, fmt.Errorf("mix %q: unknown kind %q (want %s)", s, name, strings.Join(kindNames[:], ", "))
		}
		if seen[name] {
			return Mix{}, fmt.Errorf("mix %q: %s given twice", s, name)
		}
		seen[name] = true
		w, err := strconv.Atoi(val)
		if err != nil || w < 0 {
			return Mix{}, fmt.Errorf("mix %q: weight of %s must be a non-negative integer", s, name)
		}
		m[k] = w
	}
	if m.total() == 0 {
		return Mix{}, fmt.Errorf("mix %q: at least one weight must be positive", s)
	}
	return m, nil
}

func (m Mix) total() int {
	t := 0
	for _, w := range m {
		t += w
	}
	return t
}

func (m Mix) String() string {
	parts := make([]string, 0, numKinds)
	for k, w := range m {
		parts = append(parts, kindNames[k]+"="+strconv.Itoa(w))
	}
	return strings.Join(parts, ",")
}

// sequence is the mix laid out as a repeating pattern with the kinds
// interleaved (smooth weighted round-robin), so a short run still sees
// every kind in proportion.
func (m Mix) sequence() []Kind {
	total := m.total()
	seq := make([]Kind, 0, total)
	var current [numKinds]int
	for range total {
		best := -1
		for k := range numKinds {
			current[k] += m[k]
			if m[k] > 0 && (best < 0 || current[k] > current[best]) {
				best = int(k)
			}
		}
		current[best] -= total
		seq = append(seq, Kind(best))
	}
	return seq
}

// taskSource is the CloudEvents source of every bench task.
const taskSource = "rolecall-bench"

// task is one prepared task event: the exact bytes that go on the wire.
// Its strings and bytes are windows of its run's few shared buffers
// (packTasks), not objects of their own: a run's tasks stay live in the
// process that also hosts the broker and the worker, and as maps and
// separate strings 20,000 of them were about a third of every garbage
// collection's mark work there, a cost a worker, whose tasks come from
// planners elsewhere, never has.
type task struct {
	kind  Kind
	id    string   // CloudEvents id
	outID string   // the outcome id the worker will derive (Nats-Msg-Id)
	hdr   []string // the header's names and values, in pairs
	body  []byte
}

// header is the task's header as a message carries it: a map of its own
// for each call, which the message's publish may keep.
func (t *task) header() nats.Header {
	h := make(nats.Header, len(t.hdr)/2)
	for i := 0; i+1 < len(t.hdr); i += 2 {
		h[t.hdr[i]] = append(h[t.hdr[i]], t.hdr[i+1])
	}
	return h
}

// encodedTask is a task as EncodeTask gives it, before packTasks.
type encodedTask struct {
	kind      Kind
	id, outID string
	header    nats.Header
	body      []byte
}

// packTasks copies tasks into one buffer of bodies, one string of every id
// and header name and value, and one list of header pairs: a run's tasks
// are then four heap objects, whatever their number. Each is sized first
// and only appended to, so a window taken from it stays valid, as with
// resolve.TextArena: a strings.Builder never writes over what its String
// has handed out.
func packTasks(enc []encodedTask) []task {
	nb, ns, nh := 0, 0, 0
	for i := range enc {
		e := &enc[i]
		nb += len(e.body)
		ns += len(e.id) + len(e.outID)
		for k, vs := range e.header {
			for _, v := range vs {
				ns += len(k) + len(v)
				nh += 2
			}
		}
	}
	body := make([]byte, 0, nb)
	hdr := make([]string, 0, nh)
	var text strings.Builder
	text.Grow(ns)
	put := func(s string) string {
		from := text.Len()
		text.WriteString(s)
		return text.String()[from:]
	}
	tasks := make([]task, len(enc))
	for i := range enc {
		e, t := &enc[i], &tasks[i]
		from, first := len(body), len(hdr)
		body = append(body, e.body...)
		for k, vs := range e.header {
			for _, v := range vs {
				hdr = append(hdr, put(k), put(v))
			}
		}
		// Windows end at their capacity: an append to one cannot write
		// over the next.
		*t = task{kind: e.kind, id: put(e.id), outID: put(e.outID),
			hdr: hdr[first:len(hdr):len(hdr)], body: body[from:len(body):len(body)]}
	}
	return tasks
}

// The task data of each kind: %q is the task id, %s a ticket number in
// the extra prompt, which makes every task's prompt (and so its outcome)
// unique, as the instructions of real tasks are — a cache of composed
// prompts or encoded outcomes would have nothing to hit. The casts task is
// the largest: a planner that sets every override.
var taskData = [numKinds]string{
	`{"task_id":%q,"role":"architect","pack":"team","modes":["systematic","premortem"],` +
		`"overrides":{"model":"claude-opus-4-1","effort":"high",` +
		`"extra_prompt":"Design the storage layer for the audit stream. Keep the write path append-only, state the retention policy, and list the two alternatives you rejected with the reason for each (ticket %s).",` +
		`"tools":["read","grep","edit","bash"],` +
		`"permissions":{"mode":"rules","allow":{"Bash":["go test ./...","git diff *","git log *"],"Read":["**"]},"deny":{"Read":["**/.env","secrets/**"]},"escalate":{"Bash":["git push *"]}},` +
		`"yolo":false,"bypass":false,"fast_mode":false,"lion_system":true}}`,
	`{"task_id":%q,"role":"architect","pack":"team","profile":"bench-house-style",` +
		`"overrides":{"extra_prompt":"Review the proposed queue topology and report the single biggest operational risk (ticket %s)."}}`,
	`{"task_id":%q,"role":"external:bench-scribe","overrides":{"model":"claude-sonnet-4-5","tools":["read"],"extra_prompt":"Summarize the design review of ticket %s."}}`,
	`{"task_id":%q,"role":"implementer","pack":"team","modes":["fast","slow"],"overrides":{"extra_prompt":"Fix ticket %s."}}`,
}

// runID makes the events of one bench run distinct from any earlier run's
// on the same server, so the specs stream's duplicate window never drops a
// fresh outcome as a repeat of an old one.
func runID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// buildTasks encodes n task events with the mix, in structured or binary
// content mode, each with its own W3C trace context as a planner would
// send it.
func buildTasks(n int, mix Mix, binary bool, run string) ([]task, error) {
	seq := mix.sequence()
	tasks := make([]encodedTask, n)
	for i := range tasks {
		k := seq[i%len(seq)]
		id := fmt.Sprintf("%s-%07d", run, i)
		data := fmt.Sprintf(taskData[k], "T-"+id, id)
		var tid [16]byte
		var sid [8]byte
		_, _ = rand.Read(tid[:])
		_, _ = rand.Read(sid[:])
		tp := "00-" + hex.EncodeToString(tid[:]) + "-" + hex.EncodeToString(sid[:]) + "-00"
		h, body, err := events.EncodeTask(taskSource, id, []byte(data), tp, "", binary)
		if err != nil {
			return nil, fmt.Errorf("encode %s task: %w", k, err)
		}
		tasks[i] = encodedTask{kind: k, id: id, outID: events.OutcomeID(taskSource, id), header: h, body: body}
	}
	return packTasks(tasks), nil
}

// The generated config root: a pack with directive blocks, worker
// defaults with a permission policy, an overlay and a replacement
// profile — the files a real deployment has, at realistic sizes.
var rootFiles = map[string]string{
	"rolecall.yaml": `default_pack: team
defaults:
  model: claude-sonnet-4-5
  effort: medium
  tools: [read, grep, edit]
  permissions:
    mode: rules
    allow:
      Bash: ["go test ./...", "git status"]
    deny:
      Read: ["**/.env"]
  lion_system: true
`,
	"packs/team.yaml": `name: team
roles:
  architect:
    model: claude-opus-4-1
    effort: high
    default_modes: [systematic, framing]
    authority:
      - Define component boundaries, interfaces, and data ownership
      - Select among design alternatives and record the decision
    boundaries:
      - Do not write or merge production code
      - Do not override security or compliance requirements
    escalations:
      - Requirements conflict and no design satisfies all of them
      - A decision would be costly to reverse
  implementer:
    model: claude-sonnet-4-5
    effort: medium
    default_modes: [systematic]
    authority:
      - Change code within the scope of the task
    boundaries:
      - Do not change public interfaces without a decision record
    escalations:
      - The task cannot be done without touching another team's code
  reviewer:
    model: claude-sonnet-4-5
    modes_allow: [adversarial, evidential, premortem]
    boundaries:
      - Do not rewrite the work under review
`,
	"agents/bench-house-style.md": `---
description: House conventions for architects.
disposition: overlay
base_role: architect
effort: medium
timeout: 900
resume_on_timeout: true
artifact_defaults:
  format: adr
  sections: [context, decision, consequences]
---
Prefer boring technology that the team already operates. Write every
decision down with the alternatives considered and why they lost. When a
choice is hard to reverse, say so in the first paragraph and name who must
agree before it is made.
`,
	"agents/bench-scribe.md": `---
disposition: replacement
description: Writes meeting notes and decision summaries.
model: claude-haiku-4-5
effort: low
lion_system: false
artifact_defaults:
  format: markdown
  sections: [summary, decisions, actions]
---
You are the scribe. You turn a discussion into notes that someone who was
not there can act on. Lead with the decisions made, then the open questions,
then the actions with an owner and a date for each. Quote people only when
the exact words matter. Never invent an owner or a date: write "unassigned"
instead. Keep the notes under one page.
`,
}

// writeRoot writes the generated config root into dir. The files are
// dated an hour back, as a deployment's are: discovery reloads a root
// whose files changed within the last seconds on every sweep (it cannot
// trust their timestamps yet), which would measure reloads, not lookups.
func writeRoot(dir string) error {
	old := time.Now().Add(-time.Hour)
	for rel, content := range rootFiles {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(p, old, old); err != nil {
			return err
		}
	}
	return nil
}
