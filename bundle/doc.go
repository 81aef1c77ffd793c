// Package bundle moves a rolecall configuration through NATS as versioned
// bundles, so every worker of a fleet decides with the same files and
// every change says who made it and why.
//
// A bundle is a deterministic tar archive of a config root (Pack): regular
// files only, sorted by path, with zeroed times, owners and modes, so the
// same files always give the same bytes and the same digest. Push validates
// the bundle exactly as a worker will load it, stores the archive in the
// object store ROLECALL_CONFIG under its digest, and moves the key current
// of the KV bucket ROLECALL_CONFIG by compare-and-swap, recording actor,
// message, digest and parent. History lives in keys history.<revision> of
// the same bucket, because KV keeps at most 64 values per key. Rollback
// moves current back to an earlier bundle the same way.
//
// Follow is the worker side: it follows current, reads each bundle into
// memory (ReadArchive refuses hostile archives with typed errors and never
// writes anywhere), loads it with discover.LoadFS, the strict, confined
// loader that reads config roots, and swaps the snapshot atomically. A bad
// bundle is refused and the last good snapshot stays in service; Status
// says so. RosterWriter writes each pack's roster to the KV bucket
// ROLECALL_ROSTER when it changes.
//
// The package does not decide which configuration is right: it carries the
// one an operator pushed, checked the same way everywhere.
package bundle
