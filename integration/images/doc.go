// Package images builds rolecall's container images on a machine with a
// Docker engine but no registry: the worker and nats-server (the version
// go.mod pins as a tool dependency) are compiled here as static binaries
// (CGO_ENABLED=0, -trimpath) and copied into FROM scratch images by the
// repository's Dockerfiles. Nothing is pulled, so it works offline.
//
// It is used by `go run ./integration/cmd/buildimages` (`make image`) and
// by the integration tests, which build the images once per run.
package images
