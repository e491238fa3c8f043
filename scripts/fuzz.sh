#!/usr/bin/env bash
# Fuzzing (docs/FUZZING.md). Builds the libFuzzer binaries of Tests/Fuzz and runs them.
#
#   scripts/fuzz.sh build              build every fuzz binary (-sanitize=fuzzer,address)
#   scripts/fuzz.sh run [TARGET...]    run each target FUZZ_SECONDS seconds, one after the other
#   scripts/fuzz.sh merge [TARGET...]  minimize Tests/Fuzz/Corpus/<target> with what the runs found
#   scripts/fuzz.sh list               the targets
#
# Environment: FUZZ_SECONDS (default 60), FUZZ_SCRATCH (build and work folder, default
# .build-fuzz), FUZZ_NICE (default 19), FUZZ_FLAGS (more libFuzzer flags), SWIFT.
# A run reads the committed corpus and regressions and writes what it finds to
# $FUZZ_SCRATCH/work/<target>; crash inputs go to $FUZZ_SCRATCH/artifacts/<target>/. The summary
# table goes to stdout and $FUZZ_SCRATCH/summary.txt; the exit status is 1 when a target crashed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SWIFT=${SWIFT:-swift}
SCRATCH=${FUZZ_SCRATCH:-$ROOT/.build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
NICE=${FUZZ_NICE:-19}
FUZZ_DIR=$ROOT/Tests/Fuzz
# target (corpus folder name) : executable
ALL="csv:FuzzCSV ndjson:FuzzNDJSON json-scanner:FuzzJSONScanner template:FuzzTemplate
apns-response:FuzzAPNsResponse fcm-response:FuzzFCMResponse oauth-response:FuzzOAuthResponse http2-client:FuzzHTTP2Client
http1-client:FuzzHTTP1Client decompress:FuzzDecompress webpush-subscription:FuzzWebPushSubscription"
COMMON_FLAGS=(-max_len=4096 -timeout=10 -rss_limit_mb=2048)

binary() {  # target -> executable path
    local pair
    for pair in $ALL; do
        if [ "${pair%%:*}" = "$1" ]; then echo "$SCRATCH/release/${pair##*:}"; return; fi
    done
    echo "unknown fuzz target '$1' (scripts/fuzz.sh list)" >&2
    exit 2
}

selected() {  # the targets named, or all
    if [ $# -gt 0 ]; then echo "$@"; else for pair in $ALL; do echo "${pair%%:*}"; done; fi
}

build() {
    nice -n "$NICE" "$SWIFT" build --package-path "$FUZZ_DIR" --scratch-path "$SCRATCH" -c release \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library
}

run() {
    local failed=0 target bin log work
    mkdir -p "$SCRATCH/logs"
    printf '%-15s %8s %12s %9s %7s %7s %7s %s\n' target seconds execs exec/s cov ft corpus crashes >"$SCRATCH/summary.txt"
    for target in $(selected "$@"); do
        bin=$(binary "$target")
        log=$SCRATCH/logs/$target.log
        work=$SCRATCH/work/$target
        mkdir -p "$work" "$SCRATCH/artifacts/$target" "$FUZZ_DIR/Corpus/$target" "$FUZZ_DIR/Regressions/$target"
        echo "== $target: ${SECONDS_EACH}s ($log)" >&2
        local status=0
        # shellcheck disable=SC2086
        nice -n "$NICE" "$bin" "${COMMON_FLAGS[@]}" -max_total_time="$SECONDS_EACH" -print_final_stats=1 \
            -artifact_prefix="$SCRATCH/artifacts/$target/" ${FUZZ_FLAGS:-} \
            "$work" "$FUZZ_DIR/Corpus/$target" "$FUZZ_DIR/Regressions/$target" >"$log" 2>&1 || status=$?
        local last execs rate cov ft crashes
        last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
        cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
        ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
        crashes=$(find "$SCRATCH/artifacts/$target" -type f | wc -l)
        if [ "$status" -ne 0 ]; then failed=1; fi
        printf '%-15s %8s %12s %9s %7s %7s %7s %s\n' "$target" "$SECONDS_EACH" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" \
            "$(find "$work" "$FUZZ_DIR/Corpus/$target" -type f | wc -l)" "$crashes$([ "$status" -ne 0 ] && echo " (exit $status)")" \
            >>"$SCRATCH/summary.txt"
        tail -1 "$SCRATCH/summary.txt" >&2
    done
    cat "$SCRATCH/summary.txt"
    return $failed
}

merge() {
    local target bin fresh
    for target in $(selected "$@"); do
        bin=$(binary "$target")
        fresh=$(mktemp -d "$SCRATCH/merge.XXXXXX")
        mkdir -p "$SCRATCH/work/$target"
        nice -n "$NICE" "$bin" "${COMMON_FLAGS[@]}" -merge=1 "$fresh" "$FUZZ_DIR/Corpus/$target" "$SCRATCH/work/$target" \
            >"$SCRATCH/logs/$target.merge.log" 2>&1
        rm -rf "$FUZZ_DIR/Corpus/$target"
        mv "$fresh" "$FUZZ_DIR/Corpus/$target"
        chmod 755 "$FUZZ_DIR/Corpus/$target"
        echo "$target: $(find "$FUZZ_DIR/Corpus/$target" -type f | wc -l) files, $(du -sk "$FUZZ_DIR/Corpus/$target" | cut -f1) KiB" >&2
    done
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
    build) build ;;
    run) run "$@" ;;
    merge) merge "$@" ;;
    list) for pair in $ALL; do echo "${pair%%:*}"; done ;;
    *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
