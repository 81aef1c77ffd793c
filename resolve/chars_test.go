package resolve_test

import (
	"testing"

	"github.com/rolecall/rolecall/resolve"
)

func TestUnsafeChar(t *testing.T) {
	tests := []struct {
		s    string
		at   int
		r    rune
		desc string
	}{
		{"claude-opus-4-1", -1, 0, ""},
		{"modèle-日本-😀", -1, 0, ""}, // visible Unicode is fine
		{"a b\tc", 3, '\t', "a control character (U+0009)"},
		{"x\x7f", 1, 0x7f, "a control character (U+007F)"},
		{"x\u0085", 1, 0x85, "a control character (U+0085)"},
		{"gpt\u202e4", 3, 0x202e, "an invisible format character (U+202E)"}, // right-to-left override
		{"\u2066Read", 0, 0x2066, "an invisible format character (U+2066)"}, // left-to-right isolate
		{"hi\u200bgh", 2, 0x200b, "an invisible format character (U+200B)"}, // zero-width space
		{"\ufeffx", 0, 0xfeff, "an invisible format character (U+FEFF)"},    // byte order mark
		{"soft\u00adhyphen", 4, 0xad, "an invisible format character (U+00AD)"},
		{"tag\U000e0041", 3, 0xe0041, "an invisible format character (U+E0041)"},
	}
	for _, tt := range tests {
		at, r := resolve.UnsafeChar(tt.s)
		if at != tt.at || r != tt.r {
			t.Errorf("UnsafeChar(%+q) = %d, %U; want %d, %U", tt.s, at, r, tt.at, tt.r)
		}
		if at >= 0 && resolve.DescribeUnsafe(r) != tt.desc {
			t.Errorf("DescribeUnsafe(%U) = %q, want %q", r, resolve.DescribeUnsafe(r), tt.desc)
		}
	}
}
