package images

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// Default tags: what docker-compose.yml and the integration tests use when
// ROLECALL_WORKER_IMAGE / ROLECALL_NATS_IMAGE are not set.
const (
	DefaultWorkerTag = "rolecall/worker:local"
	DefaultNATSTag   = "rolecall/nats-server:local"
)

// Image is one image: a Go main package compiled into a binary that a
// Dockerfile copies into a scratch image.
type Image struct {
	// Tag is repository:tag, e.g. rolecall/worker:local.
	Tag string
	// Package is the Go package to build (a path inside the module, or a
	// module dependency's import path).
	Package string
	// Binary is the file name the Dockerfile copies (the go build output
	// name of Package).
	Binary string
	// Dockerfile is the Dockerfile's path relative to the repository root.
	Dockerfile string
	// Dirs are empty directories the Dockerfile copies (COPY --chown cannot
	// create a directory in a scratch image otherwise).
	Dirs []string
	// Module, when set, is the Go module whose version is the image's
	// version (the nats-server image is nats-server's release); else the
	// image's version is the checkout's.
	Module string
}

// Worker is the worker image: Dockerfile at the repository root.
func Worker(tag string) Image {
	return Image{Tag: tag, Package: "./cmd/worker", Binary: "worker", Dockerfile: "Dockerfile", Dirs: []string{"tmp"}}
}

// NATS is the nats-server image, built from the module's tool dependency
// so its version is the one go.mod pins.
func NATS(tag string) Image {
	return Image{
		Tag: tag, Package: "github.com/nats-io/nats-server/v2", Binary: "nats-server",
		Dockerfile: "deploy/nats/Dockerfile", Dirs: []string{"data"}, Module: "github.com/nats-io/nats-server/v2",
	}
}

// Options configure Build.
type Options struct {
	// Root is the repository root (holding go.mod); required.
	Root string
	// Version is stamped into the worker (main.version), its
	// org.opencontainers.image.version label and its version tag; empty
	// means `git describe --tags --always --dirty` of Root.
	Version string
	// Log receives go build and docker build output; nil discards it.
	Log io.Writer
}

// Build compiles every image's binary with one go build (CGO_ENABLED=0,
// -trimpath: static, reproducible, no host paths) and then builds each
// image through the Docker API from a context holding only its
// Dockerfile, its binary and its empty directories. Nothing is pulled:
// the Dockerfiles start FROM scratch. Each image carries the OCI labels
// of Meta and is tagged twice: img.Tag and the same repository with its
// version (rolecall/worker:<version>, rolecall/nats-server:<release>).
func Build(ctx context.Context, opt Options, imgs ...Image) error {
	if opt.Root == "" {
		return errors.New("images: Options.Root is required")
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	tmp, err := os.MkdirTemp("", "rolecall-images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	bin := filepath.Join(tmp, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return err
	}
	meta := readMeta(ctx, opt.Root, opt.Version)
	opt.Version = meta.Version
	if err := compile(ctx, opt, bin, imgs); err != nil {
		return err
	}

	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return fmt.Errorf("images: docker: %w", err)
	}
	defer provider.Close()
	for i, img := range imgs {
		dir := filepath.Join(tmp, fmt.Sprintf("ctx%d", i))
		if err := stage(opt.Root, bin, dir, img); err != nil {
			return err
		}
		repo, tag, ok := strings.Cut(img.Tag, ":")
		if !ok || repo == "" || tag == "" {
			return fmt.Errorf("images: tag %q must be repository:tag", img.Tag)
		}
		version := meta.Version
		if img.Module != "" {
			if version, err = moduleVersion(ctx, opt.Root, img.Module); err != nil {
				return err
			}
		}
		req := &testcontainers.ContainerRequest{FromDockerfile: testcontainers.FromDockerfile{
			Context: dir, Dockerfile: "Dockerfile", Repo: repo, Tag: tag,
			KeepImage: true, BuildLogWriter: opt.Log, BuildArgs: meta.buildArgs(version),
		}}
		var oldID string
		if old, err := provider.Client().ImageInspect(ctx, img.Tag); err == nil {
			oldID = old.ID
		}
		if _, err := provider.BuildImage(ctx, req); err != nil {
			return fmt.Errorf("images: docker build %s: %w", img.Tag, err)
		}
		// The tag moved: drop the image it left behind so repeated runs do
		// not pile up dangling images. An image a container still uses is
		// refused by the engine, which is fine.
		if now, err := provider.Client().ImageInspect(ctx, img.Tag); err == nil && oldID != "" && now.ID != oldID {
			_, _ = provider.Client().ImageRemove(ctx, oldID, client.ImageRemoveOptions{PruneChildren: true})
		}
		versioned := repo + ":" + VersionTag(version)
		if versioned != img.Tag {
			if _, err := provider.Client().ImageTag(ctx, client.ImageTagOptions{Source: img.Tag, Target: versioned}); err != nil {
				return fmt.Errorf("images: tag %s: %w", versioned, err)
			}
		}
		fmt.Fprintf(opt.Log, "built %s and %s\n", img.Tag, versioned)
	}
	return nil
}

// moduleVersion is the version go.mod requires of module, without its v.
func moduleVersion(ctx context.Context, root, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Version}}", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("images: go list -m %s: %w", module, err)
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), nil
}

func compile(ctx context.Context, opt Options, bin string, imgs []Image) error {
	ldflags := "-s -w"
	if opt.Version != "" {
		ldflags += " -X main.version=" + opt.Version
	}
	args := []string{"build", "-trimpath", "-ldflags=" + ldflags, "-o", bin + string(filepath.Separator)}
	for _, img := range imgs {
		args = append(args, img.Package)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = opt.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	cmd.Stdout, cmd.Stderr = opt.Log, opt.Log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("images: go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// stage lays out one build context: Dockerfile, binary, empty dirs.
func stage(root, bin, dir string, img Image) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	df, err := os.ReadFile(filepath.Join(root, img.Dockerfile))
	if err != nil {
		return fmt.Errorf("images: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), df, 0o644); err != nil {
		return err
	}
	// A hard link would be cheaper, but the temp dir and the binary are on
	// one file system only by accident; a copy always works.
	if err := copyFile(filepath.Join(bin, img.Binary), filepath.Join(dir, img.Binary), 0o755); err != nil {
		return fmt.Errorf("images: %s: %w", img.Binary, err)
	}
	for _, d := range img.Dirs {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// RepoRoot finds the repository root by walking up from dir to go.mod.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("images: no go.mod above the working directory")
		}
		dir = parent
	}
}
