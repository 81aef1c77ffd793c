package events

import (
	"strings"
	"testing"
	"unicode"
)

// The shortcuts of scan_fast.go against the helpers they stand for, on
// every byte value and on the Unicode spaces and controls around them.
func TestScanShortcuts(t *testing.T) {
	var values []string
	for c := range 256 {
		values = append(values, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"b", " "+string([]byte{byte(c)}))
	}
	for r := range rune(0x3000 + 1) {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			values = append(values, string(r), "a"+string(r), string(r)+" ")
		}
	}
	values = append(values, "", " ", "  ", "\t", "a", " a ", strings.Repeat("x", 100), "é", "\xff", "a\xc2\x85",
		strings.Repeat("m", MaxValueLen), strings.Repeat("m", MaxValueLen+1), strings.Repeat("é", MaxValueLen), strings.Repeat("é", MaxValueLen+1))
	for _, v := range values {
		if got, want := noControl(v), controlIndex(v) < 0; got != want {
			t.Errorf("noControl(%q) = %v, want %v", v, got, want)
		}
		if got, want := badValue(v), valueProblem(v) != ""; got != want {
			t.Errorf("badValue(%q) = %v, want %v", v, got, want)
		}
		if printableASCII(v) && controlIndex(v) >= 0 {
			t.Errorf("printableASCII(%q) but it has a control character", v)
		}
		for _, set := range []bool{false, true} {
			a := attr{set: set, v: v}
			if got, want := requiredOK(a), requiredString("id", a) == nil; got != want {
				t.Errorf("requiredOK(%+v) = %v, want %v", a, got, want)
			}
		}
	}
}
