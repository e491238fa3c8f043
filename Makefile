# pushcast: top-level tasks. `make test` is what CI runs (see .ci/run).
#
#   make deps    check for (and, as root, install) the Debian packages; see scripts/deps.sh
#   make build   release build
#   make demo    release build, then run the embedded mock server and send traffic to it
#   make test    debug build, then the whole test suite (serially: several tests start servers); .venv
#                (scripts/venv.sh) holds the Python packages the deployment tests use
#   make venv    create .venv and install scripts/requirements-test.txt (idempotent)
#   make simulate  release build, then SEEDS simulated campaigns (default 10000) checked against every invariant
#   make bench   release build, then compare pushcast with h2load and nghttpd (Benchmarks/)
#   make fuzz    build the libFuzzer binaries (Tests/Fuzz) and run each target FUZZ_SECONDS seconds,
#                one after the other; see docs/FUZZING.md (`make fuzz-merge` minimizes the corpus)
#   make clean   remove build outputs
#
# BENCH_FLAGS passes options to Benchmarks/compare.py, e.g. `make bench BENCH_FLAGS=--quick`.

SWIFT ?= swift
PYTHON ?= python3
BENCH_FLAGS ?=
SEEDS ?= 10000
FUZZ_SECONDS ?= 60

.PHONY: all deps venv build demo test bench simulate fuzz fuzz-build fuzz-merge fuzz-seed clean

all: build

deps:
	@scripts/deps.sh

build: deps
	$(SWIFT) build -c release

demo: deps
	$(SWIFT) build -c release
	.build/release/pushcast demo

venv: deps
	PYTHON=$(PYTHON) scripts/venv.sh

test: deps venv
	$(PYTHON) scripts/long-functions.py
	$(SWIFT) build
	$(SWIFT) test

simulate: deps
	$(SWIFT) build -c release
	.build/release/pushcast simulate --seeds $(SEEDS)

bench: deps
	$(SWIFT) build -c release
	$(PYTHON) Benchmarks/compare.py --pushcast .build/release/pushcast $(BENCH_FLAGS)

# Not part of `test`: the fuzz binaries are a separate package (Tests/Fuzz) with sanitizer flags.
# `make test` replays the committed corpus through the same bodies (PushcastFuzzingTests).
fuzz: deps fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) SWIFT=$(SWIFT) scripts/fuzz.sh run

fuzz-build:
	SWIFT=$(SWIFT) scripts/fuzz.sh build

fuzz-merge: fuzz-build
	SWIFT=$(SWIFT) scripts/fuzz.sh merge

fuzz-seed:
	$(PYTHON) scripts/fuzz-seeds.py

clean:
	rm -rf .build .build-fuzz .venv Benchmarks/results/tmp
