package reliability_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rolecall/rolecall/events"
	"github.com/rolecall/rolecall/resolve"
)

// fileBound is the peak RSS a one-shot command may reach on any hostile
// config root. The real figures are a few tens of MiB (docs/RELIABILITY.md);
// the bound is generous so that it catches an explosion, not noise.
const fileBoundKB = 256 << 10

// makeDevice puts a character device (the kernel's /dev/zero, 1:5) at
// path. Where mknod is not permitted (no CAP_MKNOD) it falls back to a
// Unix socket, which discovery must refuse in the same way; the returned
// kind says which one the case exercised.
func makeDevice(t testing.TB, path string) string {
	t.Helper()
	err := syscall.Mknod(path, syscall.S_IFCHR|0o644, int(1<<8|5))
	if err == nil {
		return "char device 1:5"
	}
	if !errors.Is(err, syscall.EPERM) {
		t.Fatal(err)
	}
	makeSocket(t, path)
	return "unix socket (mknod not permitted)"
}

func makeSocket(t testing.TB, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the socket file after the listener is closed.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
}

// TestHostileFiles runs `worker validate` and `worker resolve` on config
// roots that hold a hostile file each. Every one ends with a typed error
// naming the root-relative file, within a time limit and a memory bound;
// nothing blocks on a FIFO, follows a symlink out of the root, reads a
// 100 MB file or expands a YAML bomb.
func TestHostileFiles(t *testing.T) {
	outside := openDir(t)
	writeFile(t, filepath.Join(outside, "stolen.yaml"), "roles:\n  architect:\n    model: stolen\n")
	writeFile(t, filepath.Join(outside, "stolen.md"), "---\ndisposition: replacement\n---\nstolen\n")
	deep := "roles: " + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + "\n"
	overlay := "---\ndisposition: overlay\nbase_role: architect\n---\nbody\n"

	cases := []struct {
		name  string
		build func(t *testing.T, root string)
		task  string
		code  resolve.Code
		file  string // the root-relative file the error names
		msg   string
	}{
		{name: "profile symlink to /etc/passwd", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "agents"))
			symlink(t, "/etc/passwd", filepath.Join(root, "agents", "evil.md"))
		}, code: resolve.CodePathEscape, file: "agents/evil.md"},
		{name: "pack symlink climbing out", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "packs"))
			rel, err := filepath.Rel(filepath.Join(root, "packs"), filepath.Join(outside, "stolen.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			symlink(t, rel, filepath.Join(root, "packs", "team.yaml"))
		}, code: resolve.CodePathEscape, file: "packs/team.yaml"},
		{name: "agents dir symlink out of the root", build: func(t *testing.T, root string) {
			symlink(t, outside, filepath.Join(root, "agents"))
		}, code: resolve.CodePathEscape, file: "agents"},
		{name: "profile root symlink out of the root", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "rolecall.yaml"), "profile_roots: [team-agents]\n")
			symlink(t, outside, filepath.Join(root, "team-agents"))
		}, code: resolve.CodePathEscape, file: ""},
		{name: "profile root absolute", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "rolecall.yaml"), "profile_roots: [/etc]\n")
		}, code: resolve.CodePathEscape, file: "rolecall.yaml"},
		{name: "preamble outside the root", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "rolecall.yaml"), "preamble_file: ../../../etc/passwd\n")
		}, code: resolve.CodePathEscape, file: "rolecall.yaml"},
		{name: "profile FIFO", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "agents"))
			if err := syscall.Mkfifo(filepath.Join(root, "agents", "pipe.md"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, code: resolve.CodeProfileInvalid, file: "agents/pipe.md", msg: "not a regular file"},
		{name: "profile device", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "agents"))
			t.Logf("device kind: %s", makeDevice(t, filepath.Join(root, "agents", "zero.md")))
		}, code: resolve.CodeProfileInvalid, file: "agents/zero.md", msg: "not a regular file"},
		{name: "profile socket", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "agents"))
			makeSocket(t, filepath.Join(root, "agents", "sock.md"))
		}, code: resolve.CodeProfileInvalid, file: "agents/sock.md", msg: "not a regular file"},
		{name: "catalog role FIFO", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "catalog", "roles"))
			mkdir(t, filepath.Join(root, "catalog", "modes"))
			if err := syscall.Mkfifo(filepath.Join(root, "catalog", "roles", "architect.md"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, code: resolve.CodeCatalogInvalid, file: "catalog/roles/architect.md", msg: "not a regular file"},
		{name: "100 MB profile", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "agents"))
			sparse(t, filepath.Join(root, "agents", "big.md"), 100<<20)
		}, code: resolve.CodeProfileInvalid, file: "agents/big.md", msg: "larger than"},
		{name: "100 MB pack", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "packs"))
			sparse(t, filepath.Join(root, "packs", "team.yaml"), 100<<20)
		}, code: resolve.CodePackInvalid, file: "packs/team.yaml", msg: "larger than"},
		{name: "pack YAML bomb", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), hostileFile(t, "billion-laughs.yaml"))
		}, code: resolve.CodePackInvalid, file: "packs/team.yaml", msg: "anchors"},
		{name: "profile YAML bomb", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "agents", "bomb.md"), hostileFile(t, "billion-laughs-profile.md"))
		}, code: resolve.CodeProfileInvalid, file: "agents/bomb.md", msg: "anchors"},
		{name: "rolecall.yaml YAML bomb", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "rolecall.yaml"), hostileFile(t, "billion-laughs-config.yaml"))
		}, code: resolve.CodeConfigInvalid, file: "rolecall.yaml", msg: "anchors"},
		{name: "pack merge key", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), hostileFile(t, "merge-key.yaml"))
		}, code: resolve.CodePackInvalid, file: "packs/team.yaml"},
		{name: "pack with tabs and a BOM", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), hostileFile(t, "tabs-and-bom.yaml"))
		}, code: resolve.CodePackInvalid, file: "packs/team.yaml"},
		{name: "pack nested 10,000 deep", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), deep)
		}, code: resolve.CodePackInvalid, file: "packs/team.yaml"},
		{name: "frontmatter without closing ---", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "agents", "open.md"), hostileFile(t, "unclosed-frontmatter.md"))
		}, code: resolve.CodeProfileInvalid, file: "agents/open.md"},
		{name: "profile defined twice", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "agents", "dup.md"), overlay)
			writeFile(t, filepath.Join(root, "agents", "dup", "dup.md"), overlay)
		}, code: resolve.CodeProfileDuplicate, file: "agents/dup.md", msg: "agents/dup/dup.md and agents/dup.md"},
		{name: "pack not found", build: func(t *testing.T, root string) {},
			task: `{"task_id":"T-f","role":"architect","pack":"nope"}`, code: resolve.CodePackNotFound, file: "packs/nope.yaml"},
		{name: "config root missing", build: func(t *testing.T, root string) {
			mustRemove(t, root)
		}, code: resolve.CodeConfigInvalid, msg: "cannot open the config root"},
	}
	cases = append(cases, compositionCases(outside)...)
	taskDir := t.TempDir()
	var peakKB int64
	var slowest time.Duration
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "root")
			mkdir(t, root)
			tc.build(t, root)
			task := tc.task
			if stem, ok := strings.CutPrefix(tc.file, "packs/"); ok && task == "" {
				// A broken pack stops only the tasks that select it.
				task = `{"task_id":"T-f","role":"architect","pack":"` + strings.TrimSuffix(stem, ".yaml") + `"}`
			}
			if task == "" {
				task = `{"task_id":"T-f","role":"architect"}`
			}
			taskFile := filepath.Join(taskDir, "task.json")
			writeFile(t, taskFile, task)

			// validate reports every problem as file:line: code: message.
			start := time.Now()
			code, p := runWorkerCmd(t, 30*time.Second, nil, "validate", "--root", root)
			slowest = max(slowest, time.Since(start))
			peakKB = max(peakKB, p.maxRSSKB())
			out := p.stdout.String()
			if tc.name == "config root missing" {
				// Nothing was checked: exit 2, the reason on stderr.
				if code != 2 || out != "" || !strings.Contains(p.stderr.String(), tc.msg) {
					t.Errorf("validate: exit %d, want 2 with %q on stderr; stdout:\n%s\nstderr:\n%s", code, tc.msg, tail(out, 2000), tail(p.stderr.String(), 1000))
				}
			} else if tc.code == resolve.CodePackNotFound {
				if code != 0 {
					t.Errorf("validate: exit %d on a valid root:\n%s", code, out)
				}
			} else {
				if code != 1 || !strings.Contains(out, ": "+string(tc.code)+": ") {
					t.Errorf("validate: exit %d, want 1 with a %s line; stdout:\n%s\nstderr:\n%s", code, tc.code, tail(out, 2000), tail(p.stderr.String(), 1000))
				}
				if tc.file != "" && !strings.Contains(out, tc.file+":") && !strings.Contains(out, tc.file+": ") {
					t.Errorf("validate does not name %s:\n%s", tc.file, out)
				}
				if !strings.Contains(out, tc.msg) {
					t.Errorf("validate output does not say %q:\n%s", tc.msg, out)
				}
			}
			assertNoHostPath(t, []byte(out), root)

			// resolve prints the failure JSON the worker would publish.
			start = time.Now()
			code, p = runWorkerCmd(t, 30*time.Second, nil, "resolve", "--root", root, taskFile)
			slowest = max(slowest, time.Since(start))
			peakKB = max(peakKB, p.maxRSSKB())
			if code != 1 {
				t.Fatalf("resolve: exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, tail(p.stdout.String(), 2000), p.stderr.String())
			}
			var f events.FailureData
			if err := json.Unmarshal([]byte(p.stdout.String()), &f); err != nil {
				t.Fatalf("resolve output is not failure JSON: %v\n%s", err, p.stdout.String())
			}
			if f.Code != tc.code || f.Stage != tc.code.Stage() {
				t.Errorf("resolve: %s/%s (%s), want %s/%s", f.Stage, f.Code, f.Message, tc.code.Stage(), tc.code)
			}
			if got, _ := f.Details["file"].(string); tc.file != "" && got != tc.file {
				t.Errorf("details.file %q, want %q", got, tc.file)
			}
			if !strings.Contains(f.Message, tc.msg) {
				t.Errorf("message %q does not say %q", f.Message, tc.msg)
			}
			assertNoHostPath(t, []byte(p.stdout.String()), root)
			if len(p.stdout.String()) > 8<<10 {
				t.Errorf("failure JSON is %d bytes", len(p.stdout.String()))
			}
		})
	}
	t.Logf("figures: hostile_roots=%d peak_RSS=%dKiB (bound %dKiB) slowest_command=%s (limit 30s)", len(cases), peakKB, fileBoundKB, slowest.Round(time.Millisecond))
	if peakKB > fileBoundKB {
		t.Errorf("a command's peak RSS was %d KiB, over the %d KiB bound", peakKB, fileBoundKB)
	}
}

// compositionCases are hostile packs that compose: mixins that loop or
// nest without end, and placeholders that point at what must never be
// read.
func compositionCases(outside string) []struct {
	name  string
	build func(t *testing.T, root string)
	task  string
	code  resolve.Code
	file  string
	msg   string
} {
	type c = struct {
		name  string
		build func(t *testing.T, root string)
		task  string
		code  resolve.Code
		file  string
		msg   string
	}
	placeholder := func(target string) string {
		return "roles:\n  architect:\n    model: m\n    authority: [\"${file:" + target + "}\"]\n"
	}
	return []c{
		{name: "extends cycle", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), "extends: [loop]\n")
			writeFile(t, filepath.Join(root, "packs", "loop.yaml"), "extends: [team]\n")
		}, task: `{"task_id":"T-f","role":"architect","pack":"team"}`, code: resolve.CodePackInvalid, file: "packs/loop.yaml", msg: "cycle: team → loop → team"},
		{name: "extends 200 deep", build: func(t *testing.T, root string) {
			for i := range 200 {
				writeFile(t, filepath.Join(root, "packs", fmt.Sprintf("p%03d.yaml", i)), fmt.Sprintf("extends: [p%03d]\n", i+1))
			}
			writeFile(t, filepath.Join(root, "packs", "p200.yaml"), "roles: {}\n")
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), "extends: [p000]\n")
		}, task: `{"task_id":"T-f","role":"architect","pack":"team"}`, code: resolve.CodePackInvalid, file: "packs/p007.yaml", msg: "deeper than 8"},
		{name: "placeholder FIFO", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "prompts"))
			if err := syscall.Mkfifo(filepath.Join(root, "prompts", "pipe.txt"), 0o644); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), placeholder("prompts/pipe.txt"))
		}, code: resolve.CodePlaceholderUnresolved, file: "packs/team.yaml", msg: "not a regular file"},
		{name: "placeholder device", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "prompts"))
			t.Logf("device kind: %s", makeDevice(t, filepath.Join(root, "prompts", "zero.txt")))
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), placeholder("prompts/zero.txt"))
		}, code: resolve.CodePlaceholderUnresolved, file: "packs/team.yaml", msg: "not a regular file"},
		{name: "placeholder symlink to /etc/passwd", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "prompts"))
			symlink(t, "/etc/passwd", filepath.Join(root, "prompts", "p.txt"))
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), placeholder("prompts/p.txt"))
		}, code: resolve.CodePathEscape, file: "packs/team.yaml", msg: "leads outside"},
		{name: "placeholder climbing out", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), placeholder("../../"+filepath.Base(outside)+"/stolen.yaml"))
		}, code: resolve.CodePathEscape, file: "packs/team.yaml", msg: "leaves the config root"},
		{name: "placeholder 100 MB file", build: func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "prompts"))
			sparse(t, filepath.Join(root, "prompts", "big.txt"), 100<<20)
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), placeholder("prompts/big.txt"))
		}, code: resolve.CodePlaceholderUnresolved, file: "packs/team.yaml", msg: "larger than"},
		{name: "placeholder of an environment variable not allowed", build: func(t *testing.T, root string) {
			writeFile(t, filepath.Join(root, "packs", "team.yaml"), "roles:\n  architect:\n    model: ${env:HOME}\n")
		}, code: resolve.CodePlaceholderForbidden, file: "packs/team.yaml", msg: "not allowed"},
	}
}

func mkdir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
