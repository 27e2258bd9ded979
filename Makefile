# The project's commands. `make test` is the whole test suite: README.md's
# "Test it", and what .ci/run runs.

.PHONY: test build demo bench

test:
	go vet ./...
	go test -race -count=1 ./...
	# Memory and CPU at scale, measured on the binary: without the race
	# detector, which would slow the test's own clients (see bench/README.md).
	go test -count=1 ./internal/scale/
	# The deployment files, checked offline (a separate module: see deploy/check).
	cd deploy/check && go vet ./... && go test -count=1 ./...

build:
	go build -trimpath -ldflags "-X main.version=$$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o bin/gateway ./cmd/gateway

demo:
	go run ./cmd/gateway demo

bench:
	bash bench/compare.sh
