package reliability_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bin holds the binaries TestMain built: the worker under test and the
// nats-server a user would run next to it.
var bin struct {
	dir        string // 0755, so a worker started as another uid can run them
	worker     string
	natsServer string
	moduleRoot string
}

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := buildAndRun(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

func buildAndRun(m *testing.M) (int, error) {
	root, err := moduleRoot()
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "rolecall-reliability-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		return 0, err
	}
	bin.dir, bin.moduleRoot = dir, root
	bin.worker = filepath.Join(dir, "worker")
	bin.natsServer = filepath.Join(dir, "nats-server")
	for _, b := range []struct{ out, pkg string }{
		{bin.worker, "./cmd/worker"},
		{bin.natsServer, "github.com/nats-io/nats-server/v2"},
	} {
		cmd := exec.Command("go", "build", "-o", b.out, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return m.Run(), nil
}

// moduleRoot is the directory of go.mod, so the build does not depend on
// the test's working directory.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a module")
	}
	return filepath.Dir(gomod), nil
}
