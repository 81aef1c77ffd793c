package resolve_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/resolve"
)

func TestParseRoleToken(t *testing.T) {
	long := strings.Repeat("a", resolve.MaxNameLen)
	valid := []struct {
		token string
		want  resolve.RoleRef
	}{
		{"architect", resolve.RoleName("architect")},
		{"security-auditor", resolve.RoleName("security-auditor")},
		{"x_1", resolve.RoleName("x_1")},
		{"9lives", resolve.RoleName("9lives")},
		{long, resolve.RoleName(long)},
		{"external:ghostwriter", resolve.ExternalRef{Name: "ghostwriter"}},
		{"external:architect", resolve.ExternalRef{Name: "architect"}},
		{"external", resolve.RoleName("external")},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.token, func(t *testing.T) {
			got, err := resolve.ParseRoleToken(tc.token)
			if err != nil {
				t.Fatalf("ParseRoleToken(%q): %v", tc.token, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ref (-want +got):\n%s", diff)
			}
			if got.Token() != tc.token {
				t.Errorf("Token() = %q, want the input back", got.Token())
			}
		})
	}
	invalid := []struct {
		name, token, value string
	}{
		{"empty", "", ""},
		{"external with no name", "external:", ""},
		{"uppercase", "Architect", "Architect"},
		{"leading dash", "-x", "-x"},
		{"leading underscore", "_x", "_x"},
		{"slash", "a/b", "a/b"},
		{"backslash", `a\b`, `a\b`},
		{"dot-dot", "..", ".."},
		{"path escape in an external name", "external:../etc", "../etc"},
		{"nested prefix", "external:external:x", "external:x"},
		{"colon", "casts:architect", "casts:architect"},
		{"space", "arch itect", "arch itect"},
		{"control character", "a\x00b", "a\x00b"},
		{"percent escape", "a%2fb", "a%2fb"},
		{"non-ASCII look-alike", "аrchitect", "аrchitect"},
		{"too long", long + "a", long + "a"},
		{"invalid UTF-8 is echoed back valid", "a\xffb", "a\uFFFDb"},
	}
	for _, tc := range invalid {
		t.Run("invalid/"+tc.name, func(t *testing.T) {
			ref, err := resolve.ParseRoleToken(tc.token)
			if err == nil {
				t.Fatalf("ParseRoleToken(%q) = %#v, want task_invalid", tc.token, ref)
			}
			if ref != nil {
				t.Errorf("ref = %#v alongside an error", ref)
			}
			var re *resolve.ResolutionError
			if !errors.As(err, &re) {
				t.Fatalf("error %T is not a *ResolutionError", err)
			}
			if re.Code != resolve.CodeTaskInvalid || re.Subject != "role" || re.Code.Stage() != resolve.StageDecode {
				t.Errorf("got %s subject %q, want task_invalid subject role", re.Code, re.Subject)
			}
			if diff := cmp.Diff(map[string]any{"field": "role", "value": tc.value}, re.Details); diff != "" {
				t.Errorf("details (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateNameBoundsEcho(t *testing.T) {
	huge := strings.Repeat("Z", 10*resolve.MaxNameLen)
	err := resolve.ValidateName("profile", huge)
	var re *resolve.ResolutionError
	if !errors.As(err, &re) {
		t.Fatalf("ValidateName accepted a %d-byte name", len(huge))
	}
	v, _ := re.Details["value"].(string)
	if want := strings.Repeat("Z", 2*resolve.MaxNameLen) + "…"; v != want {
		t.Errorf("echoed value has %d bytes, want it cut to %d plus an ellipsis", len(v), 2*resolve.MaxNameLen)
	}
	if re.Subject != "profile" || !strings.HasPrefix(re.Message, "profile ") {
		t.Errorf("subject %q message %q should name the field", re.Subject, re.Message)
	}
}

// FuzzParseRoleToken: no input panics; an accepted token round-trips and
// uses only the name grammar; a rejected one is task_invalid with a
// bounded, valid UTF-8 echo.
func FuzzParseRoleToken(f *testing.F) {
	for _, s := range []string{"architect", "external:x", "", "external:", "a/b", "..", "A", "a\x00", "\xff", strings.Repeat("a", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		ref, err := resolve.ParseRoleToken(token)
		if err == nil {
			if ref.Token() != token {
				t.Fatalf("Token() = %q for input %q", ref.Token(), token)
			}
			name := strings.TrimPrefix(token, resolve.ExternalPrefix)
			if name == "" || len(name) > resolve.MaxNameLen || strings.ContainsAny(name, "/\\.:% ") {
				t.Fatalf("accepted bad name %q", name)
			}
			return
		}
		var re *resolve.ResolutionError
		if !errors.As(err, &re) || re.Code != resolve.CodeTaskInvalid {
			t.Fatalf("error %v is not task_invalid", err)
		}
		// The echo is cut to 2*MaxNameLen bytes, then each run of invalid
		// bytes becomes U+FFFD (3 bytes), so 3× that plus "…" bounds it.
		v, _ := re.Details["value"].(string)
		if !utf8.ValidString(v) || len(v) > 3*2*resolve.MaxNameLen+len("…") {
			t.Fatalf("echo %q is invalid UTF-8 or unbounded", v)
		}
	})
}

func TestRoster(t *testing.T) {
	cat := fixtureCatalog()
	pack := fixturePack()
	profiles := []resolve.ExternalProfile{
		*replacement("zeta"),
		*replacement("ghostwriter"),
		*replacement("architect"), // collides with a Role: still listed, namespaced
		*replacement("off", func(p *resolve.ExternalProfile) { p.Enabled = ptr(false) }),
		*overlay("tuned", "architect"),
		*legacy("oldtimer"),
		*replacement("based", func(p *resolve.ExternalProfile) { p.BaseRole = ptr("architect") }),
	}
	cases := []struct {
		name     string
		pack     *resolve.Pack
		catalog  *resolve.Catalog
		profiles []resolve.ExternalProfile
		policy   resolve.Policy
		want     []string
	}{
		{"active Roles lexically, then enabled replacements lexically", pack, cat, profiles, resolve.Policy{},
			[]string{"architect", "reviewer", "scout", "external:architect", "external:ghostwriter", "external:oldtimer", "external:zeta"}},
		{"legacy profiles drop out when rejected", pack, cat, profiles, resolve.Policy{RejectLegacyProfiles: true},
			[]string{"architect", "reviewer", "scout", "external:architect", "external:ghostwriter", "external:zeta"}},
		{"no profiles", pack, cat, nil, resolve.Policy{}, []string{"architect", "reviewer", "scout"}},
		{"no pack lists only replacements", nil, cat, profiles[:1], resolve.Policy{}, []string{"external:zeta"}},
		{"no catalog lists only replacements", pack, nil, profiles[:1], resolve.Policy{}, []string{"external:zeta"}},
		{"nothing at all is an empty list", nil, nil, nil, resolve.Policy{}, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopy(tc.profiles)
			got := resolve.Roster(tc.pack, tc.catalog, tc.profiles, tc.policy)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("roster (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.profiles); diff != "" {
				t.Errorf("Roster mutated its profiles:\n%s", diff)
			}
		})
	}
}

// TestRosterAgreesWithResolve: planner guidance and assignment validation
// use one value: every roster entry resolves, and every active or
// inactive built-in Role outside it fails.
func TestRosterAgreesWithResolve(t *testing.T) {
	in := inputs()
	profiles := []resolve.ExternalProfile{*replacement("ghostwriter"), *replacement("off", func(p *resolve.ExternalProfile) { p.Enabled = ptr(false) })}
	listed := map[string]bool{}
	for _, token := range resolve.Roster(in.Pack, in.Catalog, profiles, in.Policy) {
		listed[token] = true
		ref, err := resolve.ParseRoleToken(token)
		if err != nil {
			t.Fatal(err)
		}
		in := in
		if ext, ok := ref.(resolve.ExternalRef); ok {
			for i := range profiles {
				if profiles[i].Name == ext.Name {
					in.Profile = &profiles[i]
				}
			}
		}
		if _, err := resolve.Resolve(ref, in); err != nil {
			t.Errorf("roster lists %s but Resolve fails: %v", token, err)
		}
	}
	for name := range in.Catalog.Roles {
		if listed[name] {
			continue
		}
		if _, err := resolve.Resolve(casts(name), in); err == nil {
			t.Errorf("%s is not on the roster but resolves", name)
		}
	}
	off := &profiles[1]
	if _, err := resolve.Resolve(external("off"), inputs(withProfile(off))); err == nil || listed["external:off"] {
		t.Errorf("a disabled replacement is listed or resolves")
	}
}
