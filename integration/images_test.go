package integration

import (
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/rolecall/rolecall/integration/images"
)

// TestImagesCarryVersionTagAndOCILabels: each image built for the suite
// has the org.opencontainers.image.* labels (version, revision, source)
// and a second tag with its version: the worker's the version it was
// built as ("integration" here), nats-server's the release go.mod pins.
func TestImagesCarryVersionTagAndOCILabels(t *testing.T) {
	imgs := setup(t)
	p, err := testcontainers.NewDockerProvider()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "github.com/nats-io/nats-server/v2").Output()
	if err != nil {
		t.Fatal(err)
	}
	natsVersion := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	ctx := context.Background()
	for _, tt := range []struct {
		tag, version string
	}{{imgs.Worker, "integration"}, {imgs.NATS, natsVersion}} {
		info, err := p.Client().ImageInspect(ctx, tt.tag)
		if err != nil {
			t.Fatalf("inspect %s: %v", tt.tag, err)
		}
		labels := info.Config.Labels
		for k, want := range map[string]string{
			"org.opencontainers.image.version": tt.version,
			"org.opencontainers.image.source":  images.Source,
		} {
			if labels[k] != want {
				t.Errorf("%s: label %s = %q, want %q", tt.tag, k, labels[k], want)
			}
		}
		for _, k := range []string{"org.opencontainers.image.title", "org.opencontainers.image.revision", "org.opencontainers.image.description"} {
			if labels[k] == "" {
				t.Errorf("%s: no label %s", tt.tag, k)
			}
		}
		repo, _, _ := strings.Cut(tt.tag, ":")
		versioned := repo + ":" + images.VersionTag(tt.version)
		v, err := p.Client().ImageInspect(ctx, versioned)
		if err != nil {
			t.Errorf("no version tag %s: %v", versioned, err)
		} else if v.ID != info.ID {
			t.Errorf("%s is %s, not the image %s (%s)", versioned, v.ID, tt.tag, info.ID)
		}
	}
}

// TestWorkerImageRunsBench: `worker bench` runs in the worker image as
// shipped (FROM scratch, non-root, ROLECALL_ROOT=/config set): its
// embedded server's store and its generated root are temporary
// directories, and the scratch image had no /tmp ("stat /tmp: no such
// file or directory").
func TestWorkerImageRunsBench(t *testing.T) {
	imgs := setup(t)
	ctx := context.Background()
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: testcontainers.ContainerRequest{
		Image:      imgs.Worker,
		Labels:     ownerLabels(),
		Entrypoint: []string{"/worker", "bench"},
		Cmd:        []string{"--tasks", "50", "--concurrency", "4", "--warmup", "0", "--repeat", "1"},
		WaitingFor: wait.ForExit().WithExitTimeout(3 * time.Minute),
	}, Started: true})
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatal(err)
	}
	state, err := ctr.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ctr.Logs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	logs, _ := io.ReadAll(rc)
	if state.ExitCode != 0 || !strings.Contains(string(logs), "every task exactly one") {
		t.Fatalf("worker bench in the image: exit %d; output:\n%s", state.ExitCode, logs)
	}
}
