// Package discover is rolecall's effectful shell around the pure resolver:
// it reads a config root (the embedded catalog and default pack, packs,
// external profiles, rolecall.yaml) and turns it into the typed inputs of
// package resolve, as one immutable Snapshot.
//
// # What it promises
//
// Strictness. Every YAML document and every Markdown frontmatter block is
// decoded strictly, by walking the yaml.Node tree: unknown keys, duplicate
// keys, wrong types (timeout: true, timeout: "5", enabled: "yes"), empty
// strings where a value is required, names that differ from the file stem,
// names outside resolve.ValidateName's grammar, YAML anchors and aliases
// (refused outright, so nothing is ever expanded), non-core tags, a second
// document, invalid UTF-8 and control characters are all errors. Keys that
// start with "x-" are accepted at a document's top level (and in pack role
// entries) and kept, uninterpreted, as Extensions. A null value means the
// key is absent. Every error is a *Error with a stable code (pack_invalid,
// profile_invalid, catalog_invalid, config_invalid, profile_duplicate,
// path_escape, pack_not_found, placeholder_forbidden,
// placeholder_unresolved), the file relative to the config root, the
// 1-based line and the dotted key.
//
// Composition. A pack may extend others (extends), merge them under a
// policy ($merge), use placeholders (${env:NAME}, ${file:PATH}) and carry
// variants. Mixins and placeholders are expanded here, once per snapshot,
// on copies of the parsed trees; the composed tree is decoded by the same
// strict walk as a single file, and every value keeps the file and line it
// was written at (PackFile.KeyOrigins), so errors and explain output point
// into the mixin. Variants are compiled to resolve.Variant and matched by
// the resolver. A pack that fails (its file, a mixin, a placeholder) is
// kept as its error in Snapshot.PackErrors: only tasks that select it fail.
// No error carries a placeholder's value.
//
// Path safety. Every read goes through os.Root. Absolute paths and ".." in
// rolecall.yaml (profile_roots, preamble_file) and symlinks that leave their
// root are path_escape; a symlink that stays inside its root is followed.
// Each profile root is opened as its own os.Root inside the config root.
// Only regular files are read, each at most MaxFileSize: the size and mode
// are checked before opening, the open is non-blocking and the result is
// re-checked, so a FIFO or device in place of a file is an error and never
// a blocking read. LoadFS reads the same layout from an fs.FS instead (a
// config bundle held in memory), with the same decoders and checks; names
// are checked with fs.ValidPath, and a skill source with an absolute root
// is refused there, since nothing outside the fs.FS may be read.
//
// Explicit selection. Snapshot.Inputs picks a profile only when something
// names it: the task's profile, the role token external:<name>, or a
// rolecall.yaml overlays binding for the task's role. A profile is never
// chosen because its name equals a Role, and a named profile that does not
// exist is external_profile_missing, never ignored.
//
// Snapshots. A Snapshot is immutable after Load and shared: Inputs returns
// references into it (the sealed catalog and pack, the profile) without
// copying, which is safe because neither discovery nor the resolver mutates
// them. Its Digest covers every file read, embedded ones included. A Source
// serves one snapshot with an atomic load, so per-task discovery is a few
// map lookups; once started, it sweeps the files on its own goroutine, a
// change produces a new snapshot without a restart (re-reading and
// re-decoding only the changed files), and a broken edit keeps the last
// good one (Source.Err reports why).
//
// # What it does not do
//
// It does not resolve: precedence, Mode validation and every resolver code
// belong to package resolve (Validate calls it to check pack defaults). It
// reads no flag, and no environment variable except those ${env:…}
// placeholders name and rolecall.yaml allows (through Options.LookupEnv);
// cmd/worker applies ROLECALL_* and flags on top of Config. It does not watch files with inotify, does not
// follow symlinks out of a root even when the target is readable, and does
// not interpret x- extensions. Load logs nothing; a Source logs one warning
// per failed reload, one per newly broken pack, and one Info per newly
// loaded legacy profile.
package discover
