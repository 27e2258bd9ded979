# syntax=docker/dockerfile:1
#
# The gateway image: a static binary on distroless, running as non-root.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t mcp-gateway .
#   docker run --rm -p 8080:8080 -v "$PWD/configs:/etc/mcp-gateway:ro" -e GITHUB_MCP_TOKEN=... mcp-gateway
#
# The config is a file mounted at /etc/mcp-gateway/gateway.yaml (mount the
# directory, not the file, so that edits reach the container and the live
# reload sees them); secrets come from the environment through ${VAR} in the
# config. Ports: 8080 is the MCP endpoint (server.listen), 9090 the admin
# listener (server.admin_listen: /healthz, /readyz, /metrics), which must
# listen on ":9090" rather than 127.0.0.1 for probes and scrapes to reach it.
#
# Reproducible: module versions are pinned by go.sum, the build is -trimpath
# with no VCS stamping, and the version comes from the VERSION build arg.
#
# Base images are pinned by tag. TODO: pin them by digest too, so that a
# rebuild picks the same bytes until the digest is bumped on purpose (for
# example by Renovate or Dependabot):
#   docker buildx imagetools inspect golang:1.26 --format '{{json .Manifest.Digest}}'
#   (or: crane digest golang:1.26)
# then write FROM golang:1.26@sha256:<digest>, likewise for distroless.

# The builder runs on the build machine's platform and cross-compiles (pure
# Go, CGO off), so multi-arch builds (docker buildx --platform
# linux/amd64,linux/arm64) need no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src

# Modules first: this layer is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download && go mod verify

COPY cmd/ cmd/
COPY internal/ internal/

ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/gateway ./cmd/gateway

# static-debian12: CA certificates, tzdata and /etc/passwd with the nonroot
# user (65532), and nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot

ARG VERSION=dev
LABEL org.opencontainers.image.title="mcp-gateway" \
      org.opencontainers.image.description="Multi-tenant remote MCP gateway" \
      org.opencontainers.image.source="https://github.com/mcpgw/gateway" \
      org.opencontainers.image.version="${VERSION}"

COPY --from=build /out/gateway /gateway

# 65532 is distroless's "nonroot" user. Numeric on purpose: Kubernetes can
# only enforce runAsNonRoot on an image whose USER is a number.
USER 65532:65532
EXPOSE 8080 9090

# No HEALTHCHECK: the image has no shell or curl to run one, and the gateway
# binary has no probe command. Health is checked from outside, on the admin
# port: Kubernetes readiness on GET :9090/readyz (the session store and the
# issuers answer) and liveness on GET :9090/healthz (the process serves);
# see deploy/kubernetes/base/deployment.yaml. Under plain Docker or compose,
# use a load balancer's HTTP check on the same paths. HEALTHCHECK NONE also
# stops a base image's check from being inherited.
HEALTHCHECK NONE

ENTRYPOINT ["/gateway"]
CMD ["serve", "-config", "/etc/mcp-gateway/gateway.yaml"]
