#!/usr/bin/env bash
# Checks for the Debian packages a task needs and, run as root (as CI is, on a fresh Debian 12
# machine), installs the missing ones after an `apt-get update`. Not root, it prints what is missing
# and the apt-get line that installs it, and fails. Quiet when all is present.
#
#   scripts/deps.sh build    the libraries pushcast links: make build, demo, unit, simulate, fuzz
#   scripts/deps.sh test     build + what the whole suite starts and runs: make test (CI)
#   scripts/deps.sh bench    build + nghttpd, h2load, openssl and python3: make bench
#   scripts/deps.sh all      every tier (make deps); also what no argument means
#   scripts/deps.sh --list TIER...   print the tiers' packages, one a line, and check nothing
#
# Several tiers may be named; only their packages are checked, so a build needs no test package.
#
# build: what `swift build` compiles and links against (the same list as the build stage of
# docs/deploy/kubernetes/Containerfile):
#   libssl-dev libnghttp2-dev liburing-dev   headers and libraries the C shim targets link
#   libsqlite3-dev libpq-dev libmariadb-dev  the database clients (--from, prune-apply): SQLite, libpq, libmariadb
#   zlib1g-dev libzstd-dev                   zlib and zstd, which CCompression links: gzip and zstd token exports are read as they are
#   pkg-config                               Package.swift finds libnghttp2, sqlite3, libpq (-I/usr/include/postgresql) and libmariadb with it
#
# test: the programs the end-to-end tests start (`make unit` needs none of them):
#   nghttp2-server nghttp2-client            nghttpd and h2load (InteropTests, and the benchmarks)
#   python3                                  scripts/tidy.py (the tidy check), the Python helpers under Tests/
#   openssl                                  the openssl CLI: signature checks (RS256Tests, OAuthAssertionTests), certificate-auth tests make .p12 and PEM files with it
#   munge slurmctld slurmd slurm-client      a one-node Slurm (scripts/slurm-local.sh) for the Slurm end-to-end test
#   python3-venv                             scripts/venv.sh makes .venv (kubernetes-validate, PyYAML, the interop clients) with Debian's python3
#   prometheus prometheus-node-exporter      promtool checks --metrics-file, node_exporter's textfile collector serves it (MetricsTests)
#   python3-h2                               Tests/Ops/hostile_reasons.py: an HTTP/2 server answering 10,000 distinct reasons (MetricsTests)
#   chromium                                 headless Chromium renders pushcast report's HTML in the report tests (ReportTests)
#   sqlite3 postgresql mariadb-server        the database servers (and their CLI clients) the database tests start
#   gzip zstd                                the gzip and zstd tools: the compressed-input tests and fuzz seeds make exports with them
#   curl iproute2                            the interop tests (InteropClientTests): curl as an HTTP/2 client of the mock; `ip`
#                                            brings up loopback in the network namespace where the mock plays api.push.apple.com:443
#   git                                      VersionTests compares `pushcast version`'s commit with `git rev-parse HEAD`
#   time                                     /usr/bin/time: CompressedInputTests logs each send's peak memory with it
#
# bench: Benchmarks/compare.py runs nghttpd and h2load against pushcast and makes its keys with
# the openssl CLI: nghttp2-server nghttp2-client openssl python3.
set -euo pipefail

build_packages=(libssl-dev libnghttp2-dev liburing-dev libsqlite3-dev libpq-dev libmariadb-dev
                zlib1g-dev libzstd-dev pkg-config)
test_packages=(nghttp2-server nghttp2-client python3 openssl
               munge slurmctld slurmd slurm-client python3-venv
               prometheus prometheus-node-exporter python3-h2 chromium
               sqlite3 postgresql mariadb-server gzip zstd curl iproute2 git time)
bench_packages=(nghttp2-server nghttp2-client openssl python3)

usage() {
    echo "usage: scripts/deps.sh [--list] [build|test|bench|all]..." >&2
    exit 2
}

list=false
if [ "${1:-}" = "--list" ]; then
    list=true
    shift
fi
tiers=("$@")
[ ${#tiers[@]} -gt 0 ] || tiers=(all)

wanted=()
for tier in "${tiers[@]}"; do
    case $tier in
        build) wanted+=("${build_packages[@]}") ;;
        test)  wanted+=("${build_packages[@]}" "${test_packages[@]}") ;;
        bench) wanted+=("${build_packages[@]}" "${bench_packages[@]}") ;;
        all)   wanted+=("${build_packages[@]}" "${test_packages[@]}" "${bench_packages[@]}") ;;
        *)     echo "deps: unknown tier '$tier'" >&2; usage ;;
    esac
done
# Each package once, in the order first named.
packages=()
for package in "${wanted[@]}"; do
    case " ${packages[*]} " in
        *" $package "*) ;;
        *) packages+=("$package") ;;
    esac
done

if $list; then
    printf '%s\n' "${packages[@]}"
    exit 0
fi

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for package in "${packages[@]}"; do
    if [ "$package" = python3 ]; then
        # python3 counts as present when any python3 is on PATH (a pyenv one will do).
        command -v python3 >/dev/null 2>&1 || missing+=(python3)
        continue
    fi
    is_installed "$package" || missing+=("$package")
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    echo "deps (${tiers[*]}): installing ${missing[*]}" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
    exit 0
fi

echo "deps (${tiers[*]}): missing Debian packages: ${missing[*]}" >&2
echo "deps: install them with:" >&2
echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
exit 1
