package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// With the reaper disabled, a test binary that dies (a -timeout panic, a
// kill) leaves its containers running. Everything the suite starts is
// labelled with its owner — host and process id — and the next run removes
// what belongs to an owner on this host that no longer exists. Another
// run in progress, or anything not started by this suite, is left alone.

const ownerLabel = "dev.rolecall.integration.owner"

var hostTag = func() string {
	h, _ := os.Hostname()
	sum := sha256.Sum256([]byte(h))
	return hex.EncodeToString(sum[:4])
}()

func owner() string { return hostTag + "-" + strconv.Itoa(os.Getpid()) }

func ownerLabels() map[string]string { return map[string]string{ownerLabel: owner()} }

// composeProject names the compose project of this process the same way.
func composeProject() string { return "rolecall-it-" + owner() }

// orphaned reports whether an owner value names a process of this host
// that has exited.
func orphaned(value string) bool {
	host, pidStr, ok := strings.Cut(value, "-")
	if !ok || host != hostTag {
		return false
	}
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 || pid == os.Getpid() {
		return false
	}
	err = syscall.Kill(pid, 0)
	return errors.Is(err, syscall.ESRCH)
}

var sweepOnce sync.Once

// sweep removes what dead earlier runs left behind; failures are logged,
// not fatal: leftovers cost resources, not correctness.
func sweep(t *testing.T) {
	sweepOnce.Do(func() {
		ctx := context.Background()
		docker, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			t.Logf("sweep: %v", err)
			return
		}
		defer docker.Close()
		removed := 0
		projects := map[string]bool{}
		list, err := docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", ownerLabel)})
		if err == nil {
			for _, c := range list.Items {
				if orphaned(c.Labels[ownerLabel]) {
					if _, err := docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err == nil {
						removed++
					}
				}
			}
		}
		list, err = docker.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", "com.docker.compose.project")})
		if err == nil {
			for _, c := range list.Items {
				p := c.Labels["com.docker.compose.project"]
				if v, ok := strings.CutPrefix(p, "rolecall-it-"); ok && orphaned(v) {
					projects[p] = true
					if _, err := docker.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err == nil {
						removed++
					}
				}
			}
		}
		nets, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", ownerLabel)})
		if err == nil {
			for _, n := range nets.Items {
				if orphaned(n.Labels[ownerLabel]) {
					if _, err := docker.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err == nil {
						removed++
					}
				}
			}
		}
		for p := range projects {
			f := make(client.Filters).Add("label", "com.docker.compose.project="+p)
			if nets, err := docker.NetworkList(ctx, client.NetworkListOptions{Filters: f}); err == nil {
				for _, n := range nets.Items {
					if _, err := docker.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err == nil {
						removed++
					}
				}
			}
			if vols, err := docker.VolumeList(ctx, client.VolumeListOptions{Filters: f}); err == nil {
				for _, v := range vols.Items {
					if _, err := docker.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err == nil {
						removed++
					}
				}
			}
		}
		if removed > 0 {
			fmt.Fprintf(os.Stderr, "integration: removed %d containers, networks and volumes left by earlier runs that died\n", removed)
		}
	})
}
