package discover

import (
	"go.yaml.in/yaml/v3"

	"github.com/rolecall/rolecall/resolve"
)

// ident decodes an identifier value — a model, an effort, a tool name —
// which, unlike free text (descriptions, prompt lines), may hold no
// control or invisible format character (resolve.UnsafeChar): a
// bidirectional control would make the value read differently from how it
// is compared ("Trojan Source").
func (d *ydoc) ident(n *yaml.Node, key string) (string, *Error) {
	s, err := d.str(n, key)
	if err != nil {
		return "", err
	}
	if e := d.unsafe(n, key, s); e != nil {
		return "", e
	}
	return s, nil
}

// unsafe reports a control or format character in s, the value of n.
func (d *ydoc) unsafe(n *yaml.Node, key, s string) *Error {
	if i, r := resolve.UnsafeChar(s); i >= 0 {
		return d.errAt(n, key, "has %s at byte %d; identifiers may not hold control or invisible format characters", resolve.DescribeUnsafe(r), i)
	}
	return nil
}
