package integration

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/rolecall/rolecall/integration/images"
)

func TestMain(m *testing.M) {
	// The reaper (ryuk) is an image to pull, and nothing can be pulled
	// here: every test removes its own containers and network instead.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	// Every published port is bound to 127.0.0.1 (see bindLoopback), so
	// that is the address wait strategies and clients must dial.
	if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" {
		os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	}
	flag.Parse()
	reason := skipReason()
	if reason == "" {
		os.Exit(m.Run())
	}
	fmt.Fprintf(os.Stderr, "integration: container tests skipped: %s (ROLECALL_REQUIRE_DOCKER=1 makes this a failure)\n", reason)
	// go test caches a passing result keyed by what the tests read, and it
	// only sees reads made while tests run: one run of TestSkipInputs reads
	// the inputs of this decision again, so setting ROLECALL_REQUIRE_DOCKER
	// or starting an engine is not answered from the cache. A second run
	// with no test makes even `go test ./...`, which prints one line per
	// passing package, say so: "ok …/integration [no tests to run]".
	if err := flag.Set("test.run", "^TestSkipInputs$"); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(2)
	}
	if code := m.Run(); code != 0 {
		os.Exit(code)
	}
	if err := flag.Set("test.run", "^$"); err != nil {
		fmt.Fprintln(os.Stderr, "integration:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// TestSkipInputs reads what decides whether the suite runs, so that the
// go test cache keys on it (see TestMain); it checks nothing itself.
func TestSkipInputs(t *testing.T) {
	for _, v := range []string{"DOCKER_HOST", "DOCKER_CONTEXT", "TESTCONTAINERS_DOCKER_SOCKET_OVERRIDE"} {
		_ = os.Getenv(v)
	}
	_, _ = os.Stat("/var/run/docker.sock")
	if reason := skipReason(); reason != "" {
		t.Skip(reason)
	}
}

// skipReason says why the suite cannot run here, or "" when it can (or
// must: with ROLECALL_REQUIRE_DOCKER=1 every test fails on its own).
func skipReason() string {
	if os.Getenv("ROLECALL_REQUIRE_DOCKER") == "1" {
		return ""
	}
	if testing.Short() {
		return "-short"
	}
	if err := dockerHealth(); err != nil {
		return "no usable Docker engine: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return ""
}

// requireDocker skips the test when there is no usable Docker engine —
// unless ROLECALL_REQUIRE_DOCKER=1, where a missing engine is a failure:
// CI has an engine, and a suite that silently skipped there would prove
// nothing.
func requireDocker(t *testing.T) {
	t.Helper()
	required := os.Getenv("ROLECALL_REQUIRE_DOCKER") == "1"
	if !required {
		if testing.Short() {
			t.Skip("container tests skipped in -short mode")
		}
		testcontainers.SkipIfProviderIsNotHealthy(t)
		return
	}
	if err := dockerHealth(); err != nil {
		t.Fatalf("ROLECALL_REQUIRE_DOCKER=1 but no usable Docker engine: %v", err)
	}
}

func dockerHealth() (err error) {
	defer func() {
		// The provider panics on some broken setups; that is "no engine".
		if r := recover(); r != nil {
			err = fmt.Errorf("docker provider panicked: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return p.Health(ctx)
}

// testImages are the images every test runs, built once per test run.
type testImages struct {
	Worker, NATS string
	Root         string // repository root
}

var (
	imagesOnce sync.Once
	builtImgs  testImages
	imagesErr  error
)

// setup checks for Docker and returns the images, building them on first
// use (go build of the worker and nats-server, then two FROM scratch
// docker builds; the go build cache makes later runs quick).
func setup(t *testing.T) testImages {
	t.Helper()
	requireDocker(t)
	sweep(t)
	imagesOnce.Do(func() {
		root, err := images.RepoRoot(".")
		if err != nil {
			imagesErr = err
			return
		}
		// The tags are buildimages' (ROLECALL_WORKER_IMAGE and
		// ROLECALL_NATS_IMAGE, else the defaults): checkouts that run the
		// suite on one engine at once give each its own tags, or one of
		// them could start workers built from the other's code.
		builtImgs = testImages{Worker: envOr("ROLECALL_WORKER_IMAGE", images.DefaultWorkerTag), NATS: envOr("ROLECALL_NATS_IMAGE", images.DefaultNATSTag), Root: root}
		if err := trackInputs(root); err != nil {
			imagesErr = err
			return
		}
		if os.Getenv("ROLECALL_IT_PREBUILT") == "1" {
			// `make image` (or another checkout) already built the tags.
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		start := time.Now()
		log, err := os.CreateTemp("", "rolecall-images-*.log")
		if err != nil {
			imagesErr = err
			return
		}
		defer os.Remove(log.Name())
		defer log.Close()
		if err := images.Build(ctx, images.Options{Root: root, Version: "integration", Log: log}, images.Worker(builtImgs.Worker), images.NATS(builtImgs.NATS)); err != nil {
			out, _ := os.ReadFile(log.Name())
			imagesErr = fmt.Errorf("%w\n%s", err, tail(string(out), 40))
			return
		}
		fmt.Fprintf(os.Stderr, "integration: built %s and %s in %s\n", builtImgs.Worker, builtImgs.NATS, time.Since(start).Round(100*time.Millisecond))
	})
	if imagesErr != nil {
		t.Fatalf("building the images: %v", imagesErr)
	}
	return builtImgs
}

// trackInputs stats every file the images and the compose setup are made
// of. The test binary does not import the worker, so without this go test
// would answer a later run from its cache even after the worker's code
// changed; stats made during a test are part of the cache key.
func trackInputs(root string) error {
	cmd := exec.Command("go", "list", "-deps", "-f",
		`{{if and .Module .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}
{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}
{{end}}{{end}}`, "./cmd/worker")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list ./cmd/worker: %w", err)
	}
	files := strings.Fields(string(out))
	for _, rel := range []string{"go.mod", "go.sum", "Dockerfile", "docker-compose.yml"} {
		files = append(files, filepath.Join(root, rel))
	}
	for _, dir := range []string{"deploy", "examples", "integration/testdata"} {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, path)
			}
			return nil
		})
	}
	for _, f := range files {
		_, _ = os.Stat(f)
	}
	return nil
}

func repoFile(imgs testImages, rel string) string {
	return filepath.Join(imgs.Root, filepath.FromSlash(rel))
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
