package discover_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/discover"
	"github.com/rolecall/rolecall/resolve"
)

// TestDecodeConfigRules pins rolecall.yaml's value rules that need no file
// layout: each case is the YAML, then the error line and message fragment
// ("" = accepted).
func TestDecodeConfigRules(t *testing.T) {
	cases := []struct {
		name, yaml string
		line       int
		msg        string
	}{
		{"empty file", "", 0, ""},
		{"comments only", "# nothing\n", 0, ""},
		{"nats block", "nats:\n  url: nats://a:4222\n  creds: /etc/nats.creds\n  tls: {ca: ca.pem, cert: c.pem, key: k.pem}\n  consumer: workers\n  specs_stream: SPECS\n", 0, ""},
		{"subject prefix with a wildcard", "nats:\n  subject_prefix: rolecall.*\n", 2, "is not a NATS subject prefix"},
		{"subject prefix with an empty token", "nats:\n  subject_prefix: a..b\n", 2, "is not a NATS subject prefix"},
		{"stream name with a dot", "nats:\n  tasks_stream: A.B\n", 2, "is not a valid JetStream name"},
		{"replicas 6", "nats:\n  replicas: 6\n", 2, "must be between 1 and 5"},
		{"backoff not a list", "nats:\n  backoff: 1s\n", 2, "must be a list of duration strings"},
		{"backoff entry not a duration", "nats:\n  backoff: [1s, soon]\n", 2, `key "nats.backoff[1]"`},
		{"negative duration", "nats:\n  ack_wait: -5s\n", 2, "must be a positive duration"},
		{"idempotency horizon negative", "nats:\n  idempotency_horizon: -1h\n", 2, "must be a positive duration"},
		{"idempotency horizon a number", "nats:\n  idempotency_horizon: 24\n", 2, "must be a duration string"},
		{"retry_for zero", "nats:\n  retry_for: 0s\n", 2, "must be a positive duration"},
		{"unknown tls key", "nats:\n  tls:\n    insecure: true\n", 3, `key "nats.tls.insecure": unknown key`},
		{"x- key below the top level", "defaults:\n  x-note: hi\n", 2, `key "defaults.x-note": unknown key`},
		{"x- key at the top level", "x-note: {a: [1, 2.5, true, null, 2024-01-01]}\n", 0, ""},
		{"merge key", "defaults:\n  <<: {model: m}\n", 2, "merge keys (<<) are not allowed"},
		{"non-string key", "overlays:\n  1: x\n", 2, "every key must be a string"},
		{"overlay role name invalid", "overlays:\n  Architect: x\n", 2, "invalid role name"},
		{"overlay profile name invalid", "overlays:\n  architect: ../x\n", 2, "invalid name"},
		{"profile roots listed twice", "profile_roots: [a, ./a]\n", 1, `key "profile_roots[1]": "a" is listed twice`},
		{"profile root is agents", "profile_roots: [a, agents/]\n", 1, `key "profile_roots[1]": "agents" may not be listed: it is always the first profile root`},
		{"backslash path", "preamble_file: 'a\\b.md'\n", 1, "leaves the config root"},
		{"path with an inner ..", "preamble_file: prompts/../p.md\n", 1, "leaves the config root"},
		{"profile root with an inner ..", "profile_roots: [team/../team]\n", 1, "leaves the config root"},
		{"source root with an inner ..", "sources:\n  - {name: v, root: vendor/../skills}\n", 2, "leaves the config root"},
		{"top level is a list", "- a\n", 1, "must be a mapping, got a list"},
		{"permission mode unknown", "defaults:\n  permissions: {mode: maybe}\n", 2, "must be one of allow_all, deny_all, rules"},
		{"permission rules not a map", "defaults:\n  permissions: {mode: rules, deny: [x]}\n", 2, "must be a mapping"},
		{"invalid UTF-8", "defaults:\n  model: \"\xfe\"\n", 2, "not valid UTF-8"},
		{"binary tag", "x-blob: !!binary aGk=\n", 1, `YAML tag "!!binary" is not allowed`},
		{"deep nesting", "x-deep: " + strings.Repeat("[", 120) + strings.Repeat("]", 120) + "\n", 1, "nesting is deeper than 100 levels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := discover.DecodeConfig("rolecall.yaml", []byte(tc.yaml))
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if err.Line != tc.line || !strings.Contains(err.Message, tc.msg) {
				t.Errorf("got %v; want line %d containing %q", err, tc.line, tc.msg)
			}
			if err.Code != resolve.CodeConfigInvalid && err.Code != resolve.CodePathEscape {
				t.Errorf("code %s", err.Code)
			}
		})
	}
}

func TestDecodeConfigValues(t *testing.T) {
	cfg, err := discover.DecodeConfig("rolecall.yaml", []byte("defaults:\n  tools: []\n  yolo: true\n  lion_system: false\n  permissions: {mode: deny_all, allow: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Defaults
	if d.Tools == nil || len(d.Tools) != 0 {
		t.Errorf("tools: [] must be a non-nil empty list, got %#v", d.Tools)
	}
	if !d.Yolo || d.LionSystem || d.Permissions.Mode != resolve.PermissionDenyAll || d.Permissions.Allow == nil || d.Permissions.Deny != nil {
		t.Errorf("defaults = %+v, permissions %+v", d, d.Permissions)
	}
	if cfg.KeyLines["defaults.permissions"] != 5 || cfg.KeyLines["defaults.tools"] != 2 {
		t.Errorf("key lines = %v", cfg.KeyLines)
	}
	ext, _ := discover.DecodeConfig("rolecall.yaml", []byte("x-note: {a: [1, 2.5, true, null, 2024-01-01]}\n"))
	got := ext.Extensions["x-note"].(map[string]any)["a"].([]any)
	if got[0] != 1 || got[1] != 2.5 || got[2] != true || got[3] != nil || got[4] != "2024-01-01" {
		t.Errorf("extension values = %#v", got)
	}
}

func TestErrorIsMatchesCode(t *testing.T) {
	err := error(&discover.Error{Code: resolve.CodePackInvalid, File: "packs/a.yaml", Line: 2, Key: "roles", Message: "m"})
	if !errors.Is(err, &discover.Error{Code: resolve.CodePackInvalid}) || errors.Is(err, &discover.Error{Code: resolve.CodeProfileInvalid}) {
		t.Error("Is does not compare codes")
	}
	d := (&discover.Error{Code: resolve.CodePackInvalid, File: "packs/a.yaml", Line: 2, Key: "roles"}).Details()
	if d["file"] != "packs/a.yaml" || d["line"] != 2 || d["key"] != "roles" || d["paths"] != nil {
		t.Errorf("Details = %v", d)
	}
	if got := (&discover.Error{Code: resolve.CodeConfigInvalid, Message: "m"}).Error(); got != "<root>: config_invalid: m" {
		t.Errorf("Error() = %q", got)
	}
}

// TestDecodeIdempotencyHorizon: absent keeps the worker's default, a
// duration sets it, and a written 0 turns the store off.
func TestDecodeIdempotencyHorizon(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want string // "" = absent
	}{
		{"nats: {}\n", ""},
		{"nats:\n  idempotency_horizon: 48h\n", "48h0m0s"},
		{"nats:\n  idempotency_horizon: 0\n", "0s"},
		{"nats:\n  idempotency_horizon: 0s\n", "0s"},
	} {
		c, err := discover.DecodeConfig("rolecall.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		got := ""
		if h := c.NATS.IdempotencyHorizon; h != nil {
			got = h.String()
		}
		if got != tc.want {
			t.Errorf("%q: horizon %q, want %q", tc.yaml, got, tc.want)
		}
	}
}
