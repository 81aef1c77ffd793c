package bundle_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rolecall/rolecall/bundle"
)

// TestBuildNamesTheFirstBadFile: of several refused files, Build names
// the first in path order, every time.
func TestBuildNamesTheFirstBadFile(t *testing.T) {
	big := make([]byte, bundle.MaxMemberSize+1)
	files := map[string][]byte{"a/../x": nil, "b/ok.yaml": nil, "c/big.yaml": big, "d/../y": nil}
	for range 20 {
		_, err := bundle.Build(files)
		var be *bundle.Error
		if !errors.As(err, &be) || be.Path != "a/../x" {
			t.Fatalf("Build: %v; want the error about a/../x", err)
		}
	}
}

// TestCheckRefusesLocalBlocks: a bundle's rolecall.yaml may not hold the
// worker-local nats: and placeholders: blocks; the refusal names the
// first one in the file.
func TestCheckRefusesLocalBlocks(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"nats:\n  tasks_stream: T\n", "rolecall.yaml:1: nats"},
		{"placeholders:\n  env: [A]\nnats:\n  tasks_stream: T\n", "rolecall.yaml:1: placeholders"},
		{"nats:\n  tasks_stream: T\nplaceholders:\n  env: [A]\n", "rolecall.yaml:1: nats"},
	} {
		a, err := bundle.Build(map[string][]byte{"rolecall.yaml": []byte(tc.yaml)})
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			_, err := bundle.Check(a)
			var be *bundle.Error
			if !errors.As(err, &be) || be.Code != bundle.CodeInvalid || be.Path+": "+strings.SplitN(be.Message, ":", 2)[0] != tc.want {
				t.Fatalf("%q: %v; want %s", tc.yaml, err, tc.want)
			}
		}
	}
}

// TestLoadErrorSaysItOnce: a bundle whose configuration does not load is
// refused with an error that states the problem once (it said it three
// times: as the path, the message and the first problem), in /readyz, the
// logs, the service's reload_error and push's output alike.
func TestLoadErrorSaysItOnce(t *testing.T) {
	for _, tc := range []struct{ file, content, problem string }{
		{"rolecall.yaml", "default_pack: default\nbogus: 1\n", `rolecall.yaml:2: config_invalid: key "bogus": unknown key`},
		{"rolecall.yaml", "default_pack: [\n", "rolecall.yaml:1: config_invalid"},
	} {
		a, err := bundle.Build(map[string][]byte{tc.file: []byte(tc.content)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = bundle.Check(a)
		var be *bundle.Error
		if !errors.As(err, &be) || be.Code != bundle.CodeInvalid || len(be.Problems) != 1 {
			t.Fatalf("%q: %v; want bundle_invalid with its problem", tc.content, err)
		}
		if msg := err.Error(); strings.Count(msg, tc.problem) != 1 || strings.Count(msg, tc.file) != 2 {
			t.Errorf("%q: %s; want %q once, beside the file at fault", tc.content, msg, tc.problem)
		}
	}
}
