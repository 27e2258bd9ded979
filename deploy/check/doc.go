// Package check verifies the repository's deployment files without a
// container engine or a cluster. It is its own Go module, so that the
// gateway's module does not carry kustomize and the Kubernetes API types;
// `go test ./...` at the repository root does not descend into it. Run it
// from this directory:
//
//	go vet ./... && go test ./...
//
// What the tests check:
//
//   - Kubernetes (deploy/kubernetes): every kustomization renders with the
//     kustomize Go API; every rendered object decodes strictly (unknown or
//     duplicate fields are errors, field names are case-sensitive) into its
//     Kubernetes API type, or a local type for CRDs; invariants hold: probes
//     on the admin port's /readyz and /healthz, a restrictive security
//     context and resources on every container, no "latest" image, the
//     config mounted from its ConfigMap as a directory (no subPath), every
//     referenced Secret, ConfigMap and key rendered (or declared external),
//     selectors that select; and the rendered gateway config passes
//     `gateway validate` with exactly the environment the Deployment gives it.
//   - Compose (docker-compose.yml): the file loads as `docker compose
//     config` would (compose-go: the Compose Specification's schema,
//     references between services); every build context, Dockerfile, COPY
//     source (not excluded by .dockerignore) and bind-mounted file exists;
//     each Go image's build stage copies all its `go build` needs (checked
//     with `go list` on a copy of just those files, offline); images are
//     pinned by tag; the load balancer and Prometheus reach every gateway
//     replica on its configured ports, and the gateway config's hosts are
//     services of the stack; each replica's config passes `gateway
//     validate` with the replica's environment.
//   - The gateway's Dockerfile: a numeric non-root USER, the entrypoint,
//     the ports, and the build flags (CGO off, -trimpath, the version).
//
// `gateway validate` is the real binary, built once from ../../cmd/gateway.
package check
