// Command buildimages builds rolecall's container images without a
// registry: the worker and nats-server compiled here as static binaries and
// copied into FROM scratch images (see package images).
//
//	go run ./integration/cmd/buildimages [-worker TAG] [-nats TAG] [-version V] [-root DIR] [-q]
//
// The tags default to ROLECALL_WORKER_IMAGE and ROLECALL_NATS_IMAGE, else
// rolecall/worker:local and rolecall/nats-server:local, the tags
// docker-compose.yml uses by default.
package main
