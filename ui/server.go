package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rolecall/rolecall/pipeline"
)

// Options configure the audit view.
type Options struct {
	// JetStream reads the specs stream and the outcome store of Config.
	JetStream jetstream.JetStream
	Config    pipeline.Config
	// Snapshots is the worker's configuration, which decisions are
	// explained against.
	Snapshots pipeline.SnapshotSource
	// Token, when set, is the bearer token /api/ requires.
	Token []byte
	// MaxScan bounds how many messages one list request reads (0 = 5000).
	MaxScan int
	// Now is the clock for since=DURATION (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// ErrTokenRequired refuses a listener that is not on loopback and has no
// bearer token.
var ErrTokenRequired = errors.New("ui: an address that is not loopback requires a bearer token (--ui-token-file)")

// Server is a running audit view.
type Server struct {
	ln  net.Listener
	srv *http.Server
}

// Listen serves the audit view on addr until Close. An address whose
// host is not a loopback IP or "localhost" needs opt.Token.
func Listen(addr string, opt Options) (*Server, error) {
	if !IsLoopback(addr) && len(opt.Token) == 0 {
		return nil, ErrTokenRequired
	}
	h, err := Handler(opt)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && opt.Logger != nil {
			opt.Logger.Error("audit view", "error", err)
		}
	}()
	return s, nil
}

// Addr is the address it listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops it, letting requests in progress finish until ctx ends.
func (s *Server) Close(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// IsLoopback reports whether addr (host:port) listens on loopback only.
// An empty host listens everywhere; a host name other than localhost
// could resolve anywhere, so neither is.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ReadToken reads a bearer token file: its content without surrounding
// white space, which must not be empty.
func ReadToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("token file %s is empty", path)
	}
	return b, nil
}

//go:embed static
var static embed.FS

// Handler is the audit view's handler, for a listener of the caller's.
func Handler(opt Options) (http.Handler, error) {
	if opt.JetStream == nil || opt.Snapshots == nil {
		return nil, errors.New("ui: Options.JetStream and Options.Snapshots are required")
	}
	opt.Config = opt.Config.WithDefaults()
	if opt.MaxScan <= 0 {
		opt.MaxScan = 5000
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	files, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	a := &api{opt: opt}
	mux := http.NewServeMux()
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", http.FileServerFS(files)))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	// Browsers ask for an icon; there is none, and a 404 would be noise.
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.Handle("GET /api/decisions", a.auth(http.HandlerFunc(a.list)))
	mux.Handle("GET /api/decisions/{id}", a.auth(http.HandlerFunc(a.detail)))
	// Every other API path answers in the API's error shape too.
	mux.Handle("GET /api/", a.auth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "the API serves /api/decisions and /api/decisions/{id}")
	})))
	return secure(opt.Token == nil, mux), nil
}

// csp allows the page its own script, style and API, and nothing else.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// secure sets the headers of every response and refuses what a read-only
// view never serves: other methods, and (without a token) requests that
// name a host other than loopback, which is how a DNS-rebinding page on
// the same machine would reach it.
func secure(checkHost bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "the audit view is read-only")
			return
		}
		if checkHost && !IsLoopback(hostPort(r.Host)) {
			writeError(w, http.StatusForbidden, "host_not_loopback", "without a token the audit view answers only requests to a loopback host")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostPort gives a Host header a port, for IsLoopback.
func hostPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}

type api struct{ opt Options }

// auth requires the bearer token, when one is set. Both sides are hashed
// first, so the comparison takes the same time whatever the length.
func (a *api) auth(next http.Handler) http.Handler {
	if a.opt.Token == nil {
		return next
	}
	want := sha256.Sum256(a.opt.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 || !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="rolecall"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "a bearer token is required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// jsonOptions encode API responses: HTML-significant characters escaped
// (the data holds what tasks and config files wrote), sorted keys, nil as
// null.
var jsonOptions = json.JoinOptions(
	jsontext.EscapeForHTML(true),
	json.Deterministic(true),
	json.FormatNilSliceAsNull(true),
	json.FormatNilMapAsNull(true),
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v, jsonOptions)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody("internal", "the response could not be encoded"), jsonOptions)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// APIError is the body of every error response.
type APIError struct {
	Error struct {
		Code    string         `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details"`
	} `json:"error"`
}

func errorBody(code, message string) APIError {
	var e APIError
	e.Error.Code, e.Error.Message, e.Error.Details = code, message, map[string]any{}
	return e
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorBody(code, message))
}
