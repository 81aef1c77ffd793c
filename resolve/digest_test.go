package resolve_test

import (
	"math"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/resolve"
)

// TestDigestOfUnusualMappings: artifact defaults of every shape, including
// ones JSON cannot hold, give a well-formed digest that equal values share
// and that differs from the empty mapping's.
func TestDigestOfUnusualMappings(t *testing.T) {
	deep := map[string]any{"leaf": 1}
	for range 80 {
		deep = map[string]any{"d": deep}
	}
	for name, m := range map[string]map[string]any{
		"escapes":       {"html": "<a href='x'>&</a>", "ctl": "\x00\x01\b\f\n\r\t\x1f\x7f", "q": `"\`, "u": "\u2028\u2029\u00e9", "bad": "\xff\xfe", "<key>": true},
		"numbers":       {"i": -42, "f": 1.5, "tiny": 1e-7, "huge": 1e21, "neg": -2.5e-9, "zero": 0.0, "negzero": math.Copysign(0, -1), "big": 123456789.0},
		"nested":        {"a": []any{nil, []any{}, map[string]any{}, []any{1, "x"}}, "n": nil, "m": map[string]any(nil), "l": []any(nil)},
		"other types":   {"u": uint(7), "s": []string{"a"}, "i64": int64(3)},
		"not finite":    {"nan": math.NaN(), "inf": math.Inf(1)},
		"deep":          deep,
		"many keys":     {"k0": 0, "k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 5, "k6": 6, "k7": 7, "k8": 8, "k9": 9, "k10": 10},
		"empty mapping": {},
	} {
		t.Run(name, func(t *testing.T) {
			ref := resolve.ExternalRef{Name: "p"}
			digest := func(m map[string]any) string {
				return resolve.InputsDigest(ref, resolve.Inputs{Profile: &resolve.ExternalProfile{Name: "p", ArtifactDefaults: m}})
			}
			got := digest(m)
			if !strings.HasPrefix(got, resolve.DigestPrefix) || len(got) != len(resolve.DigestPrefix)+64 {
				t.Fatalf("digest %q is not sha256:<64 hex>", got)
			}
			for range 3 { // map order must not matter
				if again := digest(resolve.CloneMap(m)); again != got {
					t.Fatalf("equal mappings, digests %s and %s", got, again)
				}
			}
			if name != "empty mapping" && got == digest(map[string]any{}) {
				t.Fatalf("digest equals the empty mapping's")
			}
			if digest(nil) == digest(map[string]any{}) {
				t.Fatalf("absent and empty artifact defaults share a digest")
			}
		})
	}
}
