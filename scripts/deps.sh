#!/usr/bin/env bash
# Checks for the Debian packages pushcast needs to build, test and benchmark, and installs the
# missing ones when run as root (as CI does on a fresh Debian 12 machine). Quiet when all present.
#
#   libssl-dev libnghttp2-dev liburing-dev   headers and libraries the C shim targets link
#   nghttp2-server nghttp2-client            nghttpd and h2load, for end-to-end tests and benchmarks
#   python3                                  Benchmarks/compare.py
#   openssl                                  the openssl CLI: certificate-auth tests make .p12 and PEM files with it
#   munge slurmctld slurmd slurm-client      a one-node Slurm (scripts/slurm-local.sh) for the Slurm end-to-end test
#   python3-venv                             scripts/venv.sh makes .venv (kubernetes-validate, PyYAML) with Debian's python3
#   prometheus prometheus-node-exporter      promtool checks --metrics-file, node_exporter's textfile collector serves it (MetricsTests)
#   python3-h2                               Tests/Ops/hostile_reasons.py: an HTTP/2 server answering 10,000 distinct reasons (MetricsTests)
#   chromium                                 headless Chromium renders pushcast report's HTML in the report tests (ReportTests)
#   libsqlite3-dev libpq-dev libmariadb-dev  the database clients (--from, prune-apply): SQLite, libpq, libmariadb
#   sqlite3 postgresql mariadb-server        the database servers (and their CLI clients) the database tests start
#   zlib1g-dev libzstd-dev                   zlib and zstd, which CCompression links: gzip and zstd token exports are read as they are
#   gzip zstd                                the gzip and zstd tools: the compressed-input tests and fuzz seeds make exports with them
set -euo pipefail

packages=(libssl-dev libnghttp2-dev liburing-dev nghttp2-server nghttp2-client openssl
          munge slurmctld slurmd slurm-client python3-venv
          prometheus prometheus-node-exporter python3-h2 chromium
          libsqlite3-dev libpq-dev libmariadb-dev sqlite3 postgresql mariadb-server
          zlib1g-dev libzstd-dev gzip zstd)

is_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

# curl iproute2: the interop tests (InteropClientTests): curl as an HTTP/2 client of the mock; `ip`
# brings up loopback in the network namespace where the mock plays api.push.apple.com:443.
packages+=(curl iproute2)

missing=()
for package in "${packages[@]}"; do
    is_installed "$package" || missing+=("$package")
done
# python3 counts as present when any python3 is on PATH (a pyenv one will do).
if ! command -v python3 >/dev/null 2>&1; then
    missing+=(python3)
fi

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    echo "deps: installing ${missing[*]}" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" </dev/null
    exit 0
fi

echo "deps: missing Debian packages: ${missing[*]}" >&2
echo "deps: install them with:" >&2
echo "    sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
exit 1
