package discover

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rolecall/rolecall/resolve"
)

// MaxFileSize bounds every file discovery reads (1 MiB). A larger file is
// refused before it is read.
const MaxFileSize = 1 << 20

// Error is a typed discovery failure. File is the path relative to the
// config root, slash-separated (prefixed "builtin:" for embedded files);
// Line is 1-based (0 = unknown).
type Error struct {
	Code resolve.Code
	File string
	Line int
	// Key is the dotted key path at fault ("roles.architect.model"), or "".
	Key string
	// Subject is the offending name (pack, profile, role), or "".
	Subject string
	Message string
	// Paths lists every file involved (both paths for profile_duplicate).
	Paths []string
	// Extra holds further members of the failure's details: "cycle" (the
	// packs of an extends cycle), "chain" (an extends chain too deep),
	// "placeholder" (a placeholder as written, never its value).
	Extra map[string]any
}

func (e *Error) Error() string {
	loc := e.File
	if loc == "" {
		loc = "<root>"
	}
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", loc, e.Line)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Code, e.Message)
}

// printable is e with every name it carries (File, Subject, Paths,
// Message) made printable text: a file name is any bytes, and one that is
// not valid UTF-8 or holds a control or format character is written with
// Go escapes, so a failure's JSON can be encoded and a validate line stays
// one line. e itself is returned when it needs no change.
func (e *Error) printable() *Error {
	ok := printableText(e.File) && printableText(e.Subject) && printableText(e.Message)
	for _, p := range e.Paths {
		ok = ok && printableText(p)
	}
	if ok {
		return e
	}
	c := *e
	c.File, c.Subject, c.Message = printableName(e.File), printableName(e.Subject), printableName(e.Message)
	c.Paths = make([]string, len(e.Paths))
	for i, p := range e.Paths {
		c.Paths[i] = printableName(p)
	}
	return &c
}

// printableText reports whether s is valid UTF-8 without control or
// format characters.
func printableText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) })
}

// printableName is s, or when s is not printable text, s with each
// invalid byte and each control or format character as a Go escape
// (\xff, \n, \u202e).
func printableName(s string) string {
	if printableText(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Is matches another *Error by Code, like resolve.ResolutionError.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Details is the failure payload's details object: file, line, key and
// paths, each only when known.
func (e *Error) Details() map[string]any {
	d := map[string]any{}
	if e.File != "" {
		d["file"] = e.File
	}
	if e.Line > 0 {
		d["line"] = e.Line
	}
	if e.Key != "" {
		d["key"] = e.Key
	}
	if len(e.Paths) > 0 {
		d["paths"] = append([]string(nil), e.Paths...)
	}
	for k, v := range e.Extra {
		if l, ok := v.([]string); ok {
			v = append([]string(nil), l...)
		}
		d[k] = v
	}
	return d
}

// Origin is where a value was read: file (root-relative or "builtin:…")
// and 1-based line (0 = unknown). File "task" means the task itself and
// "builtin" a compiled-in default.
type Origin struct {
	File string `json:"file"`
	Line int    `json:"line,omitzero"`
}

func (o Origin) String() string {
	if o.Line > 0 {
		return fmt.Sprintf("%s:%d", o.File, o.Line)
	}
	return o.File
}

// Profile is a discovered external profile with where it came from.
type Profile struct {
	resolve.ExternalProfile
	Origin Origin
	// KeyLines maps each frontmatter key to its line in the file; "body"
	// is the first line of the body.
	KeyLines map[string]int
	// Extensions holds the opaque x- keys.
	Extensions map[string]any
}

// PackFile is a discovered pack, composed with its mixins and with its
// placeholders resolved, and where each part of it came from.
type PackFile struct {
	Pack   *resolve.Pack // sealed
	Origin Origin        // the pack's own file
	// KeyOrigins maps dotted key paths ("name", "roles", "roles.architect",
	// "roles.architect.model", "roles.architect.variants[1].set.effort") to
	// the file and line they are written at: the pack's own file or the
	// mixin that supplied the value.
	KeyOrigins map[string]Origin
	// Mixins names the packs it extends, directly or not, in the order
	// they were applied (the pack itself, applied last, is not listed).
	Mixins []string
	// Files lists every file the pack was composed from with the sha256
	// of its bytes: the mixins and the pack in the order applied, then
	// each ${file:…} target once. FilesDigest is the sha256 over that list.
	Files       []FileDigest
	FilesDigest string
	// Placeholders lists every placeholder the pack and its mixins use, in
	// the order applied.
	Placeholders []Placeholder
	// masks are the values placeholders gave, kept out of messages.
	masks masks
	// Extensions holds the opaque top-level x- keys.
	Extensions map[string]any
	// RoleExtensions holds the x- keys of each role entry that has any.
	RoleExtensions map[string]map[string]any
}

// CatalogFile is where one catalog Role or Mode was read.
type CatalogFile struct {
	Origin Origin
	// KeyLines maps each frontmatter key to its line; "body" is the first
	// line of the body.
	KeyLines   map[string]int
	Extensions map[string]any
}

// TLSConfig names the TLS files for the NATS connection.
type TLSConfig struct {
	CA   string `yaml:"ca" json:"ca,omitzero"`
	Cert string `yaml:"cert" json:"cert,omitzero"`
	Key  string `yaml:"key" json:"key,omitzero"`
}

// NATSConfig is the nats: block of rolecall.yaml. Zero values mean "use the
// worker's default"; cmd/worker applies ROLECALL_* variables and flags on top.
// Durations are written as Go duration strings ("30s").
type NATSConfig struct {
	URL             string          `yaml:"url"`
	Creds           string          `yaml:"creds"`
	NKey            string          `yaml:"nkey"`
	User            string          `yaml:"user"`
	Password        string          `yaml:"password"`
	TLS             TLSConfig       `yaml:"tls"`
	SubjectPrefix   string          `yaml:"subject_prefix"`
	TasksStream     string          `yaml:"tasks_stream"`
	SpecsStream     string          `yaml:"specs_stream"`
	Consumer        string          `yaml:"consumer"`
	Replicas        int             `yaml:"replicas"`
	MaxDeliver      int             `yaml:"max_deliver"`
	AckWait         time.Duration   `yaml:"ack_wait"`
	Backoff         []time.Duration `yaml:"backoff"`
	DuplicateWindow time.Duration   `yaml:"duplicate_window"`
	// RetryFor is how long a delivery retries a transient broker fault in
	// place before it gives its task back (0 = the worker's default).
	RetryFor time.Duration `yaml:"retry_for"`
	// IdempotencyHorizon is how long each event's outcome is remembered;
	// nil is the worker's default and a written 0 turns the store off.
	IdempotencyHorizon *time.Duration `yaml:"idempotency_horizon"`
	Concurrency        int            `yaml:"concurrency"`
	CreateStreams      *bool          `yaml:"create_streams"`
}

// Legacy profile policies (rolecall.yaml legacy_profiles).
const (
	LegacyAllow  = "allow"
	LegacyReject = "reject"
)

// Config is the decoded rolecall.yaml (all fields optional). Without a
// rolecall.yaml it holds the defaults: LegacyProfiles "allow" and
// Defaults.LionSystem true.
type Config struct {
	DefaultPack    string
	Defaults       resolve.RuntimeDefaults
	Overlays       map[string]string
	ProfileRoots   []string
	LegacyProfiles string // "allow" (default) or "reject"
	PreambleFile   string
	NATS           NATSConfig
	// Models is the model catalog of models:, sealed; nil without one.
	Models *resolve.ModelCatalog
	// Sources are the skill sources of sources:, in declaration order.
	Sources []SkillSource
	// Origin is rolecall.yaml, or zero when there is none.
	Origin Origin
	// KeyLines maps dotted key paths ("defaults.model", "overlays.architect",
	// "nats.ack_wait") to lines.
	KeyLines   map[string]int
	Extensions map[string]any
	// PlaceholderEnv are the globs (path.Match) of the environment
	// variables ${env:…} may read, in packs and here (placeholders.env).
	PlaceholderEnv []string
	// Placeholders lists the placeholders rolecall.yaml uses.
	Placeholders []Placeholder
	// masks are the values placeholders gave, kept out of messages.
	masks masks
}

// Request is what a task asks for, before any file is touched. Names are
// validated (resolve.ValidateName) by Snapshot.Inputs.
type Request struct {
	Ref     resolve.RoleRef
	Pack    *string
	Profile *string
	Task    resolve.TaskOverrides
}

// Options tune Load and Source.
type Options struct {
	// ReloadInterval is how often a started Source (Source.Start) sweeps
	// all the files for changes; 0 means DefaultSafetySweep while file
	// events work and DefaultReloadInterval otherwise. The sweep runs on
	// the Source's own goroutine, never in Snapshot, and costs one stat
	// per file (docs/PERFORMANCE.md has the figures for a large root).
	ReloadInterval time.Duration
	// PollOnly turns file events off: changes are found by the periodic
	// sweep alone (for network file systems, which deliver no events).
	PollOnly bool
	// LookupEnv reads the environment variables of ${env:…} placeholders
	// (nil: os.LookupEnv).
	LookupEnv func(name string) (string, bool)
	// AllowHardLinks reads files that have more than one hard link. By
	// default such a file is path_escape: os.Root confines symlinks but
	// cannot tell where a hard link's other names are.
	AllowHardLinks bool
}
