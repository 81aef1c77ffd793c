// Package materialize turns a resolve.ResolvedAgentSpec into the inputs a
// provider layer needs: a Role-backed AgentSpec for casts and overlay
// identities, the verbatim prompt for a replacement, the final system
// message, and a RunEnvelope with the provider-only values.
//
// It is pure, like resolve: no I/O, environment, clock, goroutines or
// logging, and it never mutates its input. It repeats no precedence, never
// consults another pack and never restores default Modes: every value is
// copied from the resolved spec. It refuses (materialize_failed) a spec
// whose carried Profile is not the one its identity names, and Materialize
// refuses one whose AgentSpec would not rebuild prompt_body exactly.
package materialize
