package events_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"

	"github.com/rolecall/rolecall/events"
)

// resolvedWithPrompt is the casts outcome with prompt as its prompt body
// (in a string of its own) and the system message built on it.
func resolvedWithPrompt(t testing.TB, prompt string) *events.ResolvedData {
	d := *resolvedFor(t, fullTask, nil)
	d.PromptBody = strings.Clone(prompt)
	d.SystemMessage = "You are part of rolecall.\n\n" + d.PromptBody
	return &d
}

// TestQuotedPromptTable: a prompt head (all but the last block) seen
// twice is kept quoted, and the kept form is used only for an equal head,
// never for one that hashes alike (same length and samples, a byte changed
// elsewhere), nor kept for invalid UTF-8; the last block is quoted anew.
func TestQuotedPromptTable(t *testing.T) {
	prompt := longPrompt(3000) + "\n\nFix ticket T-1."
	head := events.PromptHead(prompt)
	if len(head) >= len(prompt) || len(head) < 256 {
		t.Fatalf("head of %d bytes out of %d", len(head), len(prompt))
	}
	meta := testMeta("T-42")
	encodeBoth := func(p string) {
		t.Helper()
		checkSame(t, resolvedEncoders, "", meta, resolvedWithPrompt(t, p), false)
	}
	for range 2 {
		encodeBoth(prompt)
	}
	if !events.QuotedCached(prompt) {
		t.Fatal("a prompt encoded twice is not in the table")
	}
	// Other last blocks, one of them invalid: the head is used, the
	// block quoted (or refused) as it stands.
	for _, last := range []string{"Fix ticket T-2.", "\"quoted\" \u2028 ✓", "", "bad \xff", "\n"} {
		encodeBoth(head + "\n\n" + last)
	}
	// Outside the three 64-byte samples the hash reads (start, middle,
	// end of the head): same slot, different contents.
	for _, i := range []int{100, len(head)/2 + 40, len(head) - 100} {
		b := []byte(prompt)
		b[i] ^= 1
		other := string(b)
		encodeBoth(other)
		// The slot had seen this hash (the prompt's): admitted at once.
		if !events.QuotedCached(other) {
			t.Fatalf("byte %d: the variant did not take the prompt's slot; the test would not test a shared slot", i)
		}
		encodeBoth(prompt) // must not be given the variant's bytes
		encodeBoth(prompt)
		b[i] = 0xff
		for range 3 {
			encodeBoth(string(b))
		}
		if events.QuotedCached(string(b)) || !events.QuotedCached(prompt) {
			t.Errorf("byte %d: invalid UTF-8 was kept, or replaced the prompt", i)
		}
	}
	// Short prompts and prompts whose last blank line comes early are
	// quoted whole (or keyed whole).
	for _, p := range []string{"short\n\nprompt", strings.Repeat("x", 300) + "\n\n" + longPrompt(500), strings.Repeat("y", 400),
		"ab\n\n" + strings.Repeat("z", 300)} {
		for range 3 {
			encodeBoth(p)
		}
	}
}

// TestQuotedPreamble: the part of a system message before its prompt body
// (a preamble and a blank line, the same in every outcome) is kept in the
// table once seen twice, when it is long enough; what is kept is used only
// for an equal preamble, and invalid UTF-8 is neither kept nor encoded by
// the fast path.
func TestQuotedPreamble(t *testing.T) {
	meta := testMeta("T-42")
	prompt := longPrompt(3000) + "\n\nFix ticket T-1."
	with := func(preamble string) *events.ResolvedData {
		d := resolvedWithPrompt(t, prompt)
		d.SystemMessage = preamble + d.PromptBody
		return d
	}
	long := strings.Repeat("You are part of rolecall. \"Quote\" <tag> & \u2028 ✓\n", 12) + "\n\n"
	if len(long) < 256 {
		t.Fatalf("preamble of %d bytes is too short for the table", len(long))
	}
	for range 3 {
		checkSame(t, resolvedEncoders, "", meta, with(long), false)
	}
	if !events.ContentsCached(long) {
		t.Fatal("a preamble encoded three times is not in the table")
	}
	// Same length and samples, a byte changed between them: never given
	// the kept bytes.
	b := []byte(long)
	b[100] ^= 1
	for range 3 {
		checkSame(t, resolvedEncoders, "", meta, with(string(b)), false)
		checkSame(t, resolvedEncoders, "", meta, with(long), false)
	}
	b[100] = 0xff
	for range 3 {
		if err := checkSame(t, resolvedEncoders, "", meta, with(string(b)), false); err == nil {
			t.Fatal("an invalid preamble was encoded")
		}
	}
	if events.ContentsCached(string(b)) {
		t.Error("an invalid preamble was kept")
	}
	// Too short for the table: quoted each time.
	for range 3 {
		checkSame(t, resolvedEncoders, "", meta, with("short preamble\n\n"), false)
	}
	if events.ContentsCached("short preamble\n\n") {
		t.Error("a preamble under the minimum length was kept")
	}
}

// TestQuotedPromptTableConcurrent: encoders share the table (run with
// -race); every body equals the one a lone encoder writes.
func TestQuotedPromptTableConcurrent(t *testing.T) {
	prompts := []string{longPrompt(2000) + "\n\na", longPrompt(2000) + "\n\nb", longPrompt(5000), longPrompt(300), longPrompt(2000) + "a"}
	meta := testMeta("T-42")
	want := make([][]byte, len(prompts))
	for i, p := range prompts {
		_, _, b, err := events.AppendResolvedReflect(nil, "", meta, resolvedWithPrompt(t, p))
		if err != nil {
			t.Fatal(err)
		}
		want[i] = b
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			var buf []byte
			for n := range 200 {
				i := (g + n) % len(prompts)
				_, _, body, err := events.AppendResolved(buf, "", meta, resolvedWithPrompt(t, prompts[i]))
				if err != nil {
					t.Error(err)
					return
				}
				if !bytes.Equal(body, want[i]) {
					t.Errorf("goroutine %d, outcome %d: body differs from the reference", g, n)
					return
				}
				buf = body
			}
		})
	}
	wg.Wait()
}
