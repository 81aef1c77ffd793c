// Package materialize turns a resolve.ResolvedAgentSpec into the inputs a
// provider layer needs: a Role-backed AgentSpec for casts and overlay
// identities, the verbatim prompt for a replacement, the final system
// message, and a RunEnvelope with the provider-only values.
//
// It is pure, like resolve: no I/O, environment, clock, goroutines or
// logging, and it never mutates its input. It repeats no precedence, never
// consults another pack and never restores default Modes: ADR-0043 D6.
// Materialize checks that the rebuilt casts prompt equals the resolved
// prompt_body and fails with materialize_failed otherwise.
package materialize
