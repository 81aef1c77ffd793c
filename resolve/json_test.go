package resolve_test

import (
	"bytes"
	v1 "encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"

	json "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/resolve"
)

// nilAsNull are the go-json-experiment options under which absent (nil)
// and empty stay apart: by default that library writes a nil slice as []
// and a nil map as {}, so "artifact_defaults: none" would read as an
// explicit empty mapping. (Its `format:emitnull` tag option is not an
// alternative: v1.27.2 rejects format tags on slices and maps unless an
// experimental option is set.) Whoever encodes resolve types with it must
// pass these options.
var nilAsNull = json.JoinOptions(json.FormatNilSliceAsNull(true), json.FormatNilMapAsNull(true))

// encoders are the two JSON encoders a caller may use; the spec must encode
// the same way under both (nil stays null, empty stays empty).
var encoders = []struct {
	name    string
	marshal func(any) ([]byte, error)
	members func([]byte) (map[string]string, error)
}{
	{"go-json-experiment", func(v any) ([]byte, error) { return json.Marshal(v, nilAsNull) }, func(b []byte) (map[string]string, error) {
		var m map[string]jsontext.Value
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		out := map[string]string{}
		for k, v := range m {
			if err := v.Compact(); err != nil {
				return nil, err
			}
			out[k] = string(v)
		}
		return out, nil
	}},
	{"encoding/json", v1.Marshal, func(b []byte) (map[string]string, error) {
		var m map[string]v1.RawMessage
		if err := v1.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		out := map[string]string{}
		for k, v := range m {
			var c bytes.Buffer
			if err := v1.Compact(&c, v); err != nil {
				return nil, err
			}
			out[k] = c.String()
		}
		return out, nil
	}},
}

func keysOf(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sorted(s ...string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// designSourcesKeys are the sources keys of docs/CONFIG.md, in its order.
var designSourcesKeys = []string{
	"identity", "pack", "model", "effort", "modes", "tools", "permissions",
	"yolo", "bypass", "fast_mode", "lion_system", "prompt", "artifact_defaults", "timeout", "active", "skills",
}

// TestSpecJSONFieldNames: the resolved spec encodes exactly the field names
// of docs/EVENTS.md, minus task_id, system_message and inputs_digest (added
// by events), at every level.
func TestSpecJSONFieldNames(t *testing.T) {
	spec := mustResolve(t, external("ghostwriter"), inputs(withProfile(legacy("ghostwriter", func(p *resolve.ExternalProfile) {
		p.Timeout = ptr(60)
	}))))
	want := map[string][]string{
		"": sorted("identity", "pack", "active", "model", "model_tier", "effort", "tools", "permissions",
			"yolo", "bypass", "fast_mode", "lion_system", "prompt_disposition", "prompt_body",
			"prompt_overlays", "grant_role_emissions", "emits", "artifact_defaults", "timeout",
			"resume_on_timeout", "skills", "sources", "diagnostics"),
		"identity":       sorted("kind", "name", "modes"),
		"pack":           sorted("name", "digest", "variants"),
		"sources":        sorted(designSourcesKeys...),
		"diagnostics[0]": sorted("code", "message"),
	}
	for _, enc := range encoders {
		t.Run(enc.name, func(t *testing.T) {
			b, err := enc.marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			top, err := enc.members(b)
			if err != nil {
				t.Fatal(err)
			}
			objects := map[string]string{"": string(b), "identity": top["identity"], "pack": top["pack"], "sources": top["sources"],
				"diagnostics[0]": strings.TrimSuffix(strings.TrimPrefix(top["diagnostics"], "["), "]")}
			for path, obj := range objects {
				m, err := enc.members([]byte(obj))
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if diff := cmp.Diff(want[path], keysOf(m)); diff != "" {
					t.Errorf("keys of %q (-want +got):\n%s", path, diff)
				}
			}
		})
	}
}

// TestSpecJSONNilAndEmpty: absent values encode as null and empty ones as
// [] or {}, under both encoders.
func TestSpecJSONNilAndEmpty(t *testing.T) {
	cases := []struct {
		name string
		ref  resolve.RoleRef
		in   resolve.Inputs
		want map[string]string // member → compact JSON
	}{
		{"explicit empty tools and modes are [], unset scalars are null",
			casts("scout"), inputs(taskModes(), withTask(func(t *resolve.TaskOverrides) { t.Tools = []string{} })),
			map[string]string{
				"tools": `[]`, "effort": `null`, "permissions": `null`, "artifact_defaults": `null`, "timeout": `null`,
				"prompt_overlays": `[]`, "emits": `[]`, "diagnostics": `[]`,
				"identity": `{"kind":"casts","name":"scout","modes":[]}`,
			}},
		{"no runtime tools is still [] (a list, never null)",
			casts("scout"), inputs(withDefaults(func(d *resolve.RuntimeDefaults) { d.Tools = nil })),
			map[string]string{"tools": `[]`}},
		{"an empty profile mapping is {}, not null",
			casts("scout"), inputs(withProfile(overlay("tuned", "scout", func(p *resolve.ExternalProfile) { p.ArtifactDefaults = map[string]any{} }))),
			map[string]string{"artifact_defaults": `{}`}},
		{"permission rule maps keep null versus {}",
			casts("scout"), inputs(withTask(func(t *resolve.TaskOverrides) {
				t.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Deny: map[string][]string{}, Escalate: map[string][]string{"bash": {"rm *"}}}
			})),
			map[string]string{"permissions": `{"mode":"rules","allow":null,"deny":{},"escalate":{"bash":["rm *"]}}`}},
		{"a replacement has empty modes, overlays and emits",
			external("ghostwriter"), inputs(withProfile(replacement("ghostwriter"))),
			map[string]string{
				"identity": `{"kind":"external","name":"ghostwriter","modes":[]}`, "prompt_overlays": `[]`, "emits": `[]`,
				"grant_role_emissions": `false`, "artifact_defaults": `null`,
			}},
	}
	for _, tc := range cases {
		for _, enc := range encoders {
			t.Run(tc.name+"/"+enc.name, func(t *testing.T) {
				b, err := enc.marshal(mustResolve(t, tc.ref, tc.in))
				if err != nil {
					t.Fatal(err)
				}
				got, err := enc.members(b)
				if err != nil {
					t.Fatal(err)
				}
				for k, want := range tc.want {
					if got[k] != want {
						t.Errorf("%s = %s, want %s", k, got[k], want)
					}
				}
			})
		}
	}
}

// TestSpecJSONRoundTrip: decoding the encoded spec gives the spec back
// (minus the json:"-" materializer fields), nil and empty intact.
func TestSpecJSONRoundTrip(t *testing.T) {
	specs := []resolve.ResolvedAgentSpec{
		mustResolve(t, casts("architect"), inputs(withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) {
			p.ArtifactDefaults = map[string]any{"format": "html", "tags": []any{"a"}, "nested": map[string]any{}}
		})), withTask(func(t *resolve.TaskOverrides) {
			t.Tools = []string{}
			t.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionDenyAll, Allow: map[string][]string{}}
		}))),
		mustResolve(t, casts("scout"), inputs()),
		mustResolve(t, external("ghostwriter"), inputs(withProfile(legacy("ghostwriter")))),
	}
	for _, spec := range specs {
		want := spec
		want.Role, want.ModeDefs, want.Directives = nil, nil, resolve.Directives{}
		b, err := json.Marshal(spec, nilAsNull)
		if err != nil {
			t.Fatal(err)
		}
		var got resolve.ResolvedAgentSpec
		if err := json.Unmarshal(b, &got, json.RejectUnknownMembers(true)); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: round trip (-want +got):\n%s", spec.Identity.Name, diff)
		}
	}
}

// TestInputsJSONRoundTrip: docs/CONFIG.md — absent versus empty survives
// JSON, for every list and map of the typed inputs.
func TestInputsJSONRoundTrip(t *testing.T) {
	in := inputs(
		withProfile(overlay("tuned", "architect", func(p *resolve.ExternalProfile) {
			p.ArtifactDefaults = map[string]any{"k": []any{}, "m": map[string]any{}}
		})),
		withEntry("scout", func(e *resolve.PackEntry) {
			e.DefaultModes, e.ModesAllow, e.Authority, e.Boundaries, e.Escalations = []string{}, []string{}, []string{}, nil, []string{"x"}
		}),
		withTask(func(t *resolve.TaskOverrides) {
			t.Modes, t.Tools = []string{}, nil
			t.Permissions = &resolve.PermissionPolicy{Mode: resolve.PermissionRules, Allow: nil, Deny: map[string][]string{}, Escalate: map[string][]string{"x": {"y"}}}
		}),
		withDefaults(func(d *resolve.RuntimeDefaults) { d.Tools = []string{} }),
		withMode("socratic", func(m *resolve.Mode) { m.ConflictsWith = []string{} }),
	)
	for _, enc := range []struct {
		name      string
		marshal   func(any) ([]byte, error)
		unmarshal func([]byte, any) error
	}{
		{"go-json-experiment", func(v any) ([]byte, error) { return json.Marshal(v, nilAsNull) }, func(b []byte, v any) error { return json.Unmarshal(b, v) }},
		{"encoding/json", v1.Marshal, v1.Unmarshal},
	} {
		t.Run(enc.name, func(t *testing.T) {
			b, err := enc.marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			var got resolve.Inputs
			if err := enc.unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(in, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSourcesKeys: Sources always has every key of docs/CONFIG.md, Fields
// lists them in that order, and every successful table case fills each
// key with a value its row allows.
func TestSourcesKeys(t *testing.T) {
	b, err := json.Marshal(resolve.Sources{})
	if err != nil {
		t.Fatal(err)
	}
	members, err := encoders[0].members(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sorted(designSourcesKeys...), keysOf(members)); diff != "" {
		t.Errorf("Sources JSON keys (-want +got):\n%s", diff)
	}
	var order []string
	for _, kv := range (resolve.Sources{}).Fields() {
		order = append(order, kv[0])
	}
	if diff := cmp.Diff(designSourcesKeys, order); diff != "" {
		t.Errorf("Fields() order (-want +got):\n%s", diff)
	}

	flag := []string{"task", "external_profile", "runtime_default"}
	allowed := map[string][]string{
		"pack":              {"task", "worker_default"},
		"model":             {"task", "external_profile", "pack", "runtime_default"},
		"effort":            {"task", "external_profile", "pack", "pack_variant", "runtime_default", "provider_default"},
		"modes":             {"task", "pack", "pack_variant", "none"},
		"tools":             {"task", "runtime_default"},
		"permissions":       {"task", "runtime_default", "none"},
		"yolo":              flag,
		"bypass":            flag,
		"fast_mode":         flag,
		"lion_system":       flag,
		"prompt":            {"casts", "external_overlay", "external_replacement"},
		"artifact_defaults": {"external_profile", "role", "none"},
		"timeout":           {"external_profile", "none"},
		"active":            {"pack", "external_profile"},
		"skills":            {"task", "pack", "pack_variant", "none"},
	}
	for _, tc := range precedenceCases() {
		got := mustResolve(t, tc.ref, tc.in)
		for _, kv := range got.Sources.Fields() {
			key, val := kv[0], kv[1]
			if key == "identity" {
				if val != string(got.Identity.Kind)+":"+got.Identity.Name {
					t.Errorf("%s: sources.identity = %q for identity %+v", tc.name, val, got.Identity)
				}
				continue
			}
			if !slices.Contains(allowed[key], val) {
				t.Errorf("%s: sources.%s = %q, not one of %q", tc.name, key, val, allowed[key])
			}
		}
	}
}
