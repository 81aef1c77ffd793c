package resolve

import (
	"fmt"
	"unicode"
)

// UnsafeChar finds the first character of s that no identifier may hold
// (a model, an effort, a tool name, a permission or skill pattern): a
// control character (C0, DEL, C1) or a Unicode format character (category
// Cf). Format characters are invisible: the bidirectional controls
// (U+202A–U+202E, U+2066–U+2069) make a value display in another order
// than it is compared ("Trojan Source"), and the zero-width ones make two
// different values look alike. It returns the byte index and the
// character, or -1 and 0.
func UnsafeChar(s string) (int, rune) {
	for i, r := range s {
		// Cf has no member below U+00AD, so ASCII costs one comparison.
		if r < 0x20 || r >= 0x7f && r <= 0x9f || r >= 0xad && unicode.Is(unicode.Cf, r) {
			return i, r
		}
	}
	return -1, 0
}

// DescribeUnsafe names a character UnsafeChar found, for a message.
func DescribeUnsafe(r rune) string {
	if unicode.Is(unicode.Cf, r) {
		return fmt.Sprintf("an invisible format character (%U)", r)
	}
	return fmt.Sprintf("a control character (%U)", r)
}
