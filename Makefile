# The project's commands. `make test` is the whole test suite: README.md's
# "Test it", and what .ci/run runs.

.PHONY: test build demo bench

test:
	go vet ./...
	go test -race -count=1 ./...
	# The deployment files, checked offline (a separate module: see deploy/check).
	cd deploy/check && go vet ./... && go test -count=1 ./...

build:
	go build -trimpath -ldflags "-X main.version=$$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o bin/gateway ./cmd/gateway

demo:
	go run ./cmd/gateway demo

bench:
	bash bench/compare.sh
