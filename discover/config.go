package discover

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rolecall/rolecall/resolve"
	"go.yaml.in/yaml/v3"
)

// ConfigFile is the worker config's file name in the config root.
const ConfigFile = "rolecall.yaml"

var (
	configKeys   = []string{"default_pack", "defaults", "overlays", "profile_roots", "legacy_profiles", "preamble_file", "nats", "models", "sources", "placeholders"}
	defaultsKeys = []string{"model", "effort", "tools", "permissions", "yolo", "bypass", "fast_mode", "lion_system"}
	natsKeys     = []string{
		"url", "creds", "nkey", "user", "password", "tls", "subject_prefix", "tasks_stream",
		"specs_stream", "consumer", "replicas", "max_deliver", "ack_wait", "backoff",
		"duplicate_window", "retry_for", "idempotency_horizon", "concurrency", "create_streams",
	}
	tlsKeys = []string{"ca", "cert", "key"}
)

// defaultConfig is the configuration without a rolecall.yaml.
func defaultConfig() Config {
	return Config{
		LegacyProfiles: LegacyAllow,
		Defaults:       resolve.RuntimeDefaults{LionSystem: true},
		KeyLines:       map[string]int{},
	}
}

// decodeConfig decodes rolecall.yaml, resolving its placeholders with
// x. Names in it are checked for syntax; whether they exist is Validate's
// business (and Inputs' per task).
func decodeConfig(file string, data []byte, x *expander) (Config, *Error) {
	cfg := defaultConfig()
	cfg.Origin = Origin{File: file}
	d := &ydoc{path: file, code: resolve.CodeConfigInvalid}
	raw, err := d.parse(data)
	if err != nil {
		return Config{}, err
	}
	if raw == nil {
		return cfg, nil
	}
	// placeholders: is read as written, first: it says what the
	// placeholders of every other value may read.
	ps, err := d.pairs(raw, "")
	if err != nil {
		return Config{}, err
	}
	for _, p := range ps {
		if p.key == "placeholders" && !isNull(p.v) {
			if cfg.PlaceholderEnv, err = d.placeholderPolicy(p.v, p.key, cfg.KeyLines); err != nil {
				return Config{}, err
			}
		}
	}
	x.allow = cfg.PlaceholderEnv
	o := newNodeOrigins()
	root, used, err := x.expandTree(raw, file, resolve.CodeConfigInvalid, o, func(k string) bool { return k == "placeholders" })
	if err != nil {
		return Config{}, err
	}
	cfg.Placeholders = used
	d.origins = o
	err = d.fields(root, "", configKeys, &cfg.Extensions, cfg.KeyLines, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "placeholders": // read above
		case "default_pack":
			cfg.DefaultPack, err = d.name(f.v, key)
		case "defaults":
			err = d.defaults(f.v, key, &cfg)
		case "overlays":
			err = d.overlays(f.v, key, &cfg)
		case "profile_roots":
			err = d.profileRoots(f.v, key, &cfg)
		case "legacy_profiles":
			var s string
			if s, err = d.str(f.v, key); err == nil {
				if s != LegacyAllow && s != LegacyReject {
					err = d.errAt(f.v, key, "must be allow or reject, got %q", s)
				}
				cfg.LegacyProfiles = s
			}
		case "preamble_file":
			cfg.PreambleFile, err = d.localPath(f.v, key)
		case "nats":
			err = d.nats(f.v, key, &cfg)
		case "models":
			cfg.Models, err = d.models(f.v, key, cfg.KeyLines)
		case "sources":
			cfg.Sources, err = d.sources(f.v, key, cfg.KeyLines)
		}
		return err
	})
	if err != nil {
		return Config{}, err
	}
	cfg.masks = expandedValues(o, root)
	return cfg, nil
}

// placeholderPolicy decodes placeholders: {env: [globs]}, the environment
// variables ${env:…} may read. The globs use path.Match syntax.
func (d *ydoc) placeholderPolicy(n *yaml.Node, at string, lines map[string]int) ([]string, *Error) {
	var env []string
	err := d.fields(n, at, []string{"env"}, nil, lines, func(f pair, key string) *Error {
		var err *Error
		env, err = d.list(f.v, key, func(n *yaml.Node, key string) (string, *Error) {
			g, err := d.str(n, key)
			if err != nil {
				return "", err
			}
			if _, perr := path.Match(g, ""); perr != nil || strings.ContainsAny(g, "${}") {
				return "", d.errAt(n, key, "%q is not a glob of environment variable names (path.Match syntax, such as ROLECALL_*)", g)
			}
			return g, nil
		})
		return err
	})
	return env, err
}

func (d *ydoc) defaults(n *yaml.Node, path string, cfg *Config) *Error {
	def := &cfg.Defaults
	return d.fields(n, path, defaultsKeys, nil, cfg.KeyLines, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "model":
			def.Model, err = opt(d.ident(f.v, key))
		case "effort":
			def.Effort, err = opt(d.ident(f.v, key))
		case "tools":
			def.Tools, err = d.list(f.v, key, d.ident)
		case "permissions":
			def.Permissions, err = d.policy(f.v, key, cfg.KeyLines)
		case "yolo":
			def.Yolo, err = d.boolean(f.v, key)
		case "bypass":
			def.Bypass, err = d.boolean(f.v, key)
		case "fast_mode":
			def.FastMode, err = d.boolean(f.v, key)
		case "lion_system":
			def.LionSystem, err = d.boolean(f.v, key)
		}
		return err
	})
}

func (d *ydoc) overlays(n *yaml.Node, path string, cfg *Config) *Error {
	ps, err := d.pairs(n, path)
	if err != nil {
		return err
	}
	cfg.Overlays = make(map[string]string, len(ps))
	for _, p := range ps {
		key := join(path, p.key)
		if verr := resolve.ValidateName("role", p.key); verr != nil {
			return d.errAt(p.k, key, "invalid role name: %s", nameMsg(verr))
		}
		name, err := d.name(p.v, key)
		if err != nil {
			return err
		}
		cfg.KeyLines[key] = p.k.Line + d.off
		cfg.Overlays[p.key] = name
	}
	return nil
}

// localPath decodes a path that must stay inside the config root: relative,
// no "..", cleaned and slash-separated. Anything else is path_escape.
func (d *ydoc) localPath(n *yaml.Node, key string) (string, *Error) {
	s, err := d.str(n, key)
	if err != nil {
		return "", err
	}
	if !insideRoot(s) {
		e := d.errAt(n, key, "%q leaves the config root (it must be a relative path without ..)", s)
		e.Code = resolve.CodePathEscape
		return "", e
	}
	return path.Clean(filepath.ToSlash(s)), nil
}

// insideRoot reports whether p, a slash-separated path written in a file,
// names a path inside the config root: relative, with no ".." element
// (not even one that stays inside, like a/../b) and no backslash.
func insideRoot(p string) bool {
	return filepath.IsLocal(filepath.FromSlash(p)) && !strings.Contains(p, "\\") && !slices.Contains(strings.Split(p, "/"), "..")
}

func (d *ydoc) profileRoots(n *yaml.Node, key string, cfg *Config) *Error {
	roots, err := d.list(n, key, d.localPath)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, r := range roots {
		ikey := fmt.Sprintf("%s[%d]", key, i)
		cfg.KeyLines[ikey] = n.Content[i].Line + d.off
		switch {
		case r == profileDir:
			return d.errAt(n.Content[i], ikey, "%q may not be listed: it is always the first profile root", r)
		case seen[r]:
			return d.errAt(n.Content[i], ikey, "%q is listed twice", r)
		}
		seen[r] = true
	}
	cfg.ProfileRoots = roots
	return nil
}

func (d *ydoc) nats(n *yaml.Node, path string, cfg *Config) *Error {
	nc := &cfg.NATS
	return d.fields(n, path, natsKeys, nil, cfg.KeyLines, func(f pair, key string) *Error {
		var err *Error
		switch f.key {
		case "url":
			nc.URL, err = d.str(f.v, key)
		case "creds":
			nc.Creds, err = d.str(f.v, key)
		case "nkey":
			nc.NKey, err = d.str(f.v, key)
		case "user":
			nc.User, err = d.str(f.v, key)
		case "password":
			nc.Password, err = d.str(f.v, key)
		case "tls":
			err = d.fields(f.v, key, tlsKeys, nil, cfg.KeyLines, func(f pair, key string) *Error {
				s, err := d.str(f.v, key)
				switch f.key {
				case "ca":
					nc.TLS.CA = s
				case "cert":
					nc.TLS.Cert = s
				case "key":
					nc.TLS.Key = s
				}
				return err
			})
		case "subject_prefix":
			if nc.SubjectPrefix, err = d.str(f.v, key); err == nil && !validSubjectPrefix(nc.SubjectPrefix) {
				err = d.errAt(f.v, key, "%q is not a NATS subject prefix (dot-separated tokens without spaces, * or >)", nc.SubjectPrefix)
			}
		case "tasks_stream":
			nc.TasksStream, err = d.natsName(f.v, key)
		case "specs_stream":
			nc.SpecsStream, err = d.natsName(f.v, key)
		case "consumer":
			nc.Consumer, err = d.natsName(f.v, key)
		case "replicas":
			if nc.Replicas, err = d.positive(f.v, key); err == nil && nc.Replicas > 5 {
				err = d.errAt(f.v, key, "must be between 1 and 5, got %d", nc.Replicas)
			}
		case "max_deliver":
			nc.MaxDeliver, err = d.positive(f.v, key)
		case "ack_wait":
			nc.AckWait, err = d.duration(f.v, key)
		case "backoff":
			if f.v.Kind != yaml.SequenceNode {
				return d.errAt(f.v, key, "must be a list of duration strings, got %s", describeNode(f.v))
			}
			nc.Backoff = nil
			for i, c := range f.v.Content {
				v, err := d.duration(c, key+"["+strconv.Itoa(i)+"]")
				if err != nil {
					return err
				}
				nc.Backoff = append(nc.Backoff, v)
			}
		case "duplicate_window":
			nc.DuplicateWindow, err = d.duration(f.v, key)
		case "retry_for":
			nc.RetryFor, err = d.duration(f.v, key)
		case "idempotency_horizon":
			// 0 is a value here: the store turned off.
			if f.v.Kind == yaml.ScalarNode && (f.v.Value == "0" || f.v.Value == "0s") {
				nc.IdempotencyHorizon = new(time.Duration)
			} else {
				nc.IdempotencyHorizon, err = opt(d.duration(f.v, key))
			}
		case "concurrency":
			nc.Concurrency, err = d.positive(f.v, key)
		case "create_streams":
			nc.CreateStreams, err = opt(d.boolean(f.v, key))
		}
		return err
	})
}

// natsName decodes a stream or consumer name: no whitespace, '.', '*',
// '>', '/' or '\' (the characters JetStream refuses in names).
func (d *ydoc) natsName(n *yaml.Node, key string) (string, *Error) {
	s, err := d.str(n, key)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(s, " \t\r\n.*>/\\") {
		return "", d.errAt(n, key, "%q is not a valid JetStream name (no whitespace, '.', '*', '>', '/', '\\')", s)
	}
	return s, nil
}

func validSubjectPrefix(s string) bool {
	return !strings.ContainsAny(s, " \t\r\n*>") && !slices.Contains(strings.Split(s, "."), "")
}
