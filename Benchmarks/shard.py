#!/usr/bin/env python3
"""Sharding costs: what a shard pays to read and skip the other shards' rows, and `pushcast merge`.

1. Skipping: `pushcast check FILE` (reads the file twice: the duplicate plan's first read, then
   the row pass; renders every payload; no network) with --shard 0/64 against the same without
   --shard, CPU (user + sys) of the child from wait4. A shard's cost beyond its 1/64 share,
   spread over the rows it skips:

       per skipped row = (CPU(0/64) - CPU(whole) / 64) / (rows - rows / 64)

   Both reads are charged to the skipped rows: this is everything a shard pays for not owning them.

2. Merge: N rows in S shards (default 10,000,000 in 8), generated here in the exact results
   format (NDJSON lines as `send` writes them, with journals that name the campaign, the input's
   fingerprint and the shard), in arrival order: each shard's rows shuffled within windows of
   4,096 (the requests in flight) and 1 % of them moved up to 100,000 lines later (retries). Then
   `pushcast merge --input ... --shards S --results-pattern ... --prune-pattern ...`: wall time,
   rows per second, CPU and peak RSS of the child.

Python 3 standard library plus `openssl` (a throw-away .p8 key). Writes a results folder under
Benchmarks/results/shard-<time>/ with results.json and commands.txt.
"""

import argparse
import datetime
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from campaign import make_key, make_tokens  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMANDS = []


def run_child(args, stdout=subprocess.DEVNULL):
    """Runs a child and returns (exit status, wall s, CPU s, peak RSS MiB) from wait4."""
    COMMANDS.append(" ".join(shlex.quote(a) for a in args))
    start = time.monotonic()
    child = subprocess.Popen(args, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    err = child.stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    return code, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, err


def skip_cost(pushcast, work, rows, repeat):
    tokens = os.path.join(work, "skip-%d.csv" % rows)
    make_tokens(tokens, rows)
    payload = os.path.join(work, "payload.json")
    with open(payload, "w") as f:
        f.write('{"aps":{"alert":{"title":"Hello {{first_name}}","body":"Your order shipped"}},"locale":"{{locale}}"}')
    key = make_key(work)
    base = [pushcast, "check", tokens, "--payload", payload, "--apns-topic", "com.example.app", "--apns-key", key,
            "--apns-key-id", "BENCHKEY01", "--apns-team-id", "BENCHTEAM1", "--quiet"]
    whole, sharded = [], []
    for _ in range(repeat):
        for runs, extra in ((whole, []), (sharded, ["--shard", "0/64"])):
            code, wall, cpu, rss, err = run_child(base + extra)
            if code != 0:
                raise SystemExit("check failed (%d): %s" % (code, err))
            runs.append(cpu)
    w, s = sorted(whole)[len(whole) // 2], sorted(sharded)[len(sharded) // 2]
    skipped = rows - rows / 64
    return {"rows": rows, "cpu_whole_s": whole, "cpu_shard_0_of_64_s": sharded, "median_whole_s": w, "median_shard_s": s,
            "cpu_per_row_whole_us": w / rows * 1e6, "cpu_per_skipped_row_us": (s - w / 64) / skipped * 1e6}


def uuid_of(i):
    h = "%032x" % ((i * 0x9E3779B97F4A7C15 * 0xBF58476D1CE4E5B9) & ((1 << 128) - 1))
    return "%s-%s-5%s-8%s-%s" % (h[0:8], h[8:12], h[13:16], h[17:20], h[20:32])


def arrival_order(rows, rng):
    """A shard's rows as answers arrive: windows of 4,096 shuffled, 1 % retried later."""
    order = []
    for start in range(0, len(rows), 4096):
        window = rows[start:start + 4096]
        rng.shuffle(window)
        order.extend(window)
    for _ in range(len(order) // 100):
        i = rng.randrange(len(order))
        j = min(len(order) - 1, i + rng.randrange(100_000))
        order.insert(j, order.pop(i))
    return order


def make_shards(work, pushcast, rows, shards):
    """The input (rows of a token export) and S shards' results, prune files and journals."""
    inp = os.path.join(work, "merge-input-%d.csv" % rows)
    if not os.path.exists(inp):
        with open(inp + ".tmp", "w") as f:
            f.write("device_id,token,platform\n")
            for i in range(1, rows + 1):
                f.write("d%d,%064x,ios\n" % (i, i * 0x9E3779B97F4A7C15 & ((1 << 256) - 1)))
        os.replace(inp + ".tmp", inp)
    # The input's fingerprint, as pushcast computes it (check prints it).
    key = make_key(work)
    payload = os.path.join(work, "merge-payload.json")
    with open(payload, "w") as f:
        f.write('{"aps":{"alert":"hi"}}')
    out = subprocess.run([pushcast, "check", inp, "--payload", payload, "--apns-topic", "com.example.app", "--apns-key", key,
                          "--apns-key-id", "BENCHKEY01", "--apns-team-id", "BENCHTEAM1", "--quiet", "--shard", "0/64"],
                         capture_output=True, text=True)
    fingerprint = out.stdout.split("fingerprint ")[1].split(",")[0].split()[0]
    rng = random.Random(5)
    for k in range(shards):
        path = os.path.join(work, "r-%d.ndjson" % k)
        with open(path + ".journal", "w") as j:
            j.write("pushcast-journal 1 campaign=bench input=%s templates=0 providers=apns results=ndjson shard=%d/%d\nB\nS\n"
                    % (fingerprint, k, shards))
        if os.path.exists(path):
            continue
        mine = list(range(k + 1, rows + 1, shards))
        with open(path + ".tmp", "w") as f, open(os.path.join(work, "p-%d.csv" % k), "w") as p:
            p.write("token,provider,reason,unregistered_at,id\n")
            for r in arrival_order(mine, rng):
                token = "%064x" % (r * 0x9E3779B97F4A7C15 & ((1 << 256) - 1))
                if r % 100 == 0:
                    f.write('{"row":%d,"id":"d%d","token":"%s","provider":"apns","outcome":"pruned","status":410,"reason":"Unregistered",'
                            '"apns_id":"%s","unregistered_at":"2026-11-30T18:03:53.000Z","attempts":1,"latency_ms":%d.%d}\n'
                            % (r, r, token, uuid_of(r), 5 + r % 40, r % 10))
                    p.write("%s,apns,Unregistered,2026-11-30T18:03:53.000Z,d%d\n" % (token, r))
                else:
                    f.write('{"row":%d,"id":"d%d","token":"%s","provider":"apns","outcome":"delivered","status":200,"reason":null,'
                            '"apns_id":"%s","unregistered_at":null,"attempts":1,"latency_ms":%d.%d}\n'
                            % (r, r, token, uuid_of(r), 5 + r % 40, r % 10))
        os.replace(path + ".tmp", path)
    return inp


def merge_cost(pushcast, work, rows, shards, repeat):
    inp = make_shards(work, pushcast, rows, shards)
    size = sum(os.path.getsize(os.path.join(work, "r-%d.ndjson" % k)) for k in range(shards))
    runs = []
    for _ in range(repeat):
        out = os.path.join(work, "merged.ndjson")
        code, wall, cpu, rss, err = run_child([pushcast, "merge", "--input", inp, "--shards", str(shards),
                                               "--results-pattern", os.path.join(work, "r-{shard}.ndjson"),
                                               "--prune-pattern", os.path.join(work, "p-{shard}.csv"),
                                               "--results", out, "--prune", os.path.join(work, "merged.prune.csv"),
                                               "--tmpdir", work, "--quiet"])
        if code != 0:
            raise SystemExit("merge failed (%d): %s" % (code, err))
        if os.path.getsize(out) != size:
            raise SystemExit("merged results are %d bytes, the shards %d" % (os.path.getsize(out), size))
        runs.append({"wall_s": wall, "cpu_s": cpu, "peak_rss_mib": rss, "rows_per_s": rows / wall})
        os.remove(out)
    best = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
    return {"rows": rows, "shards": shards, "shard_bytes": size, "runs": runs, "median": best}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pushcast", default=os.path.join(REPO_ROOT, ".build/release/pushcast"))
    parser.add_argument("--skip-rows", type=int, default=2_000_000)
    parser.add_argument("--merge-rows", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--work", default=None, help="where the big files go (default: a temporary directory, kept for reruns)")
    parser.add_argument("--only", choices=["skip", "merge"], default=None)
    args = parser.parse_args()
    work = args.work or os.path.join(tempfile.gettempdir(), "pushcast-shard-bench")
    os.makedirs(work, exist_ok=True)
    result = {"machine": os.uname().machine, "cpus": os.cpu_count(), "when": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    if args.only in (None, "skip"):
        result["skip"] = skip_cost(args.pushcast, work, args.skip_rows, args.repeat)
        s = result["skip"]
        print("skip: %d rows: whole %.2f s CPU (%.2f us/row), shard 0/64 %.2f s CPU: %.3f us per skipped row"
              % (s["rows"], s["median_whole_s"], s["cpu_per_row_whole_us"], s["median_shard_s"], s["cpu_per_skipped_row_us"]))
    if args.only in (None, "merge"):
        result["merge"] = merge_cost(args.pushcast, work, args.merge_rows, args.shards, args.repeat)
        m = result["merge"]["median"]
        print("merge: %d rows in %d shards: %.1f s wall, %.0f rows/s, %.1f s CPU, peak RSS %.1f MiB"
              % (args.merge_rows, args.shards, m["wall_s"], m["rows_per_s"], m["cpu_s"], m["peak_rss_mib"]))
    folder = os.path.join(REPO_ROOT, "Benchmarks/results", "shard-" + datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "results.json"), "w") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(folder, "commands.txt"), "w") as f:
        f.write("\n".join(COMMANDS) + "\n")
    print("results: " + folder)


if __name__ == "__main__":
    main()
