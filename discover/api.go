package discover

import (
	"fmt"
	"time"

	"github.com/rolecall/rolecall/resolve"
)

// Error is a typed discovery failure. File is the path relative to its root
// (prefixed "builtin:" for embedded files); Line is 1-based (0 = unknown).
type Error struct {
	Code    resolve.Code
	File    string
	Line    int
	Key     string
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

// Origin is where a value was read: file (root-relative or "builtin:…")
// and 1-based line (0 = unknown).
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
	// KeyLines maps each frontmatter key to its line.
	KeyLines map[string]int
	// Extensions holds the opaque x- keys.
	Extensions map[string]any
}

// PackFile is a discovered pack with where it came from.
type PackFile struct {
	Pack   *resolve.Pack // sealed
	Origin Origin
	// KeyLines maps "role" and "role.key" to lines.
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

// Config is the decoded rolecall.yaml (all fields optional).
type Config struct {
	DefaultPack    string
	Defaults       resolve.RuntimeDefaults
	Overlays       map[string]string
	ProfileRoots   []string
	LegacyProfiles string // "allow" (default) or "reject"
	PreambleFile   string
	NATS           NATSConfig
	Origin         Origin
	KeyLines       map[string]int
	Extensions     map[string]any
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
	// every call to Snapshot.
	ReloadInterval time.Duration
}
