#!/usr/bin/env python3
"""`pushcast report` on big results files: wall time, CPU and peak RSS of the child.

Generates results files of N rows (default 1,000,000 and 10,000,000) in the exact NDJSON format
`send` writes (mixed APNs/FCM, about 94 % delivered, 3 % pruned, 1 % invalid, 1 % duplicate, some
retried and failed rows, latencies 5-900 ms), then runs

    pushcast report RESULTS --html OUT.html

three times on each and keeps the median wall time; peak RSS (ru_maxrss of the child, wait4)
shows whether memory stays flat as the file grows. Python 3 standard library only. Writes
Benchmarks/results/report-<time>/ with results.json and commands.txt.

    Benchmarks/report.py --pushcast .build/release/pushcast [--rows 1000000,10000000] [--scratch DIR]
"""

import argparse
import datetime
import json
import os
import random
import shlex
import statistics
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_results(path, rows, seed=15):
    """`rows` results lines as send writes them (tokens 64 hex digits or 152 FCM characters)."""
    rng = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    apns_tokens = ["%064x" % rng.getrandbits(256) for _ in range(4096)]
    fcm_tokens = ["".join(rng.choice(alphabet) for _ in range(152)) for _ in range(4096)]
    kinds = (["delivered"] * 94 + ["pruned"] * 3 + ["invalid", "duplicate", "failed"])
    with open(path, "w", buffering=1 << 22) as out:
        for row in range(1, rows + 1):
            apns = row % 5 < 3
            token = apns_tokens[row & 4095] if apns else fcm_tokens[row & 4095]
            kind = kinds[rng.randrange(100)]
            latency = "%.1f" % (5 + rng.random() * 895)
            attempts = 2 if row % 97 == 0 else 1
            if kind == "delivered":
                status, reason = 200, "null"
            elif kind == "pruned":
                status, reason = (410, '"Unregistered"') if apns else (404, '"UNREGISTERED"')
            elif kind == "failed":
                status, reason = (503, '"ServiceUnavailable"') if apns else (503, '"UNAVAILABLE"')
                attempts = 5
            else:
                status, reason, latency, attempts = "null", '"InvalidToken"' if kind == "invalid" else '"Duplicate"', "null", 0
            if apns:
                line = ('{"row":%d,"id":"d%d","token":"%s","provider":"apns","outcome":"%s","status":%s,"reason":%s,'
                        '"apns_id":"%08x-0000-4000-8000-%012x","unregistered_at":null,"attempts":%d,"latency_ms":%s}\n'
                        % (row, row, token, kind, status, reason, row, row, attempts, latency))
            else:
                line = ('{"row":%d,"id":"d%d","token":"%s","provider":"fcm","outcome":"%s","status":%s,"reason":%s,'
                        '"apns_id":null,"fcm_name":"projects/p/messages/%d","unregistered_at":null,"attempts":%d,"latency_ms":%s}\n'
                        % (row, row, token, kind, status, reason, row, attempts, latency))
            out.write(line)


def run(command):
    started = time.monotonic()
    pid = os.spawnv(os.P_NOWAIT, command[0], command)
    _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - started
    if status != 0:
        sys.exit("failed (%d): %s" % (status, shlex.join(command)))
    return {"wall_seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime, "max_rss_mib": usage.ru_maxrss / 1024}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pushcast", default=os.path.join(REPO_ROOT, ".build/release/pushcast"))
    parser.add_argument("--rows", default="1000000,10000000")
    parser.add_argument("--scratch", default="/tmp/pushcast-report-bench")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.makedirs(args.scratch, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    folder = os.path.join(REPO_ROOT, "Benchmarks", "results", "report-" + stamp)
    os.makedirs(folder)
    commands, results = [], []
    for rows in [int(r) for r in args.rows.split(",")]:
        path = os.path.join(args.scratch, "results-%d.ndjson" % rows)
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            print("writing %s" % path, file=sys.stderr)
            write_results(path, rows)
        command = [args.pushcast, "report", path, "--html", os.path.join(args.scratch, "report-%d.html" % rows)]
        commands.append(shlex.join(command))
        runs = [run(command) for _ in range(args.runs)]
        wall = statistics.median(r["wall_seconds"] for r in runs)
        entry = {"rows": rows, "bytes": os.path.getsize(path), "wall_seconds_median": wall,
                 "rows_per_second": rows / wall, "cpu_seconds_median": statistics.median(r["cpu_seconds"] for r in runs),
                 "max_rss_mib": max(r["max_rss_mib"] for r in runs), "runs": runs}
        results.append(entry)
        print("%d rows (%.2f GB): median %.2f s (%.2f M rows/s), peak RSS %.1f MiB"
              % (rows, entry["bytes"] / 1e9, wall, entry["rows_per_second"] / 1e6, entry["max_rss_mib"]))
    with open(os.path.join(folder, "results.json"), "w") as out:
        json.dump({"pushcast": args.pushcast, "results": results}, out, indent=2)
    with open(os.path.join(folder, "commands.txt"), "w") as out:
        out.write("\n".join(commands) + "\n")
    print("results: %s" % folder)


if __name__ == "__main__":
    main()
