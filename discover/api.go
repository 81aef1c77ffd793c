package discover

import (
	"fmt"
	"time"

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

// PackFile is a discovered pack with where it came from.
type PackFile struct {
	Pack   *resolve.Pack // sealed
	Origin Origin
	// KeyLines maps dotted key paths ("name", "roles", "roles.architect",
	// "roles.architect.model") to lines.
	KeyLines map[string]int
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
	Concurrency     int             `yaml:"concurrency"`
	CreateStreams   *bool           `yaml:"create_streams"`
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
	// Origin is rolecall.yaml, or zero when there is none.
	Origin Origin
	// KeyLines maps dotted key paths ("defaults.model", "overlays.architect",
	// "nats.ack_wait") to lines.
	KeyLines   map[string]int
	Extensions map[string]any
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
	// ReloadInterval bounds how often Source re-stats the files: 0 means on
	// every call to Snapshot (tests, one-shot commands). A worker should use
	// a second or more: a sweep costs one stat per file (about 2 ms for 200
	// profiles), and for a short while after an edit a sweep also reloads
	// (see Source).
	ReloadInterval time.Duration
}
