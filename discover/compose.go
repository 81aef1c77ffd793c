package discover

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

// Pack composition (docs/CONFIG.md, "Pack composition"): a pack may extend
// others; mixins are linearized depth-first, left to right, post-order, each
// applied once at its first position, then the pack's own content, later
// winning. Mappings merge deep unless a $merge policy says shallow; lists
// and scalars replace. Everything here works on copies of parsed YAML
// trees: the composed tree is decoded by the same strict rules as a single
// file, and every node remembers the file it was written in.

// MaxExtendsDepth bounds a chain of extends: a pack may extend a pack that
// extends a pack… at most this many times.
const MaxExtendsDepth = 8

// Merge policies of $merge.
const (
	mergeDeep    = "deep"
	mergeShallow = "shallow"
)

// mergeKey is the one $-key composition reads.
const mergeKey = "$merge"

// FileDigest names a file a pack was composed from and the sha256 of its
// bytes.
type FileDigest struct {
	File   string `json:"file"`
	Digest string `json:"digest"`
}

// nodeOrigins records, for every node of the trees one load composes, the
// file it was written in and, for a scalar a placeholder produced, the
// placeholder as written (so errors can name it instead of the value).
type nodeOrigins struct {
	files    map[*yaml.Node]string
	expanded map[*yaml.Node]string
}

func newNodeOrigins() *nodeOrigins {
	return &nodeOrigins{files: map[*yaml.Node]string{}, expanded: map[*yaml.Node]string{}}
}

// packSource is one pack file read, parsed and expanded: a layer of
// composition. root is the expanded copy (nil for an empty file); the
// parse tree itself is never changed.
type packSource struct {
	name    string
	path    string
	data    []byte
	root    *yaml.Node
	extends []mixinRef
	used    []Placeholder
	err     *Error // reading, parsing or expanding failed
}

// mixinRef is one name in extends and the line it is written on.
type mixinRef struct {
	name string
	line int
}

// prepareSource parses one pack file, reads its extends list as written and
// expands the placeholders of its other values.
func prepareSource(name, path string, data []byte, x *expander, o *nodeOrigins) *packSource {
	src := &packSource{name: name, path: path, data: data}
	code := resolve.CodePackInvalid
	if err := resolve.ValidateName("pack", name); err != nil {
		return src.fail(&Error{Code: code, File: path, Line: 1, Message: "the file name is not a valid pack name: " + nameMsg(err)})
	}
	d := &ydoc{path: path, code: code}
	root, err := d.parse(data)
	if err != nil {
		return src.fail(err)
	}
	return src.prepare(d, root, x, o)
}

// fail records e, naming the pack, as src's error.
func (src *packSource) fail(e *Error) *packSource {
	e.Subject = src.name
	src.err = e
	return src
}

// prepare reads a parsed pack document (nil when empty): its extends list
// as written, then a copy with the placeholders of its other values
// resolved.
func (src *packSource) prepare(d *ydoc, root *yaml.Node, x *expander, o *nodeOrigins) *packSource {
	if root == nil {
		return src
	}
	ps, err := d.pairs(root, "")
	if err != nil {
		return src.fail(err)
	}
	for _, p := range ps {
		if p.key != "extends" || isNull(p.v) {
			continue
		}
		if src.extends, err = d.extends(p.v, p.key); err != nil {
			return src.fail(err)
		}
	}
	skip := func(k string) bool { return k == "extends" || k == "name" }
	src.root, src.used, err = x.expandTree(root, src.path, d.code, o, skip)
	if err != nil {
		return src.fail(err)
	}
	return src
}

// extends decodes the list of mixin names.
func (d *ydoc) extends(n *yaml.Node, key string) ([]mixinRef, *Error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.errAt(n, key, "must be a list of pack names, got %s", describeNode(n))
	}
	out := make([]mixinRef, 0, len(n.Content))
	for i, c := range n.Content {
		k := fmt.Sprintf("%s[%d]", key, i)
		s, err := d.str(c, k)
		if err != nil {
			return nil, err
		}
		if verr := resolve.ValidateName("pack", s); verr != nil {
			return nil, d.errAt(c, k, "invalid pack name: %s", nameMsg(verr))
		}
		if slices.ContainsFunc(out, func(m mixinRef) bool { return m.name == s }) {
			return nil, d.errAt(c, k, "%q is listed twice", s)
		}
		out = append(out, mixinRef{name: s, line: c.Line + d.off})
	}
	return out, nil
}

// composer composes the packs of one load.
type composer struct {
	o *nodeOrigins
	// lookup finds the pack a mixin name means inside from (nil: none).
	lookup func(from *packSource, name string) *packSource
	// reused holds the trees taken from the previous load whose nodes are
	// not yet in o; compose adds each before it reads it.
	reused map[*packSource]bool
}

// linearize orders src's mixins: depth-first, left to right, post-order,
// each once at its first position; src comes last.
func (c *composer) linearize(src *packSource) ([]*packSource, *Error) {
	var (
		order []*packSource
		stack []*packSource
		done  = map[*packSource]bool{}
	)
	var visit func(p, from *packSource, via mixinRef) *Error
	visit = func(p, from *packSource, via mixinRef) *Error {
		if i := slices.Index(stack, p); i >= 0 {
			cycle := chainNames(stack[i:], p)
			return &Error{
				Code: resolve.CodePackInvalid, File: from.path, Line: via.line, Key: "extends", Subject: src.name,
				Message: fmt.Sprintf("extends makes a cycle: %s", strings.Join(cycle, " → ")),
				Extra:   map[string]any{"cycle": cycle},
			}
		}
		if done[p] {
			return nil
		}
		if len(stack) > MaxExtendsDepth {
			chain := chainNames(stack, p)
			return &Error{
				Code: resolve.CodePackInvalid, File: from.path, Line: via.line, Key: "extends", Subject: src.name,
				Message: fmt.Sprintf("extends is nested deeper than %d levels: %s", MaxExtendsDepth, strings.Join(chain, " → ")),
				Extra:   map[string]any{"chain": chain},
			}
		}
		if p.err != nil && p != src {
			return brokenMixin(src, p.name, fmt.Sprintf("%s:%d", from.path, via.line), p.err)
		}
		stack = append(stack, p)
		for _, m := range p.extends {
			q := c.lookup(p, m.name)
			if q == nil {
				return &Error{
					Code: resolve.CodePackNotFound, File: p.path, Line: m.line, Key: "extends", Subject: m.name,
					Message: fmt.Sprintf("pack %q extends %q, which does not exist", p.name, m.name),
				}
			}
			if err := visit(q, p, m); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		done[p] = true
		order = append(order, p)
		return nil
	}
	if err := visit(src, nil, mixinRef{}); err != nil {
		return nil, err
	}
	return order, nil
}

// chainNames lists the names of an extends chain and of the pack it reaches.
func chainNames(chain []*packSource, last *packSource) []string {
	names := make([]string, 0, len(chain)+1)
	for _, q := range chain {
		names = append(names, q.name)
	}
	return append(names, last.name)
}

// brokenMixin is the error of a pack that extends a broken one (at is
// where the extends entry that reached it is written, when known): the
// cause's code, file, line and key, so the failure points at the text to
// fix.
func brokenMixin(src *packSource, mixin, at string, cause *Error) *Error {
	e := *cause
	e.Subject = src.name
	via := ""
	if at != "" {
		via = " (" + at + ")"
	}
	e.Message = fmt.Sprintf("pack %q extends %q%s, which is broken: %s", src.name, mixin, via, cause.Message)
	e.Paths = []string{src.path, cause.File}
	return &e
}

// compose merges src's linearization into one tree. The result holds no
// extends and no $-key; only src's own name is kept. The linearization is
// returned when it succeeded, even if merging then failed.
func (c *composer) compose(src *packSource) (*yaml.Node, []*packSource, *Error) {
	layers, err := c.linearize(src)
	if err != nil {
		return nil, nil, err
	}
	d := &ydoc{path: src.path, code: resolve.CodePackInvalid, origins: c.o}
	var acc *yaml.Node
	for _, l := range layers {
		if l.root == nil {
			continue
		}
		if c.reused[l] {
			l.addOrigins(c.o)
			delete(c.reused, l)
		}
		own := l == src
		skip := func(k string) bool { return k == "extends" || (k == "name" && !own) }
		if acc, err = mergeNodes(d, acc, l.root, "", skip); err != nil {
			err.Subject = src.name
			return nil, layers, err
		}
	}
	if acc != nil {
		if err := noDollarInLists(d, acc, "", false); err != nil {
			err.Subject = src.name
			return nil, layers, err
		}
	}
	return acc, layers, nil
}

// mergeNodes returns over merged onto base under the merge policy: a
// mapping over a mapping merges key by key (deep unless over's $merge says
// shallow for that key); anything else replaces. over may carry $merge
// (read, checked and dropped); base never does (it is a result of this
// function). Neither is modified: changed mappings are new nodes, and
// scalars and lists are shared. skip drops over's top-level keys it
// returns true for.
func mergeNodes(d *ydoc, base, over *yaml.Node, path string, skip func(string) bool) (*yaml.Node, *Error) {
	if over.Kind != yaml.MappingNode {
		return over, nil
	}
	ps, err := d.pairs(over, path)
	if err != nil {
		return nil, err
	}
	shallow := map[string]bool{}
	var own []pair
	for _, p := range ps {
		switch {
		case p.key == mergeKey:
			if shallow, err = mergePolicy(d, p, ps, path); err != nil {
				return nil, err
			}
		case strings.HasPrefix(p.key, "$"):
			return nil, d.errAt(p.k, join(path, p.key), "unknown $-key (the only one is %s)", mergeKey)
		case skip != nil && skip(p.key):
		default:
			own = append(own, p)
		}
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: over.Tag, Style: over.Style, Line: over.Line, Column: over.Column}
	if f, ok := d.origins.files[over]; ok {
		d.origins.files[out] = f
	}
	taken := make(map[string]bool, len(own))
	if base != nil && base.Kind == yaml.MappingNode {
		out.Content = make([]*yaml.Node, 0, len(base.Content)+2*len(own))
		for i := 0; i+1 < len(base.Content); i += 2 {
			bk, bv := base.Content[i], base.Content[i+1]
			j := slices.IndexFunc(own, func(p pair) bool { return p.key == bk.Value })
			if j < 0 {
				out.Content = append(out.Content, bk, bv)
				continue
			}
			p := own[j]
			taken[p.key] = true
			inherited := bv
			if shallow[p.key] {
				inherited = nil
			}
			v, err := mergeNodes(d, inherited, p.v, join(path, p.key), nil)
			if err != nil {
				return nil, err
			}
			out.Content = append(out.Content, p.k, v)
		}
	}
	for _, p := range own {
		if taken[p.key] {
			continue
		}
		v, err := mergeNodes(d, nil, p.v, join(path, p.key), nil)
		if err != nil {
			return nil, err
		}
		out.Content = append(out.Content, p.k, v)
	}
	return out, nil
}

// mergePolicy reads $merge: a mapping from keys of the same mapping to
// shallow or deep.
func mergePolicy(d *ydoc, m pair, siblings []pair, path string) (map[string]bool, *Error) {
	key := join(path, m.key)
	ps, err := d.pairs(m.v, key)
	if err != nil {
		return nil, err
	}
	shallow := make(map[string]bool, len(ps))
	for _, p := range ps {
		k := join(key, p.key)
		if p.v.Kind != yaml.ScalarNode || p.v.Tag != "!!str" || (p.v.Value != mergeShallow && p.v.Value != mergeDeep) {
			return nil, d.errAt(p.v, k, "must be %s or %s, got %s", mergeShallow, mergeDeep, describeNode(p.v))
		}
		if strings.HasPrefix(p.key, "$") || !slices.ContainsFunc(siblings, func(s pair) bool { return s.key == p.key }) {
			return nil, d.errAt(p.k, k, "names a key this mapping does not set")
		}
		shallow[p.key] = p.v.Value == mergeShallow
	}
	return shallow, nil
}

// noDollarInLists refuses $-keys in mappings inside lists: a list replaces
// whole and is never traversed, so a policy there could never apply.
func noDollarInLists(d *ydoc, n *yaml.Node, path string, inList bool) *Error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			key := join(path, k.Value)
			if inList && strings.HasPrefix(k.Value, "$") {
				return d.errAt(k, key, "$-keys are not read inside a list (a list replaces whole)")
			}
			if err := noDollarInLists(d, n.Content[i+1], key, inList); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := noDollarInLists(d, c, fmt.Sprintf("%s[%d]", path, i), true); err != nil {
				return err
			}
		}
	}
	return nil
}

// keyOrigins records where every key and list item of a composed tree is
// written, by dotted path ("roles.architect.variants[1].set.effort"). The
// values of x- keys are opaque and not listed. def is the file of a node
// the record lacks (none, in a composed tree).
func keyOrigins(o *nodeOrigins, def string, n *yaml.Node, path string, out map[string]Origin) {
	file := func(n *yaml.Node) string {
		if f, ok := o.files[n]; ok {
			return f
		}
		return def
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			key := join(path, k.Value)
			out[key] = Origin{File: file(k), Line: k.Line}
			if !strings.HasPrefix(k.Value, "x-") {
				keyOrigins(o, def, v, key, out)
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			key := fmt.Sprintf("%s[%d]", path, i)
			out[key] = Origin{File: file(c), Line: c.Line}
			keyOrigins(o, def, c, key, out)
		}
	}
}

// composedFiles lists the files a pack was composed from (its layers in
// linearization order, then each ${file:…} target once) and their digest:
// digestFiles over each file's path and digest.
func composedFiles(layers []*packSource) ([]FileDigest, []Placeholder, string) {
	files := make([]FileDigest, 0, len(layers))
	var used []Placeholder
	for _, l := range layers {
		files = append(files, FileDigest{File: l.path, Digest: bytesDigest(l.data)})
		used = append(used, l.used...)
	}
	for _, p := range used {
		if p.Kind == PlaceholderFile && !slices.ContainsFunc(files, func(f FileDigest) bool { return f.File == p.Name }) {
			files = append(files, FileDigest{File: p.Name, Digest: p.Digest})
		}
	}
	recs := make([]fileRec, len(files))
	for i, f := range files {
		recs[i] = fileRec{path: f.File, data: []byte(f.Digest)}
	}
	return files, used, digestFiles("rolecall.packfiles.v1", recs)
}
