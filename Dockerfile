# rolecall worker: a static binary in an otherwise empty image.
#
# The build context is a directory holding the prebuilt binary `worker`
# (CGO_ENABLED=0, so it needs no libc) and an empty directory `tmp` (a
# scratch image has no mkdir). Build it without a registry:
#
#   make image                              # or: go run ./integration/cmd/buildimages
#
# or by hand:
#
#   ctx=$(mktemp -d); mkdir "$ctx/tmp"; v=$(git describe --tags --always --dirty)
#   CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=$v" -o "$ctx/worker" ./cmd/worker
#   docker build -f Dockerfile -t rolecall/worker:local -t "rolecall/worker:$v" \
#     --build-arg VERSION="$v" --build-arg REVISION="$(git rev-parse HEAD)" "$ctx"
#
# Where a registry is reachable, a multi-stage build (FROM golang AS build,
# then this stage with COPY --from=build) gives the same image.
FROM scratch

# OCI labels; `make image` (package integration/images) passes the
# checkout's version, commit and commit time, and also tags the image
# rolecall/worker:<version>.
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED
LABEL org.opencontainers.image.title="rolecall worker" \
      org.opencontainers.image.description="Resolves agent configurations from task CloudEvents on NATS JetStream, with provenance." \
      org.opencontainers.image.source="https://github.com/rolecall/rolecall" \
      org.opencontainers.image.documentation="https://github.com/rolecall/rolecall/blob/main/docs/OPERATIONS.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"

COPY worker /worker
# The temporary directory (os.TempDir): `worker bench` keeps its embedded
# server's store and its generated config root there. A read-only root
# file system (docker-compose.yml) needs a tmpfs here for it.
COPY --chown=65532:65532 tmp /tmp

# The config root is mounted here read-only (docker-compose.yml mounts
# ./examples); --root or ROLECALL_ROOT points elsewhere.
ENV ROLECALL_ROOT=/config \
    ROLECALL_HTTP=:8080
WORKDIR /config

# Non-root, numeric so that runtimes can check it without an /etc/passwd.
USER 65532:65532

# /healthz, /readyz (JSON), /metrics
EXPOSE 8080

# A scratch image has no shell or curl: the worker probes itself.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/worker", "healthcheck"]

ENTRYPOINT ["/worker", "run"]
