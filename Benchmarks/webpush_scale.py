#!/usr/bin/env python3
"""Web Push at scale: a large campaign over four push services at a given latency, against a
smaller one, for memory and rate.

    rows        `pushcast demo --write-web-rows` writes SMALL and LARGE subscriptions over the four
                push services the demo names (fcm.googleapis.com, updates.push.services.mozilla.com,
                web.push.apple.com, wns2-par02p.notify.windows.com), every one answered 201, with
                the keys the mock derives from each endpoint's path
    mock        `pushcast mock --webpush --latency-ms MS`: one listener whose certificate names the
                four hosts; it checks every VAPID token and decrypts every body
    send        `pushcast send` with `--connect-to HOST:443:127.0.0.1:PORT` for each host: four
                origins, four lanes, their own connections, one VAPID token each

It reports, per run: rows, wall time, rate, the client's CPU (user + system, wait4) per
notification, its peak RSS, and the mock's CPU; then the rate against the crypto floor
(Benchmarks/webpush-crypto-floor.py) on the cores the client used and on all the machine's cores.
The client and the mock share this machine's cores, and the mock decrypts every message (an ECDH
and a key derivation of its own), so on a small machine the mock sets the pace.

Usage: python3 Benchmarks/webpush_scale.py --pushcast .build/release/pushcast [--small 100000]
       [--large 1000000] [--latency-ms 50] [--connections 4] [--streams 100]
"""

import argparse
import datetime
import json
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import BenchmarkError, Child, stop_live_children  # noqa: E402
import webpush  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOSTS = ["fcm.googleapis.com", "updates.push.services.mozilla.com", "web.push.apple.com", "wns2-par02p.notify.windows.com"]
PAYLOAD = '{"title":"Hello","body":"Your order shipped","url":"https://shop.example/orders/{{user_id}}"}'


def write_rows(pushcast, path, rows, work):
    if os.path.exists(path):
        return
    child = Child("rows-%d" % rows, [pushcast, "demo", "--write-web-rows", path, "--rows", str(rows)], work)
    if not child.wait(3600) or child.exit_code != 0:
        raise BenchmarkError("writing %d rows failed:\n%s" % (rows, child.stderr()))


def start_mock(pushcast, work, options):
    mock = Child("mock", [pushcast, "mock", "--webpush", "--auth", "none", "--latency-ms", str(options.latency_ms),
                          "--workers", str(options.mock_workers), "--hosts", ",".join(HOSTS + ["127.0.0.1"]),
                          "--write-ca", os.path.join(work, "ca.pem")], work)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(mock.stdout_path) as f:
            found = re.search(r"WEBPUSH_PORT=(\d+)", f.read())
        if found:
            return mock, int(found.group(1))
        if mock.poll():
            break
        time.sleep(0.1)
    raise BenchmarkError("the mock did not start: " + mock.stderr())


def run_send(pushcast, work, rows_path, rows, port, options):
    argv = [pushcast, "send", rows_path, "--webpush-payload", os.path.join(work, "payload.json"),
            "--vapid-key", os.path.join(work, "vapid.pem"), "--vapid-subject", "mailto:bench@example.com",
            "--ca-file", os.path.join(work, "ca.pem"), "--webpush-connections", str(options.connections),
            "--webpush-streams", str(options.streams), "--results", os.path.join(work, "r.ndjson"),
            "--prune", os.path.join(work, "p.csv"), "--summary", os.path.join(work, "s.json"), "--quiet", "--force"]
    for host in HOSTS:
        argv += ["--connect-to", "%s:443:127.0.0.1:%d" % (host, port)]
    client = Child("send-%d" % rows, argv, work)
    if not client.wait(options.timeout) or client.exit_code != 0:
        raise BenchmarkError("pushcast send exited %s:\n%s" % (client.exit_code, client.stderr()))
    with open(os.path.join(work, "s.json")) as f:
        summary = json.load(f)
    if summary["outcomes"]["delivered"] != rows:
        raise BenchmarkError("%d of %d delivered" % (summary["outcomes"]["delivered"], rows))
    return {"rows": rows, "cpu": client.cpu_seconds, "wall": client.wall_seconds, "rss_kib": client.peak_rss_kib,
            "argv": " ".join(os.path.basename(a) if a.startswith("/") else a for a in argv)}


def one_run(options, work, rows_path, rows):
    """A fresh mock for each run, so that its CPU is that run's."""
    mock, port = start_mock(options.pushcast, work, options)
    try:
        sent = run_send(options.pushcast, work, rows_path, rows, port, options)
    finally:
        mock.stop()
    sent["mock_cpu"] = mock.cpu_seconds
    return sent


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushcast", default=os.path.join(REPO_ROOT, ".build/release/pushcast"))
    parser.add_argument("--small", type=int, default=100_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--mock-workers", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    parser.add_argument("--rows-dir", default=None, help="keep the generated row files here (reused when present)")
    parser.add_argument("--floor-seconds", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=3600)
    options = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="pushcast-webpush-scale-")
    rows_dir = options.rows_dir or work
    with open(os.path.join(work, "payload.json"), "w") as f:
        f.write(PAYLOAD)
    vapid = Child("vapid", ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", os.path.join(work, "vapid.pem")], work)
    if not vapid.wait(30) or vapid.exit_code != 0:
        raise BenchmarkError("openssl could not make a VAPID key")
    runs = []
    for rows in (options.small, options.large):
        path = os.path.join(rows_dir, "web-%d.csv" % rows)
        write_rows(options.pushcast, path, rows, work)
        runs.append(one_run(options, work, path, rows))
    floor, floor_text = webpush.floor_us(options.floor_seconds)
    report(options, runs, floor, floor_text)
    return 0


def report(options, runs, floor, floor_text):
    cores = os.cpu_count() or 1
    lines = [floor_text.rstrip(), "",
             "latency %d ms, %d connections x %d streams per origin, 4 origins, mock workers %d, %d cores"
             % (options.latency_ms, options.connections, options.streams, options.mock_workers, cores), "",
             "| rows | wall s | rows/s | client µs CPU per row | client peak RSS MiB | mock CPU s |",
             "|---:|---:|---:|---:|---:|---:|"]
    for run in runs:
        lines.append("| %d | %.1f | %.0f | %.1f | %.1f | %.1f |" % (
            run["rows"], run["wall"], run["rows"] / run["wall"], run["cpu"] / run["rows"] * 1e6, run["rss_kib"] / 1024, run["mock_cpu"]))
    large = runs[-1]
    rate = large["rows"] / large["wall"]
    client_cores = large["cpu"] / large["wall"]
    lines += ["",
              "peak RSS, large against small: %.2f×" % (large["rss_kib"] / runs[0]["rss_kib"]),
              "the client used %.2f cores on average (the mock %.2f)" % (client_cores, large["mock_cpu"] / large["wall"]),
              "rate against the crypto floor on the cores the client used (%.0f/s): %.0f %%"
              % (client_cores * 1e6 / floor, 100 * rate * floor / 1e6 / client_cores),
              "rate against the crypto floor on all %d cores (%.0f/s): %.0f %%" % (cores, cores * 1e6 / floor, 100 * rate * floor / 1e6 / cores),
              "", "command: " + large["argv"]]
    text = "\n".join(lines) + "\n"
    print(text)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.join(REPO_ROOT, "Benchmarks", "results", "webpush-scale-" + stamp)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "raw.json"), "w") as f:
        json.dump({"options": vars(options) | {"pushcast": os.path.basename(options.pushcast)}, "runs": runs, "floor_us": floor}, f, indent=2)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchmarkError as error:
        stop_live_children()
        sys.exit("webpush_scale.py: %s" % error)
    except KeyboardInterrupt:
        stop_live_children()
        sys.exit(130)
