#!/usr/bin/env bash
# Connection churn against `pushcast mock`: CONNECTIONS TLS connections, each opened by h2load,
# carrying one request, and closed by the mock's `--goaway-after 1`, in batches of BATCH at once.
# Prints the mock's VmRSS every 10 % of the way, the size of GET /stats at the end, and the
# mock's CPU per connection. The full run (docs/BENCHMARKS.md) is CONNECTIONS=100000; the end-to-end
# test (MockConnectionChurnTests) runs 20,000 on the debug build.
#
#   Benchmarks/mock_connections.sh [PUSHCAST] [CONNECTIONS] [BATCH]
set -euo pipefail
pushcast=${1:-.build/release/pushcast}
connections=${2:-100000}
batch=${3:-250}
work=$(mktemp -d)
trap 'kill "$mock" 2>/dev/null || true; rm -rf "$work"' EXIT
"$pushcast" mock --auth none --goaway-after 1 --workers 1 --write-ca "$work/ca.pem" >"$work/out" 2>"$work/err" &
mock=$!
for _ in $(seq 50); do grep -q PORT= "$work/out" 2>/dev/null && break; sleep 0.1; done
port=$(head -1 "$work/out" | cut -d= -f2)
echo '{"aps":{"alert":"hi"}}' >"$work/body.json"
url="https://127.0.0.1:$port/3/device/$(printf 'ab%.0s' $(seq 32))"
rss() { awk '/^VmRSS/ {print $2}' "/proc/$mock/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$mock/stat"; }
start=$(date +%s.%N)
done_count=0
step=$((connections / 10))
echo "connections VmRSS_KiB elapsed_s"
while [ "$done_count" -lt "$connections" ]; do
    out=$(h2load -n "$batch" -c "$batch" -m 1 -d "$work/body.json" "$url" 2>&1)
    grep -q "$batch succeeded, 0 failed" <<<"$out" || { echo "h2load: $out" >&2; exit 1; }
    done_count=$((done_count + batch))
    if [ $((done_count % step)) -eq 0 ]; then
        echo "$done_count $(rss) $(echo "$(date +%s.%N) - $start" | bc)"
    fi
done
ticks=$(cpu_ticks)
stats=$(curl -sS --http2 --cacert "$work/ca.pem" "https://127.0.0.1:$port/stats")
echo "/stats: ${#stats} bytes: $stats"
echo "mock CPU: $(echo "scale=1; $ticks * 1000000 / $(getconf CLK_TCK) / $connections" | bc) us per connection (TLS handshake, one request, GOAWAY)"
