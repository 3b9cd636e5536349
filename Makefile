# The single definition of green: `make check` (CI runs `make test`, which
# includes every check).
GO       ?= go
PKGS     ?= ./...
BIN      ?= bin/hermes

.DEFAULT_GOAL := check
.PHONY: check test test-race test-short fmt vet check-deps bench bench-quick build serve tidy

check: fmt vet check-deps test-race

# test is what CI and the README run: formatting, vet, the layer rules, then
# every test with the race detector.
test: fmt vet check-deps test-race

test-race:
	$(GO) test -race -count=1 $(PKGS)

test-short:
	$(GO) test -count=1 -short $(PKGS)

fmt:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# check-deps enforces the layer arrows of STYLE.md and the purity of
# events/ and domain/ (no clock reads, randomness, I/O or logging).
check-deps:
	$(GO) run ./cmd/importcheck

VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# build compiles the hermes binary into bin/.
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/hermes

# serve builds and starts hermes serve on the embedded store (home:
# $$HERMES_HOME or ~/.hermes; pass flags with ARGS="--addr 127.0.0.1:9000").
serve: build
	./$(BIN) serve $(ARGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=5 $(PKGS) | tee bench.out

bench-quick:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime=1x -count=1 $(PKGS)

tidy:
	$(GO) mod tidy
