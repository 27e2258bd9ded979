# The project's commands. `make test` is the whole test suite: README.md's
# "Test it", and what .ci/run runs.

.PHONY: test build demo bench

# How long `make test` fuzzes each fuzz target, beyond its seeds. With 12
# targets in 7 packages that is about 45 s in all (24 s of fuzzing, the
# rest building). FUZZTIME=1x tries one new input per target.
FUZZTIME ?= 2s

# staticcheck, pinned: `go run` fetches it through the module proxy.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

test:
	go vet ./...
	# go.mod and go.sum say exactly what the code needs.
	go mod tidy -diff
	go run $(STATICCHECK) ./...
	go test -race -count=1 ./...
	# Memory and CPU at scale, measured on the binary: without the race
	# detector, which would slow the test's own clients (see bench/README.md).
	go test -count=1 ./internal/scale/
	# Every fuzz target, for $(FUZZTIME) beyond its seeds (the run above tried
	# the seeds): go test -fuzz takes one target of one package at a time.
	# Targets are found by name, so a new one is fuzzed without a change here.
	# The fuzzing engine can end a short run with "context deadline exceeded"
	# when its time is up in the middle of a worker's step, a failure of the
	# engine and not of the target: that run alone is tried once more. Any
	# other failure (a crasher, written to testdata/fuzz) stops the suite.
	for d in $$(grep -rl --include='*_test.go' '^func Fuzz' internal cmd | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$d/*_test.go | cut -c6-); do \
			out=$$(go test -run '^$$' -fuzz "^$$f\$$" -fuzztime=$(FUZZTIME) ./$$d/ 2>&1); rc=$$?; echo "$$out"; \
			if [ $$rc -ne 0 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
				echo "fuzzing engine timed out; $$f once more"; \
				go test -run '^$$' -fuzz "^$$f\$$" -fuzztime=$(FUZZTIME) ./$$d/ || exit 1; \
			elif [ $$rc -ne 0 ]; then exit 1; fi; \
		done; \
	done
	# The deployment files, checked offline (a separate module: see deploy/check).
	cd deploy/check && go vet ./... && go test -count=1 ./...

build:
	go build -trimpath -ldflags "-X main.version=$$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o bin/gateway ./cmd/gateway

demo:
	go run ./cmd/gateway demo

bench:
	bash bench/compare.sh
