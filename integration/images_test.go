package integration

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/testcontainers/testcontainers-go"

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
