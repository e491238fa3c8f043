# pushcast: top-level tasks. `make test` is what CI runs (see .ci/run); docs/TESTING.md describes
# the test tiers, what each needs and how long each takes.
#
#   make build     release build; needs only the libraries pushcast links (scripts/deps.sh build)
#   make demo      release build, then run the embedded mock server and send traffic to it (build tier)
#   make unit      debug build, then every test that starts no process, external server or database:
#                  unit, simulation and in-process transport tests; no root, build tier only, under a
#                  minute (five groups of tests side by side, UNIT_JOBS at a time; UNIT_JOBS=1: one by one)
#   make test      what CI runs: the test tier of packages (scripts/deps.sh test), .venv
#                  (scripts/venv.sh, the Python packages the deployment and interop tests use), the
#                  tidy check (scripts/tidy.py), a debug build, then the unit tier as `make unit` runs it and
#                  every other test (END_TO_END), serially: several start servers. No test runs twice.
#   make e2e       the part of `make test` after the unit tier: END_TO_END only
#   make deps      check for (and, as root, install) the Debian packages of every tier
#   make venv      create .venv and install scripts/requirements-test.txt (idempotent)
#   make simulate  release build, then SEEDS simulated campaigns (default 10000) checked against every invariant
#   make bench     release build, then compare pushcast with h2load and nghttpd (Benchmarks/; scripts/deps.sh bench)
#   make fuzz      build the libFuzzer binaries (Tests/Fuzz) and run each target FUZZ_SECONDS seconds,
#                  one after the other; see docs/FUZZING.md (`make fuzz-merge` minimizes the corpus)
#   make clean     remove build outputs
#
# scripts/deps.sh installs what a target needs when run as root (after apt-get update); not root, it
# prints the missing packages with the apt-get line and stops the target.
# BENCH_FLAGS passes options to Benchmarks/compare.py, e.g. `make bench BENCH_FLAGS=--quick`.

SWIFT ?= swift
PYTHON ?= python3
BENCH_FLAGS ?=
SEEDS ?= 10000
FUZZ_SECONDS ?= 60

# Tests outside the unit tier (swift test regular expressions over Target.Class/method): the
# end-to-end target, and the tests of the other targets that start a program. `make unit` skips
# them, `make test` runs them after the unit tier. A test that starts a process, a server other
# than the in-process mock, or a database, or that needs root or a package of the test tier, goes
# here (or into EndToEndTests).
END_TO_END := \
	'^EndToEndTests\.' \
	'^PushcastTransportTests\.InteropTests/' \
	'^PushcastFCMTests\.RS256Tests/testSignatureVerifiesWithTheOpenSSLCommandLine$$' \
	'^PushcastFCMTests\.RS256Tests/testRefusesNonRSAAndShortKeys$$' \
	'^PushcastFCMTests\.OAuthAssertionTests/testAssertionVerifiesWithTheOpenSSLCommandLineAndCarriesTheClaims$$'
# InteropTests: nghttpd and h2load (nghttp2-server, nghttp2-client). The three FCM tests check
# signatures with, or make keys with, the openssl command line (/usr/bin/openssl).

# The unit tier in groups that run side by side, each its own `swift test` process: the simulator's
# sweeps are most of its CPU time, so they are spread over the groups. Groups 1-4 are patterns like
# END_TO_END's; `rest` is every other test, so a new test lands somewhere even if no group names it.
# The groups only balance the time (the seconds are a serial run's on 2 cores): what they run
# together is the tier. UNIT_JOBS=1 runs them one after the other.
# 1: about 12 s, the seed sweep
UNIT_SHARD_1 := '^PushcastSimulationTests\.SimulationTests/'
# 2: about 15 s, the storage sweep and the client's planted bugs
UNIT_SHARD_2 := '^PushcastSimulationTests\.StorageFaultSweepTests/' '^PushcastSimulationTests\.ClientWorkerMutationTests/'
# 3: about 12 s, crashes and the readers
UNIT_SHARD_3 := '^PushcastSimulationTests\.SimulatedCrashTests/' '^PushcastInputTests\.'
# 4: about 25 s, transport and engine; rest: about 15 s
UNIT_SHARD_4 := '^PushcastTransportTests\.' '^PushcastEngineTests\.'
UNIT_SHARDS := 1 2 3 4
UNIT_SHARD_TARGETS := $(addprefix unit-shard-,$(UNIT_SHARDS) rest)
UNIT_JOBS ?= $(words $(UNIT_SHARD_TARGETS))
# --ignore-lock: concurrent `swift test --skip-build` runs only read .build; without it each waits
# for the previous one's lock.
SWIFT_TEST_BUILT := $(SWIFT) test --skip-build --ignore-lock

.PHONY: all deps deps-build deps-test deps-bench venv build demo unit unit-run e2e e2e-run test \
	bench simulate fuzz fuzz-build fuzz-merge fuzz-seed clean $(UNIT_SHARD_TARGETS)

all: build

deps:
	@scripts/deps.sh all

deps-build:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

deps-bench:
	@scripts/deps.sh bench

build: deps-build
	$(SWIFT) build -c release

demo: deps-build
	$(SWIFT) build -c release
	.build/release/pushcast demo

venv: deps-test
	PYTHON=$(PYTHON) scripts/venv.sh

unit: deps-build
	$(SWIFT) build --build-tests
	@$(MAKE) --no-print-directory unit-run

e2e: deps-test venv
	$(SWIFT) build --build-tests
	@$(MAKE) --no-print-directory e2e-run

# Both halves run even when the first fails, so that one run reports every failure.
test: deps-test venv
	$(PYTHON) scripts/tidy.py --self-test && $(PYTHON) scripts/tidy.py
	$(SWIFT) build --build-tests
	@status=0; \
	$(MAKE) --no-print-directory unit-run || status=1; \
	$(MAKE) --no-print-directory e2e-run || status=1; \
	exit $$status

# The tiers on what is built (`unit`, `e2e` and `test` build first).
unit-run:
	@echo "unit: $(words $(UNIT_SHARD_TARGETS)) groups of tests, $(UNIT_JOBS) at a time; each one's output when it ends"
	@$(MAKE) --no-print-directory --keep-going -j$(UNIT_JOBS) --output-sync=target $(UNIT_SHARD_TARGETS)

$(addprefix unit-shard-,$(UNIT_SHARDS)): unit-shard-%:
	$(SWIFT_TEST_BUILT) $(addprefix --filter ,$(UNIT_SHARD_$*)) $(addprefix --skip ,$(END_TO_END))

unit-shard-rest:
	$(SWIFT_TEST_BUILT) $(addprefix --skip ,$(END_TO_END) $(foreach n,$(UNIT_SHARDS),$(UNIT_SHARD_$(n))))

e2e-run:
	$(SWIFT) test --skip-build $(addprefix --filter ,$(END_TO_END))

simulate: deps-build
	$(SWIFT) build -c release
	.build/release/pushcast simulate --seeds $(SEEDS)

bench: deps-bench
	$(SWIFT) build -c release
	$(PYTHON) Benchmarks/compare.py --pushcast .build/release/pushcast $(BENCH_FLAGS)

# Not part of `test`: the fuzz binaries are a separate package (Tests/Fuzz) with sanitizer flags.
# `make unit` and `make test` replay the committed corpus through the same bodies (PushcastFuzzingTests).
fuzz: deps-build fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) SWIFT=$(SWIFT) scripts/fuzz.sh run

fuzz-build:
	SWIFT=$(SWIFT) scripts/fuzz.sh build

fuzz-merge: fuzz-build
	SWIFT=$(SWIFT) scripts/fuzz.sh merge

fuzz-seed:
	$(PYTHON) scripts/fuzz-seeds.py

clean:
	rm -rf .build .build-fuzz .venv Benchmarks/results/tmp
