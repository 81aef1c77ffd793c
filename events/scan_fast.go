package events

import "strings"

// printableASCII reports whether every byte of s is in U+0020–U+007E:
// then s has no control character (controlIndex(s) is -1), which is
// quicker to see this way than rune by rune.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if !printableByte[s[i]] {
			return false
		}
	}
	return true
}

var printableByte = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	return t
}()

// noControl is controlIndex(s) < 0.
func noControl(s string) bool { return printableASCII(s) || controlIndex(s) < 0 }

// requiredOK is requiredString's success condition: set, not blank, no
// control character. (A printable ASCII string is blank only if it is
// all spaces.)
func requiredOK(a attr) bool {
	if !a.set {
		return false
	}
	if printableASCII(a.v) {
		return strings.Trim(a.v, " ") != ""
	}
	return strings.TrimSpace(a.v) != "" && controlIndex(a.v) < 0
}
