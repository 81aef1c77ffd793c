// Package resolve is rolecall's pure resolver: typed inputs in, one
// ResolvedAgentSpec with per-field provenance out, or the first
// *ResolutionError in the validation order of docs/CONFIG.md.
//
// Resolve is the one entry point that decides. Around it are the values
// it reads and returns, the digests (InputsDigest, CatalogDigest,
// PackDigest), Roster, and the prompt rendering that Resolve and the
// materializer share (JoinBlocks, DirectiveBlock, CastsPrompt).
//
// What it promises:
//   - Everything here is pure: no I/O, no environment, no clock, no
//     goroutines, no logging, no caches.
//   - Inputs are never mutated, and no slice or map of a result aliases an
//     input or another result.
//   - Absent and empty differ everywhere: a nil slice or pointer is absent,
//     a non-nil empty slice is an explicit empty value (modes: [] means no
//     Modes; tools: [] means no tools), and an explicit false beats a true.
//   - Equal inputs give equal results, equal diagnostics and an equal
//     InputsDigest.
//
// What it does not do: it never searches for a profile (the caller supplies
// the one explicitly selected), never reads files, and never enforces a
// PermissionPolicy; it only carries it.
//
// A bare role name (RoleName) selects only the built-in catalog; a
// replacement profile is selected only by ExternalRef, which
// ParseRoleToken produces from the surface token "external:<name>".
package resolve
