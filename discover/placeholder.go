package discover

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

// MaxPlaceholderFile bounds a file that ${file:…} reads (64 KiB).
const MaxPlaceholderFile = 64 << 10

// Placeholder kinds.
const (
	PlaceholderEnv  = "env"
	PlaceholderFile = "file"
)

// Placeholder is one ${env:NAME} or ${file:PATH} that a file of the
// snapshot used. It never holds the value: an environment variable is
// named only, and a file is named with the sha256 of its bytes.
type Placeholder struct {
	Kind string `json:"kind"` // PlaceholderEnv or PlaceholderFile
	// Name is the variable name, or the file's path relative to the
	// config root.
	Name string `json:"name"`
	// Origin is where the placeholder is written.
	Origin Origin `json:"origin"`
	// Digest is "sha256:…" of the file's bytes; "" for env.
	Digest string `json:"digest,omitzero"`
}

// envNameRE is the grammar of a name in ${env:NAME}.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expander resolves placeholders for one load: each file is read once
// (the result, or its failure, is kept), and every read path is recorded so
// the snapshot's digest and change detection cover it.
type expander struct {
	allow     []string // env name globs from rolecall.yaml placeholders.env
	lookupEnv func(string) (string, bool)
	// read reads a file relative to the config root; nil when there is no
	// root (embedded content, decoder tests).
	read  func(rel string) ([]byte, *Error)
	files map[string]fileRead
}

type fileRead struct {
	data []byte
	err  *Error // from the read, with File the target's path
}

// expansion is what one string expands to, and what it used.
type expansion struct {
	value  string
	tokens []string      // the placeholders, as written, for messages
	used   []Placeholder // in order
}

// expand resolves the placeholders of s, written at file:line under key.
// code is the file's own code for a malformed placeholder (pack_invalid,
// config_invalid). Expansion is single-pass: what a placeholder yields is
// never expanded again.
func (x *expander) expand(s, file string, line int, key string, code resolve.Code) (expansion, *Error) {
	var out expansion
	if !strings.Contains(s, "${") {
		out.value = s
		return out, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
			continue
		case !strings.HasPrefix(s[i:], "${"):
			b.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return out, placeholderErr(code, file, line, key, printable(s[i:]), "is not closed with }; write $${ for a literal ${")
		}
		token := s[i : i+end+1]
		inner := token[2 : len(token)-1]
		i += end + 1
		kind, name, _ := strings.Cut(inner, ":")
		origin := Origin{File: file, Line: line}
		switch kind {
		case PlaceholderEnv:
			if !envNameRE.MatchString(name) {
				return out, placeholderErr(code, file, line, key, printable(token), "names no environment variable (letters, digits and _, not starting with a digit)")
			}
			v, err := x.env(name, token, file, line, key)
			if err != nil {
				return out, err
			}
			b.WriteString(v)
			out.used = append(out.used, Placeholder{Kind: PlaceholderEnv, Name: name, Origin: origin})
		case PlaceholderFile:
			rel, err := placeholderPath(name, token, file, line, key, code)
			if err != nil {
				return out, err
			}
			data, err := x.file(rel, token, file, line, key)
			if err != nil {
				return out, err
			}
			b.WriteString(trimNewline(string(data)))
			out.used = append(out.used, Placeholder{Kind: PlaceholderFile, Name: rel, Origin: origin, Digest: bytesDigest(data)})
		default:
			return out, placeholderErr(code, file, line, key, printable(token), "is not a placeholder (${env:NAME} or ${file:PATH}); write $${ for a literal ${")
		}
		out.tokens = append(out.tokens, token)
	}
	out.value = b.String()
	return out, nil
}

// env looks name up when the allowlist admits it.
func (x *expander) env(name, token, file string, line int, key string) (string, *Error) {
	allowed := slices.ContainsFunc(x.allow, func(g string) bool {
		ok, _ := path.Match(g, name)
		return ok
	})
	if !allowed {
		list := "none"
		if len(x.allow) > 0 {
			list = strings.Join(x.allow, ", ")
		}
		return "", placeholderErr(resolve.CodePlaceholderForbidden, file, line, key, token,
			fmt.Sprintf("environment variable %s is not allowed by rolecall.yaml placeholders.env (allowed: %s)", name, list))
	}
	lookup := x.lookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(name)
	if !ok {
		return "", placeholderErr(resolve.CodePlaceholderUnresolved, file, line, key, token, fmt.Sprintf("environment variable %s is not set", name))
	}
	if _, msg := checkText([]byte(v)); msg != "" {
		return "", placeholderErr(resolve.CodePlaceholderUnresolved, file, line, key, token,
			fmt.Sprintf("environment variable %s holds text that is not allowed (%s)", name, msg))
	}
	return v, nil
}

// placeholderPath checks a ${file:…} path: relative, inside the root,
// slash-separated.
func placeholderPath(p, token, file string, line int, key string, code resolve.Code) (string, *Error) {
	if p == "" {
		return "", placeholderErr(code, file, line, key, token, "names no file")
	}
	if !insideRoot(p) {
		return "", placeholderErr(resolve.CodePathEscape, file, line, key, printable(token), "leaves the config root (the path must be relative, without ..)")
	}
	return path.Clean(p), nil
}

// file reads rel once per load.
func (x *expander) file(rel, token, file string, line int, key string) ([]byte, *Error) {
	r, ok := x.files[rel]
	if !ok {
		if x.read == nil {
			r.err = &Error{Code: resolve.CodePlaceholderUnresolved, File: rel, Message: "cannot be read here: there is no config root"}
		} else {
			r.data, r.err = x.read(rel)
		}
		if r.err == nil {
			if l, msg := checkText(r.data); msg != "" {
				r.err = &Error{Code: resolve.CodePlaceholderUnresolved, File: rel, Line: l, Message: "is not text: " + msg}
			}
		}
		if x.files == nil {
			x.files = map[string]fileRead{}
		}
		x.files[rel] = r
	}
	if r.err != nil {
		code := r.err.Code
		if code != resolve.CodePathEscape {
			code = resolve.CodePlaceholderUnresolved
		}
		where := r.err.File
		if r.err.Line > 0 {
			where = fmt.Sprintf("%s:%d", where, r.err.Line)
		}
		return nil, placeholderErr(code, file, line, key, token, fmt.Sprintf("%s %s", where, r.err.Message))
	}
	return r.data, nil
}

// placeholderErr is an error at the placeholder's own file and line; its
// details name the placeholder as written, never its value.
func placeholderErr(code resolve.Code, file string, line int, key, token, msg string) *Error {
	prefix := ""
	if key != "" {
		prefix = fmt.Sprintf("key %q: ", key)
	}
	return &Error{
		Code: code, File: file, Line: line, Key: key,
		Message: fmt.Sprintf("%splaceholder %s: %s", prefix, token, msg),
		Extra:   map[string]any{"placeholder": token},
	}
}

// trimNewline drops one trailing line end (LF or CRLF).
func trimNewline(s string) string {
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		return strings.TrimSuffix(t, "\r")
	}
	return s
}

func bytesDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return resolve.DigestPrefix + hex.EncodeToString(sum[:])
}

// printable bounds a piece of a file quoted back in a message.
func printable(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

var verbRE = regexp.MustCompile(`%[-+# 0-9.*\[\]]*[a-zA-Z]`)

// maskVerbs turns a message format into one with no arguments: each verb
// becomes "…". It is how an error about a placeholder's value keeps its
// rule ("must be true or false, got …") without the value.
func maskVerbs(format string) string {
	return verbRE.ReplaceAllStringFunc(format, func(v string) string { return "…" })
}

// expandTree copies n (a document of file, decoded with code) with every
// string value's placeholders resolved, recording in o where each copied
// node was written and which placeholder produced it. Keys are never
// expanded; neither is any value under a key for which skip returns true
// (at the top level) nor under a $-key (composition controls). The input
// is not modified.
func (x *expander) expandTree(n *yaml.Node, file string, code resolve.Code, o *nodeOrigins, skip func(key string) bool) (*yaml.Node, []Placeholder, *Error) {
	var used []Placeholder
	var walk func(n *yaml.Node, key string, raw bool, top bool) (*yaml.Node, *Error)
	walk = func(n *yaml.Node, key string, raw, top bool) (*yaml.Node, *Error) {
		c := *n
		c.Content = nil
		cp := &c
		o.files[cp] = file
		switch n.Kind {
		case yaml.ScalarNode:
			if raw || n.Tag != "!!str" || !strings.Contains(n.Value, "$") {
				return cp, nil
			}
			e, err := x.expand(n.Value, file, n.Line, key, code)
			if err != nil {
				return nil, err
			}
			cp.Value = e.value
			if len(e.tokens) > 0 {
				o.expanded[cp] = strings.Join(e.tokens, " ")
				used = append(used, e.used...)
			}
			return cp, nil
		case yaml.MappingNode:
			cp.Content = make([]*yaml.Node, 0, len(n.Content))
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				kc := *k
				kc.Content = nil
				o.files[&kc] = file
				childRaw := raw || strings.HasPrefix(k.Value, "$") || (top && skip != nil && skip(k.Value))
				vc, err := walk(v, join(key, k.Value), childRaw, false)
				if err != nil {
					return nil, err
				}
				cp.Content = append(cp.Content, &kc, vc)
			}
			return cp, nil
		default:
			cp.Content = make([]*yaml.Node, 0, len(n.Content))
			for i, v := range n.Content {
				vc, err := walk(v, fmt.Sprintf("%s[%d]", key, i), raw, false)
				if err != nil {
					return nil, err
				}
				cp.Content = append(cp.Content, vc)
			}
			return cp, nil
		}
	}
	out, err := walk(n, "", false, true)
	if err != nil {
		return nil, nil, err
	}
	return out, used, nil
}

// masked is a value a placeholder produced and the placeholder as written.
type masked struct{ value, token string }

// masks are the values placeholders gave a composed file, longest first
// (so a value inside another is masked after it).
type masks []masked

// expandedValues lists the values placeholders produced in a tree.
func expandedValues(o *nodeOrigins, n *yaml.Node) masks {
	var out masks
	eachNode(n, func(n *yaml.Node) {
		if t, ok := o.expanded[n]; ok && n.Value != "" {
			out = append(out, masked{n.Value, t})
		}
	})
	slices.SortStableFunc(out, func(a, b masked) int { return len(b.value) - len(a.value) })
	return out
}

// apply replaces in msg every value a placeholder gave by the placeholder
// as written. A problem found after decoding (by the resolver, or a name
// that names nothing) can quote a value, and a placeholder's value is
// never reported.
func (ms masks) apply(msg string) string {
	for _, m := range ms {
		msg = strings.ReplaceAll(msg, strconv.Quote(m.value), m.token)
		msg = strings.ReplaceAll(msg, m.value, m.token)
	}
	return msg
}

// mask applies ms to e's message and subject, on a copy.
func (ms masks) mask(e *Error) *Error {
	if len(ms) == 0 || e == nil {
		return e
	}
	c := *e
	c.Message, c.Subject = ms.apply(c.Message), ms.apply(c.Subject)
	return &c
}
