package events_test

import (
	"regexp"
	"testing"

	"github.com/rolecall/rolecall/events"
)

var idPattern = regexp.MustCompile(`^rc-[0-9a-f]{32}$`)

func TestOutcomeIDIsDeterministic(t *testing.T) {
	// Pinned: these values are a contract across workers and releases
	// (a change would let a redelivered task publish a second outcome).
	pinned := []struct{ got, want string }{
		{events.OutcomeID("urn:rolecall:test-planner", "evt-0001"), "rc-4475e794d3beceb160c18be689fdeaca"},
		{events.OutcomeIDForSequence("ROLECALL_TASKS", 17), "rc-b88aea572c718b68c11302fb93874110"},
	}
	for _, p := range pinned {
		if p.got != p.want {
			t.Errorf("id %s, want %s", p.got, p.want)
		}
	}
	for _, id := range []string{events.OutcomeID("s", "i"), events.OutcomeIDForSequence("S", 0)} {
		if !idPattern.MatchString(id) {
			t.Errorf("%q does not match %s", id, idPattern)
		}
	}
}

func TestOutcomeIDSeparatesInputs(t *testing.T) {
	ids := map[string]string{}
	add := func(name, id string) {
		if prev, ok := ids[id]; ok {
			t.Errorf("%s and %s share id %s", prev, name, id)
		}
		ids[id] = name
	}
	add("ab|c", events.OutcomeID("ab", "c"))
	add("a|bc", events.OutcomeID("a", "bc"))
	add("c|ab", events.OutcomeID("c", "ab"))
	add("seq S 1", events.OutcomeIDForSequence("S", 1))
	add("seq S 11", events.OutcomeIDForSequence("S", 11))
	add("seq S1 1", events.OutcomeIDForSequence("S1", 1))
	add("seq as source", events.OutcomeID("seq", "S\x001"))
}

// Both content modes of one input, and every redelivery of it, name the
// same outcome.
func TestOutcomeIDSameForBothModes(t *testing.T) {
	var got []string
	for _, m := range modes {
		h, body := encode(t, minimalTask, m.binary)
		for range 2 {
			inc, err := events.DecodeTask(h, body, events.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, events.OutcomeID(inc.Source, inc.ID))
		}
	}
	for _, id := range got {
		if id != got[0] {
			t.Fatalf("ids differ: %v", got)
		}
	}
}
