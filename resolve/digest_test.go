package resolve_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/rolecall/rolecall/resolve"
)

// TestPropertyDigestsMatchOracle: the digests are the old encoder's, byte
// for byte, over random inputs (sealed and unsealed).
func TestPropertyDigestsMatchOracle(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		sc := genScenario.Draw(t, "scenario")
		if got, want := resolve.InputsDigest(sc.ref, sc.in), oldInputsDigest(sc.ref, sc.in); got != want {
			t.Fatalf("InputsDigest %s, oracle %s", got, want)
		}
		if got, want := resolve.CatalogDigest(sc.in.Catalog), oldCatalogDigest(sc.in.Catalog); got != want {
			t.Fatalf("CatalogDigest %s, oracle %s", got, want)
		}
		if got, want := resolve.PackDigest(sc.in.Pack), oldPackDigest(sc.in.Pack); got != want {
			t.Fatalf("PackDigest %s, oracle %s", got, want)
		}
		if sc.in.Profile != nil {
			// a profile body past the stack buffer moves the encoding to the heap
			p := *sc.in.Profile
			p.Body = strings.Repeat(p.Body+"long ", 600)
			in := sc.in
			in.Profile = &p
			if got, want := resolve.InputsDigest(sc.ref, in), oldInputsDigest(sc.ref, in); got != want {
				t.Fatalf("InputsDigest (long body) %s, oracle %s", got, want)
			}
		}
	})
}

// TestDigestOfUnusualMappings: artifact defaults that the JSON writer hands
// to encoding/json (other types, NaN, deep nesting) or writes itself with
// every escape still give the oracle's digest.
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
			in := resolve.Inputs{Profile: &resolve.ExternalProfile{Name: "p", ArtifactDefaults: m}}
			ref := resolve.ExternalRef{Name: "p"}
			if got, want := resolve.InputsDigest(ref, in), oldInputsDigest(ref, in); got != want {
				t.Fatalf("InputsDigest %s, oracle %s", got, want)
			}
			cat := &resolve.Catalog{Roles: map[string]resolve.Role{"r": {Name: "r", ArtifactDefaults: m}}}
			if got, want := resolve.CatalogDigest(cat), oldCatalogDigest(cat); got != want {
				t.Fatalf("CatalogDigest %s, oracle %s", got, want)
			}
		})
	}
}

// checkJSON: where the digest's JSON writer takes a value, it writes what
// json.Marshal writes.
func checkJSON(t *testing.T, v any) {
	t.Helper()
	got, ok := resolve.AppendJSON(nil, v)
	want, err := json.Marshal(v)
	if !ok {
		if err == nil {
			// a type it leaves to encoding/json: only the supported ones
			// must be written directly
			if supportedJSON(v) {
				t.Fatalf("AppendJSON refused %#v, which json.Marshal encodes as %s", v, want)
			}
		}
		return
	}
	if err != nil {
		t.Fatalf("AppendJSON wrote %q for %#v, which json.Marshal refuses: %v", got, v, err)
	}
	if string(got) != string(want) {
		t.Fatalf("AppendJSON(%#v) = %s, json.Marshal %s", v, got, want)
	}
}

func supportedJSON(v any) bool {
	switch v := v.(type) {
	case nil, bool, int, string:
		return true
	case float64:
		return !math.IsNaN(v) && !math.IsInf(v, 0)
	case []any:
		for _, x := range v {
			if !supportedJSON(x) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, x := range v {
			if !supportedJSON(x) {
				return false
			}
		}
		return true
	}
	return false
}

func FuzzAppendJSON(f *testing.F) {
	f.Add([]byte(`{"format":"adr","sections":["context",1,2.5e-7,true,null,{"<&>":"\u2028"}]}`), "x", 1.0, 3)
	f.Add([]byte(`[1e21, -0, 1e-6, 123456789012345678901234567890]`), "\xff<\x00>", 1e-7, -1)
	f.Add([]byte(`"\ud800"`), "\u2029\t", math.MaxFloat64, math.MinInt64)
	f.Fuzz(func(t *testing.T, data []byte, s string, x float64, i int) {
		var decoded any
		if json.Unmarshal(data, &decoded) == nil {
			checkJSON(t, decoded)
			checkJSON(t, map[string]any{s: decoded})
		}
		checkJSON(t, map[string]any{s: []any{s, x, i, map[string]any{"k": s, s: nil}}, "x": x})
	})
}
