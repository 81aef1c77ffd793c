package discover

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

// ydoc decodes one YAML text strictly. The text is parsed into a yaml.Node
// tree and walked by hand, so every rule (unknown keys, duplicate keys,
// exact types, no aliases) is ours and every error carries a line.
type ydoc struct {
	path string       // display path of the file
	code resolve.Code // the code of every error from this file
	off  int          // lines of the file before the YAML text
	// origins, when set, is a composed tree's record of where its nodes
	// were written (a pack and its mixins): errors name that file and mask
	// values that placeholders produced.
	origins *nodeOrigins
}

func (d *ydoc) errLine(line int, key, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if key != "" {
		msg = fmt.Sprintf("key %q: %s", key, msg)
	}
	return &Error{Code: d.code, File: d.path, Line: line, Key: key, Message: msg}
}

func (d *ydoc) errAt(n *yaml.Node, key, format string, args ...any) *Error {
	line := 0
	if n != nil && n.Line > 0 {
		line = n.Line + d.off
	}
	if d.origins == nil || n == nil {
		return d.errLine(line, key, format, args...)
	}
	if token, ok := d.origins.expanded[n]; ok {
		// The value came from a placeholder: the message names the
		// placeholder and keeps the rule, never the value.
		format, args = "the value of %s is refused: "+maskVerbs(format), []any{token}
	}
	e := d.errLine(line, key, format, args...)
	if f, ok := d.origins.files[n]; ok {
		e.File = f
	}
	return e
}

// checkText refuses invalid UTF-8 and control characters other than tab,
// LF and CR, naming the line. Every file is checked before it is parsed:
// the events carry its text as JSON, and the YAML parser's own errors for
// these cases carry no line.
func checkText(data []byte) (line int, msg string) {
	line = 1
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n':
				line++
			case c == '\t' || c == '\r':
			case c < 0x20 || c == 0x7f:
				return line, fmt.Sprintf("control character %U is not allowed", rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size == 1 {
			return line, "the file is not valid UTF-8"
		}
		i += size
	}
	return 0, ""
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parse returns the document's root node, or nil for an empty document.
// It refuses syntax errors, a second document, anchors, aliases and
// non-standard tags.
func (d *ydoc) parse(data []byte) (*yaml.Node, *Error) {
	if line, msg := checkText(data); msg != "" {
		return nil, d.errLine(line+d.off, "", "%s", msg)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, d.syntax(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, d.syntax(err)
	default:
		return nil, d.errAt(&next, "", "a second YAML document starts here; only one is allowed")
	}
	if len(doc.Content) != 1 {
		return nil, nil
	}
	root := doc.Content[0]
	if err := d.check(root, 0); err != nil {
		return nil, err
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	return root, nil
}

func (d *ydoc) syntax(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		line += d.off
	}
	return d.errLine(line, "", "invalid YAML: %s", msg)
}

// maxDepth bounds nesting; the parser has its own, larger limit.
const maxDepth = 100

var allowedTags = map[string]bool{
	"!!str": true, "!!int": true, "!!bool": true, "!!float": true,
	"!!null": true, "!!timestamp": true, "!!map": true, "!!seq": true,
}

// check rejects anchors and aliases outright (no billion-laughs expansion
// can happen because nothing is ever expanded), and tags outside YAML's
// core schema.
func (d *ydoc) check(n *yaml.Node, depth int) *Error {
	if depth > maxDepth {
		return d.errAt(n, "", "nesting is deeper than %d levels", maxDepth)
	}
	if n.Kind == yaml.AliasNode {
		return d.errAt(n, "", "YAML aliases (*%s) are not allowed", n.Value)
	}
	if n.Anchor != "" {
		return d.errAt(n, "", "YAML anchors (&%s) are not allowed", n.Anchor)
	}
	if !allowedTags[n.Tag] && !(n.Tag == "!!merge" && n.Kind == yaml.ScalarNode) {
		return d.errAt(n, "", "YAML tag %q is not allowed", n.Tag)
	}
	for _, c := range n.Content {
		if err := d.check(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// pair is one key of a mapping.
type pair struct {
	key  string
	k, v *yaml.Node
}

// pairs returns a mapping's keys in order, refusing non-mappings,
// non-string keys, empty keys and duplicates.
func (d *ydoc) pairs(n *yaml.Node, path string) ([]pair, *Error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errAt(n, path, "must be a mapping, got %s", describeNode(n))
	}
	out := make([]pair, 0, len(n.Content)/2)
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag != "!!str" {
			if k.Tag == "!!merge" {
				return nil, d.errAt(k, path, "merge keys (<<) are not allowed")
			}
			return nil, d.errAt(k, path, "every key must be a string, got %s", describeNode(k))
		}
		if k.Value == "" {
			return nil, d.errAt(k, path, "empty key")
		}
		if first, dup := seen[k.Value]; dup {
			return nil, d.errAt(k, join(path, k.Value), "duplicate key (first at line %d)", first)
		}
		seen[k.Value] = k.Line + d.off
		out = append(out, pair{key: k.Value, k: k, v: v})
	}
	return out, nil
}

// fields walks a struct-like mapping: each known key goes to fn, x- keys
// go to ext (when ext is non-nil), anything else is an unknown key. A null
// value is treated as absent and not passed to fn.
func (d *ydoc) fields(n *yaml.Node, path string, known []string, ext *map[string]any, lines map[string]int, fn func(p pair, key string) *Error) *Error {
	ps, err := d.pairs(n, path)
	if err != nil {
		return err
	}
	for _, p := range ps {
		key := join(path, p.key)
		if ext != nil && strings.HasPrefix(p.key, "x-") {
			v, err := d.anyValue(p.v, key, 0)
			if err != nil {
				return err
			}
			if *ext == nil {
				*ext = map[string]any{}
			}
			(*ext)[p.key] = v
			continue
		}
		if !slices.Contains(known, p.key) {
			return d.errAt(p.k, key, "unknown key (allowed: %s)", strings.Join(known, ", "))
		}
		if isNull(p.v) {
			continue
		}
		if lines != nil {
			lines[key] = p.k.Line + d.off
		}
		if err := fn(p, key); err != nil {
			return err
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// eachNode calls fn on n and on every node below it.
func eachNode(n *yaml.Node, fn func(*yaml.Node)) {
	fn(n)
	for _, c := range n.Content {
		eachNode(c, fn)
	}
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "null"
		}
		kind := cmp.Or(map[string]string{
			"!!str": "string", "!!int": "integer", "!!bool": "boolean", "!!float": "number",
			"!!timestamp": "timestamp", "!!merge": "merge key",
		}[n.Tag], n.Tag)
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return fmt.Sprintf("%s %q", kind, v)
	default:
		return "an unexpected node"
	}
}

// str decodes a required non-blank string.
func (d *ydoc) str(n *yaml.Node, key string) (string, *Error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", d.errAt(n, key, "must be a string, got %s (quote it if it is meant as text)", describeNode(n))
	}
	if strings.TrimSpace(n.Value) == "" {
		return "", d.errAt(n, key, "must not be empty")
	}
	return n.Value, nil
}

// name decodes a string that must pass resolve.ValidateName.
func (d *ydoc) name(n *yaml.Node, key string) (string, *Error) {
	s, err := d.str(n, key)
	if err != nil {
		return "", err
	}
	if verr := resolve.ValidateName(key, s); verr != nil {
		return "", d.errAt(n, key, "invalid name: %s", nameMsg(verr))
	}
	return s, nil
}

// nameMsg strips the field prefix ValidateName puts in its message.
func nameMsg(err error) string {
	var re *resolve.ResolutionError
	if errors.As(err, &re) {
		return strings.TrimPrefix(re.Message, re.Subject+" ")
	}
	return err.Error()
}

func (d *ydoc) boolean(n *yaml.Node, key string) (bool, *Error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		return false, d.errAt(n, key, "must be true or false, got %s", describeNode(n))
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, d.errAt(n, key, "must be true or false: %v", err)
	}
	return b, nil
}

// opt turns a decoded value into an optional one, for fields where
// absent (nil) and written differ: opt(d.boolean(n, key)).
func opt[T any](v T, err *Error) (*T, *Error) {
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// positive decodes a positive integer (a bool, string or float is refused).
func (d *ydoc) positive(n *yaml.Node, key string) (int, *Error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, d.errAt(n, key, "must be a positive integer, got %s", describeNode(n))
	}
	var i int
	if err := n.Decode(&i); err != nil {
		return 0, d.errAt(n, key, "must be a positive integer that fits in %d bits", strconv.IntSize)
	}
	if i <= 0 {
		return 0, d.errAt(n, key, "must be a positive integer, got %d", i)
	}
	return i, nil
}

// duration decodes a positive Go duration string such as "30s".
func (d *ydoc) duration(n *yaml.Node, key string) (time.Duration, *Error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return 0, d.errAt(n, key, `must be a duration string such as "30s", got %s`, describeNode(n))
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, d.errAt(n, key, `must be a duration string such as "30s": %q does not parse`, n.Value)
	}
	if v <= 0 {
		return 0, d.errAt(n, key, "must be a positive duration, got %s", n.Value)
	}
	return v, nil
}

// list decodes a sequence; an explicit [] gives a non-nil empty slice, so
// absent and empty stay distinct.
func (d *ydoc) list(n *yaml.Node, key string, item func(n *yaml.Node, key string) (string, *Error)) ([]string, *Error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errAt(n, key, "must be a list, got %s", describeNode(n))
	}
	out := make([]string, 0, len(n.Content))
	for i, c := range n.Content {
		s, err := item(c, fmt.Sprintf("%s[%d]", key, i))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (d *ydoc) names(n *yaml.Node, key string) ([]string, *Error) { return d.list(n, key, d.name) }
func (d *ydoc) strs(n *yaml.Node, key string) ([]string, *Error)  { return d.list(n, key, d.str) }

// mapping decodes a JSON-like mapping (artifact_defaults).
func (d *ydoc) mapping(n *yaml.Node, key string) (map[string]any, *Error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.errAt(n, key, "must be a mapping, got %s", describeNode(n))
	}
	v, err := d.anyValue(n, key, 0)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// anyValue converts a node to the JSON-like values of the resolver's
// mappings: map[string]any, []any, string, bool, int, float64, nil.
// Timestamps stay strings; non-finite numbers are refused because the
// events carry these values as JSON.
func (d *ydoc) anyValue(n *yaml.Node, key string, depth int) (any, *Error) {
	if depth > maxDepth {
		return nil, d.errAt(n, key, "nesting is deeper than %d levels", maxDepth)
	}
	switch n.Kind {
	case yaml.MappingNode:
		ps, err := d.pairs(n, key)
		if err != nil {
			return nil, err
		}
		m := make(map[string]any, len(ps))
		for _, p := range ps {
			v, err := d.anyValue(p.v, join(key, p.key), depth+1)
			if err != nil {
				return nil, err
			}
			m[p.key] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := d.anyValue(c, fmt.Sprintf("%s[%d]", key, i), depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!str", "!!timestamp":
			return n.Value, nil
		case "!!bool":
			return d.boolean(n, key)
		case "!!int":
			var i int
			if err := n.Decode(&i); err == nil {
				return i, nil
			}
			fallthrough
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, d.errAt(n, key, "invalid number %q", n.Value)
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, d.errAt(n, key, "non-finite number %q is not allowed", n.Value)
			}
			return f, nil
		}
	}
	return nil, d.errAt(n, key, "unsupported value %s", describeNode(n))
}

// policy decodes a permission policy: mode plus allow/deny/escalate maps
// from tool name to doublestar glob patterns.
func (d *ydoc) policy(n *yaml.Node, path string, lines map[string]int) (*resolve.PermissionPolicy, *Error) {
	p := &resolve.PermissionPolicy{}
	hasMode := false
	err := d.fields(n, path, []string{"mode", "allow", "deny", "escalate"}, nil, lines, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "mode":
			var s string
			if s, err = d.str(f.v, key); err != nil {
				return err
			}
			switch m := resolve.PermissionMode(s); m {
			case resolve.PermissionAllowAll, resolve.PermissionDenyAll, resolve.PermissionRules:
				p.Mode, hasMode = m, true
			default:
				err = d.errAt(f.v, key, "must be one of allow_all, deny_all, rules; got %q", s)
			}
		case "allow":
			p.Allow, err = d.rules(f.v, key)
		case "deny":
			p.Deny, err = d.rules(f.v, key)
		case "escalate":
			p.Escalate, err = d.rules(f.v, key)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !hasMode {
		return nil, d.errLine(lines[path], join(path, "mode"), "is required in a permission policy (allow_all, deny_all or rules)")
	}
	return p, nil
}

func (d *ydoc) rules(n *yaml.Node, key string) (map[string][]string, *Error) {
	ps, err := d.pairs(n, key)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]string, len(ps))
	for _, p := range ps {
		k := join(key, p.key)
		if err := d.unsafe(p.k, k, p.key); err != nil {
			return nil, err
		}
		pats, err := d.list(p.v, k, func(n *yaml.Node, key string) (string, *Error) {
			s, err := d.ident(n, key)
			if err != nil {
				return "", err
			}
			if !doublestar.ValidatePattern(s) {
				return "", d.errAt(n, key, "invalid glob pattern %q", s)
			}
			return s, nil
		})
		if err != nil {
			return nil, err
		}
		out[p.key] = pats
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
