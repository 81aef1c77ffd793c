package resolve_test

import (
	"strings"
	"testing"

	"github.com/rolecall/rolecall/resolve"
)

// TestPlanDigestBothWays: a plan finishes digests from a kept hash state
// when the encoding before the extra prompt is long (a profile's body),
// and hashes it all again when it is short; both give InputsDigest's
// digest for every extra prompt. (TestPropertyPlan draws both too, but
// not in every run.)
func TestPlanDigestBothWays(t *testing.T) {
	short := benchInputs()
	short.Task.Modes = []string{"mode03", "mode07"}
	long := benchInputs()
	long.Profile = &resolve.ExternalProfile{
		Name: "ghostwriter", Disposition: resolve.DispositionReplacement,
		Body: strings.Repeat("You write release notes for engineers; be precise and brief. ", 25),
	}
	for _, c := range []struct {
		name string
		ref  resolve.RoleRef
		in   resolve.Inputs
		kept bool
	}{
		{"casts, no profile", resolve.RoleName("role04"), short, false},
		{"replacement, 1.5 KB body", resolve.ExternalRef{Name: "ghostwriter"}, long, true},
	} {
		plan := resolve.NewPlan(c.ref, c.in, "You are part of a fleet.")
		if err := plan.Err(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := resolve.PlanKeepsState(plan); got != c.kept {
			t.Errorf("%s: hash state kept %v, want %v", c.name, got, c.kept)
		}
		for _, extra := range []*string{nil, ptr(""), ptr("Cover version 2.3."), ptr(strings.Repeat("x", 3000))} {
			in := c.in
			in.Task.ExtraPrompt = extra
			if got, want := plan.InputsDigest(extra), resolve.InputsDigest(c.ref, in); got != want {
				t.Errorf("%s, extra prompt %v: digest %s, want %s", c.name, extra, got, want)
			}
		}
	}
}
