package events_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// TestAppendIsEncode: the Append forms give the bytes, headers and subject
// of the Encode forms, write into the caller's array when it is large
// enough, and never read what the array held before.
func TestAppendIsEncode(t *testing.T) {
	resolved := resolvedFor(t, fullTask, nil)
	failed := &events.FailureData{TaskID: ptr("T-44"), Stage: resolve.StageResolve, Code: resolve.CodeModeConflict,
		Subject: ptr("slow"), Details: map[string]any{"modes": []string{"fast", "slow"}}, Message: "conflict"}
	type enc func(dst []byte) (string, []byte, error)
	cases := []struct {
		name     string
		encode   enc
		appendTo enc
	}{
		{"resolved",
			func([]byte) (string, []byte, error) {
				s, _, b, err := events.EncodeResolved("", testMeta("T-42"), resolved)
				return s, b, err
			},
			func(dst []byte) (string, []byte, error) {
				s, _, b, err := events.AppendResolved(dst, "", testMeta("T-42"), resolved)
				return s, b, err
			}},
		{"failed",
			func([]byte) (string, []byte, error) {
				s, _, b, err := events.EncodeFailed("", testMeta("T-44"), failed)
				return s, b, err
			},
			func(dst []byte) (string, []byte, error) {
				s, _, b, err := events.AppendFailed(dst, "", testMeta("T-44"), failed)
				return s, b, err
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantSubj, want, err := c.encode(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, dst := range map[string][]byte{
				"nil":             nil,
				"too small":       []byte("stale"),
				"large and dirty": bytes.Repeat([]byte("x"), 2*len(want)),
			} {
				subj, got, err := c.appendTo(dst)
				if err != nil {
					t.Fatal(err)
				}
				if subj != wantSubj {
					t.Errorf("subject %s, want %s", subj, wantSubj)
				}
				if diff := cmp.Diff(string(want), string(got)); diff != "" {
					t.Errorf("body (-encode +append):\n%s", diff)
				}
				if cap(dst) >= len(want) && &got[0] != &dst[:1][0] {
					t.Error("a large enough dst was not reused")
				}
			}
		})
	}
}
