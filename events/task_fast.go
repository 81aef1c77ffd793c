package events

import (
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/rolecall/rolecall/resolve"
)

// The fast path. DecodeTask and DecodeTaskData first try a hand-written
// parser that accepts only inputs it can judge completely: well-formed,
// valid, and without the rarer forms (escaped member names, null inside
// arrays and permission maps, data_base64, non-ASCII header names, ...).
// Whatever it declines goes to the original decoder (decodeTaskSlow,
// decodeTaskDataSlow), which then produces the error or, for an unusual
// but valid input, the result. So the fast path never produces an error
// itself: it either returns exactly what the slow path would, or says
// nothing. The differential tests and fuzz targets (decode_fast_test.go)
// hold it to that.
//
// It saves the slow path's cost by (1) copying the message once into a
// string and taking every unescaped value as a substring of it, (2)
// putting every pointer target (the optional strings and booleans,
// Overrides, the permission policy, the event context) in one allocation,
// (3) putting the elements of every string array in one shared backing
// array (capacity-limited, so an append by the caller never writes into a
// neighbour), (4) checking list elements as they are read, and (5) not
// running url.Parse on every message (see sourceURL).

// taskBlock holds the pointer targets of one decoded task.
type taskBlock struct {
	ov                                  Overrides
	perm                                resolve.PermissionPolicy
	pack, profile, model, effort, extra string
	yolo, bypass, fastMode, lionSystem  bool
	strs                                [8]string // the string arrays, when they fit
}

// fastParser is the state of one fast decode, pooled for its scratch
// slices.
type fastParser struct {
	b   []byte // the input
	s   string // string(b): unescaped values are substrings of it
	i   int
	blk *taskBlock
	buf []byte // unquoting scratch

	// strs holds the elements of every string array read so far: first
	// in blk.strs, then (append having moved it) in a heap array. Each
	// list is a capacity-limited slice of it, taken when the list ends;
	// a move leaves earlier lists in the old array, which nothing
	// writes to again.
	strs []string

	// Envelope state (decode_fast.go).
	env      envelope
	extNames []string
}

var fastParsers = sync.Pool{New: func() any { return new(fastParser) }}

func getParser(b []byte, s string) *fastParser {
	p := fastParsers.Get().(*fastParser)
	p.b, p.s, p.i = b, s, 0
	return p
}

// release drops every reference into the message before pooling the
// parser, so the pool does not keep message bodies alive.
func (p *fastParser) release() {
	clear(p.env.ext)
	clear(p.extNames)
	p.extNames = p.extNames[:0]
	p.env = envelope{ext: p.env.ext[:0]}
	p.b, p.s, p.i, p.blk, p.strs = nil, "", 0, nil, nil
	if cap(p.buf) > 64<<10 {
		p.buf = nil
	}
	fastParsers.Put(p)
}

func (p *fastParser) block() *taskBlock {
	if p.blk == nil {
		p.blk = new(taskBlock)
	}
	return p.blk
}

// decodeTaskDataFast is DecodeTaskData for the data it can judge; ok is
// false for everything else (every invalid input among them).
func decodeTaskDataFast(data []byte, opts DecodeOptions) (Task, resolve.RoleRef, bool) {
	if len(data) > opts.maxData() {
		return Task{}, nil, false
	}
	p := getParser(data, string(data))
	defer p.release()
	var t Task
	if !p.task(&t) {
		return Task{}, nil, false
	}
	p.ws()
	if p.i != len(p.b) {
		return Task{}, nil, false
	}
	ref, ok := taskOK(&t)
	if !ok {
		return Task{}, nil, false
	}
	return t, ref, true
}

// JSON scanning. Grammar as RFC 8259 (and jsontext): whitespace is space,
// tab, CR and LF; strings have no raw control characters and are valid
// UTF-8.

func (p *fastParser) ws() { p.peek() }

// peek returns the next byte after whitespace, 0 at the end. Tokens
// mostly follow one another without whitespace, so that case is first.
func (p *fastParser) peek() byte {
	b, i := p.b, p.i
	if i < len(b) && b[i] > ' ' {
		return b[i]
	}
	for ; i < len(b); i++ {
		if c := b[i]; c > ' ' || !wsChar[c] {
			p.i = i
			return c
		}
	}
	p.i = i
	return 0
}

var wsChar = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

func (p *fastParser) consume(c byte) bool {
	if p.peek() == c {
		p.i++
		return true
	}
	return false
}

// lit consumes a literal (true, false, null) at the current position.
func (p *fastParser) lit(word string) bool {
	if len(p.b)-p.i >= len(word) && p.s[p.i:p.i+len(word)] == word {
		p.i += len(word)
		return true
	}
	return false
}

// more is called after a member or element: it reports whether another
// follows (a comma) or the container ends (close); ok is false otherwise.
func (p *fastParser) more(close byte) (more, ok bool) {
	switch p.peek() {
	case ',':
		p.i++
		return true, true
	case close:
		p.i++
		return false, true
	}
	return false, false
}

// name reads a member name and the colon after it. A name that is empty
// or holds an escape, a control character or non-ASCII is declined: no
// such name is valid anywhere the fast path looks (callers check the
// rest).
func (p *fastParser) name() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	b, start := p.b, p.i
	for i := start; i < len(b); i++ {
		if c := b[i]; !plainChar[c] {
			if c != '"' || i == start {
				return "", false
			}
			p.i = i + 1
			return p.s[start:i], p.consume(':')
		}
	}
	return "", false
}

// str reads a string value. Without escapes it is a substring of the
// message; with them jsontext.AppendUnquote decodes it (and rejects bad
// escapes, unpaired surrogates and invalid UTF-8).
func (p *fastParser) str() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	b, start := p.b, p.i
	esc, high := false, false
	for i := start; i < len(b); i++ {
		c := b[i]
		if plainChar[c] {
			continue
		}
		switch {
		case c == '"':
			p.i = i + 1
			if esc {
				return p.unquote(b[start-1 : i+1])
			}
			if high && !utf8.Valid(b[start:i]) {
				return "", false
			}
			return p.s[start:i], true
		case c == '\\':
			esc = true
			i++ // the escaped byte; AppendUnquote checks the sequence
		case c < 0x20:
			return "", false
		default:
			high = true
		}
	}
	return "", false
}

// plainChar is true for the ASCII bytes a string holds as they are.
var plainChar = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\'
	}
	return t
}()

func (p *fastParser) unquote(raw []byte) (string, bool) {
	b, err := jsontext.AppendUnquote(p.buf[:0], raw)
	p.buf = b
	if err != nil {
		return "", false
	}
	return string(b), true
}

// strOrNull reads a string or null.
func (p *fastParser) strOrNull() (s string, null, ok bool) {
	switch p.peek() {
	case 'n':
		return "", true, p.lit("null")
	case '"':
		s, ok = p.str()
		return s, false, ok
	}
	return "", false, false
}

// optStr reads an optional string member into the block field that
// field selects: nil for null.
func (p *fastParser) optStr(field func(*taskBlock) *string) (*string, bool) {
	v, null, ok := p.strOrNull()
	if !ok || null {
		return nil, ok
	}
	dst := field(p.block())
	*dst = v
	return dst, true
}

// optBool reads an optional boolean member into a block field.
func (p *fastParser) optBool(field func(*taskBlock) *bool) (*bool, bool) {
	var v bool
	switch p.peek() {
	case 'n':
		return nil, p.lit("null")
	case 't':
		v = true
		if !p.lit("true") {
			return nil, false
		}
	case 'f':
		if !p.lit("false") {
			return nil, false
		}
	default:
		return nil, false
	}
	dst := field(p.block())
	*dst = v
	return dst, true
}

// Element checks for strList: each is the success condition of the
// check validateTask makes on that list's elements.
type elemCheck uint8

const (
	elemMode    elemCheck = iota // checkName
	elemTool                     // checkValue
	elemPattern                  // checkRules' pattern checks
)

func (k elemCheck) ok(s string) bool {
	switch k {
	case elemMode:
		return s != "" && resolve.ValidateName("modes", s) == nil
	case elemTool:
		return !badValue(s)
	}
	return !badPattern(s)
}

// strList reads null (a nil slice) or an array of strings that all pass
// check; a list that fails is declined.
func (p *fastParser) strList(check elemCheck) ([]string, bool) {
	switch p.peek() {
	case 'n':
		return nil, p.lit("null")
	case '[':
		p.i++
	default:
		return nil, false
	}
	if p.strs == nil {
		p.strs = p.block().strs[:0]
	}
	start := len(p.strs)
	if p.peek() == ']' {
		p.i++
		return p.strs[start:start:start], true
	}
	for {
		s, ok := p.str()
		if !ok || !check.ok(s) {
			return nil, false
		}
		p.strs = append(p.strs, s)
		more, ok := p.more(']')
		if !ok {
			return nil, false
		}
		if !more {
			end := len(p.strs)
			return p.strs[start:end:end], true
		}
	}
}

// task reads task data (an object) into t. Every member's value is
// decoded as json.Unmarshal with RejectUnknownMembers decodes it into
// taskWire; duplicate and unknown members are declined.
func (p *fastParser) task(t *Task) bool {
	if !p.consume('{') {
		return false
	}
	if p.peek() == '}' {
		p.i++
		return true
	}
	var seen uint8
	for {
		name, ok := p.name()
		if !ok {
			return false
		}
		var bit uint8
		switch name {
		case "task_id":
			bit = 1 << 0
			t.TaskID, ok = p.str()
		case "role":
			bit = 1 << 1
			t.Role, ok = p.str()
		case "pack":
			bit = 1 << 2
			t.Pack, ok = p.optStr(func(b *taskBlock) *string { return &b.pack })
		case "profile":
			bit = 1 << 3
			t.Profile, ok = p.optStr(func(b *taskBlock) *string { return &b.profile })
		case "modes":
			bit = 1 << 4
			t.Modes, ok = p.strList(elemMode)
		case "overrides":
			bit = 1 << 5
			switch p.peek() {
			case 'n':
				ok = p.lit("null")
			case '{':
				blk := p.block()
				t.Override = &blk.ov
				ok = p.overrides(&blk.ov)
			default:
				ok = false
			}
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		more, ok := p.more('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

func (p *fastParser) overrides(o *Overrides) bool {
	p.i++ // '{'
	if p.peek() == '}' {
		p.i++
		return true
	}
	var seen uint16
	for {
		name, ok := p.name()
		if !ok {
			return false
		}
		var bit uint16
		switch name {
		case "model":
			bit = 1 << 0
			o.Model, ok = p.optStr(func(b *taskBlock) *string { return &b.model })
		case "effort":
			bit = 1 << 1
			o.Effort, ok = p.optStr(func(b *taskBlock) *string { return &b.effort })
		case "extra_prompt":
			bit = 1 << 2
			o.ExtraPrompt, ok = p.optStr(func(b *taskBlock) *string { return &b.extra })
		case "tools":
			bit = 1 << 3
			o.Tools, ok = p.strList(elemTool)
		case "permissions":
			bit = 1 << 4
			switch p.peek() {
			case 'n':
				ok = p.lit("null")
			case '{':
				blk := p.block()
				o.Permissions = &blk.perm
				ok = p.permissions(&blk.perm)
			default:
				ok = false
			}
		case "yolo":
			bit = 1 << 5
			o.Yolo, ok = p.optBool(func(b *taskBlock) *bool { return &b.yolo })
		case "bypass":
			bit = 1 << 6
			o.Bypass, ok = p.optBool(func(b *taskBlock) *bool { return &b.bypass })
		case "fast_mode":
			bit = 1 << 7
			o.FastMode, ok = p.optBool(func(b *taskBlock) *bool { return &b.fastMode })
		case "lion_system":
			bit = 1 << 8
			o.LionSystem, ok = p.optBool(func(b *taskBlock) *bool { return &b.lionSystem })
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		more, ok := p.more('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

func (p *fastParser) permissions(pp *resolve.PermissionPolicy) bool {
	p.i++ // '{'
	if p.peek() == '}' {
		p.i++
		return true
	}
	var seen uint8
	for {
		name, ok := p.name()
		if !ok {
			return false
		}
		var bit uint8
		switch name {
		case "mode":
			bit = 1 << 0
			var s string
			s, ok = p.str()
			pp.Mode = resolve.PermissionMode(s)
		case "allow":
			bit = 1 << 1
			pp.Allow, ok = p.ruleMap()
		case "deny":
			bit = 1 << 2
			pp.Deny, ok = p.ruleMap()
		case "escalate":
			bit = 1 << 3
			pp.Escalate, ok = p.ruleMap()
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		more, ok := p.more('}')
		if !ok {
			return false
		}
		if !more {
			return true
		}
	}
}

// ruleMap reads null (a nil map) or an object of pattern lists. A null
// list (which the slow path drops), a repeated tool name and any entry
// checkRules would reject are declined.
func (p *fastParser) ruleMap() (map[string][]string, bool) {
	switch p.peek() {
	case 'n':
		return nil, p.lit("null")
	case '{':
		p.i++
	default:
		return nil, false
	}
	m := map[string][]string{}
	if p.peek() == '}' {
		p.i++
		return m, true
	}
	for {
		key, ok := p.str()
		if !ok || badValue(key) || !p.consume(':') || p.peek() != '[' {
			return nil, false
		}
		pats, ok := p.strList(elemPattern)
		if !ok {
			return nil, false
		}
		n := len(m)
		if m[key] = pats; len(m) == n {
			return nil, false // a repeated name
		}
		more, ok := p.more('}')
		if !ok {
			return nil, false
		}
		if !more {
			return m, true
		}
	}
}

// taskOK reports whether validateTask accepts the task (it is
// validateTask's success condition, without building errors; the list
// elements and permission maps were checked as they were read), and
// returns the parsed role.
func taskOK(t *Task) (resolve.RoleRef, bool) {
	if validTaskID(t.TaskID) != "" || t.Role == "" {
		return nil, false
	}
	ref, err := resolve.ParseRoleToken(t.Role)
	if err != nil || !nameOK("pack", t.Pack) || !nameOK("profile", t.Profile) {
		return nil, false
	}
	if o := t.Override; o != nil {
		if !valueOK(o.Model) || !valueOK(o.Effort) {
			return nil, false
		}
		if pp := o.Permissions; pp != nil {
			switch pp.Mode {
			case resolve.PermissionAllowAll, resolve.PermissionDenyAll, resolve.PermissionRules:
			default:
				return nil, false
			}
		}
	}
	return ref, true
}

func nameOK(field string, v *string) bool {
	return v == nil || *v != "" && resolve.ValidateName(field, *v) == nil
}

func valueOK(v *string) bool { return v == nil || !badValue(*v) }

// badValue is valueProblem(v) != "".
func badValue(v string) bool {
	return v == "" || len(v) > MaxValueLen && utf8.RuneCountInString(v) > MaxValueLen || !noControl(v)
}
