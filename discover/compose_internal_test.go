package discover

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/resolve"
)

// The merge engine on its own: properties over generated YAML trees and a
// fuzz target over arbitrary documents.

// dump renders a tree with everything a merge could change: kinds, tags,
// values, positions, and the identity of every node.
func dump(n *yaml.Node) string {
	var b strings.Builder
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		fmt.Fprintf(&b, "%s%p k%d %s %q @%d:%d s%d [%d]\n", strings.Repeat(" ", depth), n, n.Kind, n.Tag, n.Value, n.Line, n.Column, n.Style, len(n.Content))
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	if n != nil {
		walk(n, 0)
	}
	return b.String()
}

// shape renders a tree without node identities: equal shapes are equal
// results.
func shape(n *yaml.Node) string {
	var b strings.Builder
	var walk func(n *yaml.Node, depth int)
	walk = func(n *yaml.Node, depth int) {
		fmt.Fprintf(&b, "%sk%d %s %q @%d:%d\n", strings.Repeat(" ", depth), n.Kind, n.Tag, n.Value, n.Line, n.Column)
		for _, c := range n.Content {
			walk(c, depth+1)
		}
	}
	if n != nil {
		walk(n, 0)
	}
	return b.String()
}

// genTree generates YAML mappings the way packs write them: a few keys,
// nested mappings, lists (of scalars and of mappings), scalars of several
// tags, and $merge policies naming keys of their mapping.
func genTree(t *rapid.T, line *int, depth int) *yaml.Node {
	*line++
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: *line, Column: depth*2 + 1}
	keys := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"roles", "architect", "model", "effort", "authority", "x-meta", "tags"}), 0, 4, rapid.ID).Draw(t, "keys")
	for _, k := range keys {
		*line++
		kn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: *line, Column: depth*2 + 1}
		var v *yaml.Node
		switch kind := rapid.IntRange(0, 9).Draw(t, "kind"); {
		case kind < 4 && depth < 3:
			v = genTree(t, line, depth+1)
		case kind < 6:
			v = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: *line, Column: depth*2 + 3}
			for range rapid.IntRange(0, 3).Draw(t, "items") {
				if depth < 3 && rapid.Bool().Draw(t, "mapItem") {
					v.Content = append(v.Content, genTree(t, line, depth+1))
				} else {
					v.Content = append(v.Content, genScalar(t, *line))
				}
			}
		default:
			v = genScalar(t, *line)
		}
		m.Content = append(m.Content, kn, v)
	}
	if len(keys) > 0 && rapid.IntRange(0, 3).Draw(t, "policy") == 0 {
		*line++
		pol := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: *line}
		for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom(keys), 1, len(keys), rapid.ID).Draw(t, "policyKeys") {
			pol.Content = append(pol.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: *line},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: rapid.SampledFrom([]string{mergeShallow, mergeDeep}).Draw(t, "how"), Line: *line})
		}
		at := rapid.IntRange(0, len(m.Content)/2).Draw(t, "policyAt") * 2
		m.Content = slices.Insert(m.Content, at, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: mergeKey, Line: *line}, pol)
	}
	return m
}

func genScalar(t *rapid.T, line int) *yaml.Node {
	if rapid.IntRange(0, 4).Draw(t, "null") == 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null", Line: line}
	}
	tag := rapid.SampledFrom([]string{"!!str", "!!int"}).Draw(t, "tag")
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: fmt.Sprint(rapid.IntRange(0, 3).Draw(t, "v")), Line: line}
}

// value is a tree as plain Go values: the reference model works on these.
func value(n *yaml.Node) any {
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = value(n.Content[i+1])
		}
		return m
	case yaml.SequenceNode:
		l := []any{}
		for _, c := range n.Content {
			l = append(l, value(c))
		}
		return l
	default:
		return n.Tag + ":" + n.Value
	}
}

// modelMerge is the merge policy as docs/CONFIG.md states it, over plain
// values: a mapping over a mapping merges key by key, deep unless $merge
// says shallow; anything else replaces; $merge itself is dropped.
func modelMerge(base any, over *yaml.Node) any {
	if over.Kind != yaml.MappingNode {
		return value(over)
	}
	shallow := map[string]bool{}
	for i := 0; i+1 < len(over.Content); i += 2 {
		if over.Content[i].Value == mergeKey {
			p := over.Content[i+1]
			for j := 0; j+1 < len(p.Content); j += 2 {
				shallow[p.Content[j].Value] = p.Content[j+1].Value == mergeShallow
			}
		}
	}
	out := map[string]any{}
	bm, _ := base.(map[string]any)
	for k, v := range bm {
		out[k] = v
	}
	for i := 0; i+1 < len(over.Content); i += 2 {
		k, v := over.Content[i].Value, over.Content[i+1]
		if k == mergeKey {
			continue
		}
		if inherited, ok := bm[k]; ok && !shallow[k] {
			out[k] = modelMerge(inherited, v)
		} else {
			out[k] = modelMerge(nil, v)
		}
	}
	return out
}

func testDoc() *ydoc {
	return &ydoc{path: "packs/t.yaml", code: resolve.CodePackInvalid, origins: newNodeOrigins()}
}

// Merging never changes its inputs, gives the same result twice, and
// agrees with the reference model.
func TestMergeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		line := 0
		rawBase, over := genTree(t, &line, 0), genTree(t, &line, 0)
		d := testDoc()
		base, err := mergeNodes(d, nil, rawBase, "", nil)
		if err != nil {
			t.Fatalf("normalizing the base: %v", err)
		}
		before := dump(rawBase) + dump(base) + dump(over)

		got, err := mergeNodes(d, base, over, "", nil)
		if err != nil {
			t.Fatalf("merge: %v", err)
		}
		if after := dump(rawBase) + dump(base) + dump(over); after != before {
			t.Fatalf("merging changed an input:\nbefore\n%s\nafter\n%s", before, after)
		}
		again, err := mergeNodes(testDoc(), base, over, "", nil)
		if err != nil || shape(again) != shape(got) {
			t.Fatalf("a second merge differs (%v):\n%s\nvs\n%s", err, shape(got), shape(again))
		}
		if want := modelMerge(value(base), over); !reflect.DeepEqual(value(got), want) {
			t.Fatalf("merge disagrees with the model:\n got %v\nwant %v", value(got), want)
		}
		if strings.Contains(shape(got), `"$merge"`) {
			// Only lists keep $-keys, and compose refuses those.
			if err := noDollarInLists(d, got, "", false); err == nil {
				t.Fatalf("a $merge outside a list survived:\n%s", shape(got))
			}
		}
	})
}

// composeDocs composes every pack of doc, a YAML mapping from pack name to
// pack content, and renders each result (the composed tree's shape with
// each node's file, or the error).
func composeDocs(doc []byte) (map[string]string, bool) {
	d := &ydoc{path: "packs.yaml", code: resolve.CodePackInvalid}
	root, err := d.parse(doc)
	if err != nil || root == nil || root.Kind != yaml.MappingNode {
		return nil, false
	}
	ps, err := d.pairs(root, "")
	if err != nil {
		return nil, false
	}
	o := newNodeOrigins()
	srcs := map[string]*packSource{}
	x := &expander{lookupEnv: func(name string) (string, bool) { return "v-" + name, true }, allow: []string{"*"},
		read: func(rel string) ([]byte, *Error) { return []byte("file " + rel + "\n"), nil }}
	for _, p := range ps {
		if resolve.ValidateName("pack", p.key) != nil {
			continue
		}
		src := &packSource{name: p.key, path: "packs/" + p.key + ".yaml"}
		pd := &ydoc{path: src.path, code: resolve.CodePackInvalid}
		n := p.v
		if isNull(n) {
			n = nil
		}
		srcs[p.key] = src.prepare(pd, n, x, o)
	}
	c := &composer{o: o, lookup: func(_ *packSource, name string) *packSource { return srcs[name] }}
	out := map[string]string{}
	for name, src := range srcs {
		if src.err != nil {
			out[name] = src.err.Error()
			continue
		}
		pf, _, err := c.pack(src)
		if err != nil {
			out[name] = err.Error()
			continue
		}
		var b strings.Builder
		for _, k := range sortedKeys(pf.KeyOrigins) {
			fmt.Fprintf(&b, "%s@%s ", k, pf.KeyOrigins[k])
		}
		out[name] = pf.Pack.Digest + " " + b.String()
	}
	return out, true
}

// FuzzCompose: arbitrary documents of packs (extends cycles included)
// compose without a panic, always terminate, and compose the same way
// twice; the parsed input is not changed by composing it.
func FuzzCompose(f *testing.F) {
	for _, seed := range []string{
		"base: {roles: {architect: {model: m, effort: low}}}\nteam: {extends: [base], roles: {architect: {effort: high}}}\n",
		"a: {extends: [b]}\nb: {extends: [a]}\nc: {extends: [a]}\n",
		"base: {roles: {architect: {model: m}}}\na: {extends: [base]}\nb: {extends: [base]}\nteam: {extends: [a, b], roles: {$merge: {architect: shallow}, architect: {effort: x}}}\n",
		"t: {roles: {architect: {model: '${env:M}', authority: ['${file:x.txt}', '$${lit}']}}}\n",
		"t: {x-meta: {$merge: {tags: shallow}, tags: {a: 1}}, roles: {architect: {variants: [{when: {model: {matches: 'c*'}}, set: {effort: e}}]}}}\n",
		"p0: {extends: [p1]}\np1: {extends: [p2]}\np2: {extends: [p3]}\np3: {extends: [p4]}\np4: {extends: [p5]}\np5: {extends: [p6]}\np6: {extends: [p7]}\np7: {extends: [p8]}\np8: {extends: [p9]}\np9: {}\n",
		"t: {$bogus: 1}\nu: {roles: {$merge: {nope: deep}}}\nv: {roles: [{$merge: {}}]}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		first, ok := composeDocs(doc)
		if !ok {
			return
		}
		second, _ := composeDocs(doc)
		if !reflect.DeepEqual(first, second) {
			t.Fatalf("composing twice differs:\n%v\n%v", first, second)
		}
		// One composition never changes the parsed input it shares.
		d := &ydoc{path: "packs.yaml", code: resolve.CodePackInvalid}
		root, err := d.parse(doc)
		if err != nil || root == nil || root.Kind != yaml.MappingNode {
			return
		}
		before := dump(root)
		o := newNodeOrigins()
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i+1].Kind == yaml.MappingNode {
				_, _ = mergeNodes(&ydoc{path: "p", code: resolve.CodePackInvalid, origins: o}, root.Content[i+1], root.Content[i+1], "", nil)
			}
		}
		if dump(root) != before {
			t.Fatal("merging changed the parsed input")
		}
	})
}
