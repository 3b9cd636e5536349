# The single definition of green: `make check` (CI runs `make test`, which
# includes every check).
GO       ?= go
PKGS     ?= ./...
BIN      ?= bin/hermes

.DEFAULT_GOAL := check
.PHONY: check test test-race test-large test-short fmt vet lint tidy-check check-deps bench bench-quick bench-postgres build serve tidy fuzz-api

check: fmt vet tidy-check lint check-deps test-race test-large fuzz fuzz-api test-python test-chaos

# test is what CI and the README run: formatting, vet, a tidy go.mod,
# staticcheck, the layer rules, every test with the race detector, the
# full-size corpora of the transcripts projection, then each fuzz target
# for a bounded time.
test: fmt vet tidy-check lint check-deps test-race test-large fuzz fuzz-api test-python test-chaos

# test-race runs every test with the race detector. -timeout is per
# package: each takes well under 3 minutes under -race on the slowest
# 2-core machine CI has met, so the bound fails a hang, not a slow machine.
# The transpiled SQLite (modernc.org/...) is compiled without checkptr, the
# unsafe.Pointer checks -race turns on everywhere: in that C-to-Go
# translation (its own allocator, pointer arithmetic throughout) they
# about double the time of every SQLite call and cannot point at a mistake
# in hermes' code, whose packages keep them.
RACE_FLAGS ?= -race -gcflags='modernc.org/...=-d=checkptr=0'
test-race:
	$(GO) test $(RACE_FLAGS) -timeout 10m -count=1 $(PKGS)

# test-large runs the transcripts projection's tests with their full-size
# corpora (HERMES_TEST_LARGE=1: thousands of events, the FTS5 index
# layouts a real state.db has by its size), without the race detector;
# under -race they use the smallest corpora that cover the same code.
test-large:
	HERMES_TEST_LARGE=1 $(GO) test -timeout 10m -count=1 ./projections/transcripts/

# fuzz runs each fuzz target for a bounded amount of work (FUZZTIME each,
# a count of inputs: a duration would let a loaded machine spend it all on
# the baseline coverage pass, which Go then reports as "context deadline
# exceeded"): the lane fold, the event codec, and state.db's metadata sums,
# none of which may panic, overflow or answer invalid UTF-8
# (docs/FOLD_LIMITS.md); and JSON v2's first try at a stored message, which
# must decode what it takes as encoding/json does. Their seeds also run in every plain `go test`.
# `make fuzz FUZZTIME=60s` fuzzes for longer.
.PHONY: fuzz
FUZZTIME ?= 4000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzEvolve$$' -fuzztime $(FUZZTIME) ./domain/
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./events/
	$(GO) test -run '^$$' -fuzz '^FuzzStrictMessageAppended$$' -fuzztime $(FUZZTIME) ./events/
	$(GO) test -run '^$$' -fuzz '^FuzzApplyMetadata$$' -fuzztime $(FUZZTIME) ./projections/transcripts/

test-short:
	$(GO) test -count=1 -short $(PKGS)

# test-chaos is the short chaos run (cmd/hermes/chaos_test.go): three
# hermes serve on the KurrentDB emulator, then on PostgreSQL, 20 s of
# workload under a nemesis each (partitions, pauses past the lease, kills,
# store restarts), every checker of testfixtures/chaos over the history and
# the log, and the check that the checkers catch a build without the
# expected-version check. chaos is the long run: CHAOS_SECONDS of workload
# per store (default 300). Each prints its seed (HERMES_CHAOS_SEED=<seed>
# replays the schedule) and a summary.
.PHONY: test-chaos chaos
CHAOS_SECONDS ?= 300
test-chaos:
	HERMES_CHAOS=1 $(GO) test -count=1 -timeout 10m -run '^TestChaos' ./cmd/hermes/
chaos:
	HERMES_CHAOS=1 HERMES_CHAOS_SECONDS=$(CHAOS_SECONDS) $(GO) test -count=1 -timeout 60m -v -run '^TestChaosOn' ./cmd/hermes/

fmt:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

# lint runs staticcheck at the version pinned by the tool directive of
# go.mod (go.sum holds its checksums), so a fresh machine needs only the
# module proxy. Change the version with
# `go get -tool honnef.co/go/tools/cmd/staticcheck@vX.Y.Z`.
lint:
	$(GO) tool staticcheck $(PKGS)

# tidy-check fails when go.mod or go.sum differ from what `go mod tidy`
# would write (`make tidy` fixes them).
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'make tidy'" >&2; exit 1; }

# check-deps enforces the layer arrows of STYLE.md and the purity of
# events/ and domain/ (no clock reads, randomness, I/O or logging).
check-deps:
	$(GO) run ./cmd/importcheck

# fuzz-api fuzzes the API's door for a bounded amount of work (FUZZTIME
# each, as for fuzz): every request decoder over
# arbitrary bytes (no panic, a refusal is a 400, what is accepted is valid
# UTF-8 without repeated names or half surrogate pairs), and arbitrary
# bodies to every body-taking route over HTTP (no 500, a refusal appends
# nothing).
fuzz-api:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzRefusalChangesNothing$$' -fuzztime $(FUZZTIME) ./api/

VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# build compiles the hermes binary into bin/.
build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/hermes

# serve builds and starts hermes serve on the embedded store (home:
# $$HERMES_HOME or ~/.hermes; pass flags with ARGS="--addr 127.0.0.1:9000").
serve: build
	./$(BIN) serve $(ARGS)

# bench measures every figure of BENCHMARKS.md on this machine (under 15
# minutes on 2 cores): appends against the raw fsync and insert limits,
# resolve in-process at 10k and 100k lanes, a cold load of a lane of
# 1,000,000 events against one of 1,000 (with and without snapshots),
# resolve over loopback HTTP with
# the hermes-load generator, memory and restart time at 100k lanes, a full
# rebuild of 1,000,000 mixed events, and search over 1,000,000 messages.
# The raw output stays in bench.out (for benchstat); the table is printed.
BENCH_GO = $(GO) test -run '^$$' -timeout 40m
bench:
	@rm -f bench.out
	$(BENCH_GO) -bench . -benchtime=3s -count=3 ./adapters/eventstore/sqlite/ | tee -a bench.out
	HERMES_BENCH_LANES=10000,100000 $(BENCH_GO) -bench ResolveExisting -benchtime=20000x ./commands | tee -a bench.out
	HERMES_BENCH_LOAD_EVENTS=1000,1000000 $(BENCH_GO) -bench LoadLane -benchtime=3s ./commands | tee -a bench.out
	HERMES_BENCH_SERVE_LANES=100000 $(BENCH_GO) -bench Serve -benchtime=1x ./cmd/hermes | tee -a bench.out
	HERMES_BENCH_EVENTS=1000000 $(BENCH_GO) -bench Rebuild -benchtime=1x ./projections | tee -a bench.out
	HERMES_BENCH_MESSAGES=1000000 $(BENCH_GO) -bench Search -benchtime=200x ./projections/transcripts | tee -a bench.out
	@echo
	@$(GO) run ./cmd/benchtable bench.out

# bench-quick is the same set at small sizes, for everyday use (under 2
# minutes); its output goes to bench-quick.out.
bench-quick:
	@rm -f bench-quick.out
	$(BENCH_GO) -bench . -benchtime=1s ./adapters/eventstore/sqlite/ | tee -a bench-quick.out
	HERMES_BENCH_LANES=10000 $(BENCH_GO) -bench ResolveExisting -benchtime=3000x ./commands | tee -a bench-quick.out
	HERMES_BENCH_LOAD_EVENTS=1000,100000 $(BENCH_GO) -bench LoadLane -benchtime=1s ./commands | tee -a bench-quick.out
	HERMES_BENCH_SERVE_LANES=10000 $(BENCH_GO) -bench Serve -benchtime=1x ./cmd/hermes | tee -a bench-quick.out
	HERMES_BENCH_EVENTS=100000 $(BENCH_GO) -bench Rebuild -benchtime=1x ./projections | tee -a bench-quick.out
	HERMES_BENCH_MESSAGES=20000 $(BENCH_GO) -bench Search -benchtime=50x ./projections/transcripts | tee -a bench-quick.out
	@echo
	@$(GO) run ./cmd/benchtable bench-quick.out

# bench-postgres measures the PostgreSQL store next to the SQLite store in
# one run, on the tests' own throw-away cluster (PostgreSQL must be
# installed; see README, Running on PostgreSQL): durable appends at 1 and
# 16 appenders on each, three rounds alternating, then the PostgreSQL
# store's raw commits with and without the order lock, three nodes
# against one, and the replication lag between two nodes. The load is
# printed before and after; the raw output stays in bench-postgres.out.
bench-postgres:
	@rm -f bench-postgres.out
	@uptime | tee -a bench-postgres.out
	for i in 1 2 3; do \
		$(BENCH_GO) -bench 'BenchmarkAppend$$/appenders=(1|16)$$' -benchtime=3s ./adapters/eventstore/sqlite/ | tee -a bench-postgres.out; \
		$(BENCH_GO) -bench 'BenchmarkAppend$$/appenders=(1|16)$$' -benchtime=3s ./adapters/eventstore/postgres/ | tee -a bench-postgres.out; \
	done
	$(BENCH_GO) -bench 'RawCommit|AppendNodes|ReplicationLag' -benchtime=3s ./adapters/eventstore/postgres/ | tee -a bench-postgres.out
	@uptime | tee -a bench-postgres.out

tidy:
	$(GO) mod tidy

# test-python runs the Python client's tests (clients/python, standard
# library only) against a real `hermes serve` on a loopback port with a
# temp home; the latency figures they print are informational. They include
# the import hook installed into a fresh venv and the end-to-end run of
# Hermes' own GatewayRunner, both on upstream hermes-agent found at
# ../shared/upstream/hermes-agent-5e01a5db (or HERMES_AGENT_SRC), whose
# imports are Debian's python3-* packages of /usr/bin/python3 (.ci/run
# installs them); without upstream they skip, except under CI.
.PHONY: test-python
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || echo python3)
test-python: build
	HERMES_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m unittest discover -s clients/python/tests -v

# test-python-d7 runs the GatewayRunner end-to-end test against Hermes at
# d7f5acb9 (the newest pinned release), from a tree extracted into a temp
# directory from a git mirror of hermes-agent: HERMES_AGENT_MIRROR=<its git
# dir>. Without a mirror holding the commit it says so and skips; make test
# keeps running the 5e01a5db one.
.PHONY: test-python-d7
HERMES_AGENT_D7 := d7f5acb94e4b1f23fcfa7d3212bbc6c1d487ce29
test-python-d7: build
	@if [ -z "$(HERMES_AGENT_MIRROR)" ] || ! git --git-dir="$(HERMES_AGENT_MIRROR)" cat-file -e "$(HERMES_AGENT_D7)^{commit}" 2>/dev/null; then \
		echo "test-python-d7: skipped: set HERMES_AGENT_MIRROR to a hermes-agent git dir holding $(HERMES_AGENT_D7)"; exit 0; fi; \
	tree=$$(mktemp -d); trap 'rm -rf "$$tree"' EXIT; \
	git --git-dir="$(HERMES_AGENT_MIRROR)" archive "$(HERMES_AGENT_D7)" | tar -x -C "$$tree" && \
	HERMES_AGENT_SRC="$$tree" HERMES_BIN=$(CURDIR)/$(BIN) $(PYTHON) -m unittest clients/python/tests/test_gateway_e2e.py -v
