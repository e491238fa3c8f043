#!/usr/bin/env python3
"""The full campaign job against h2load, and peak memory at 1M and 10M rows.

    pushcast send FILE ...            parse + template + apns-id + JWT + HTTP/2 + TLS + results line
    pushcast bench -H ... -d BODY     h2load's exact requests through pushcast's client: the transport
                                      alone, the floor under the full job
    h2load -n N ... -i URIS           the same number of POSTs, same body size, same headers

both against one `pushcast mock --auth none` (so h2load's requests, which carry no valid provider
token, are answered 200 just like pushcast's), with the same connections and streams, one client
thread each. Reports client CPU µs per notification (wait4 rusage of the client process), the
ratio, and pushcast's peak RSS; `--rss-rows 1000000,10000000` adds the memory-scaling runs.

Python 3 standard library plus `openssl` (for a throw-away .p8 key). See Benchmarks/README.md.
"""

import argparse
import datetime
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import BenchmarkError, Child, parse_h2load, stop_live_children, wait_for_port_line  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = '{"aps":{"alert":{"title":"Hello {{first_name}}","body":"Your order shipped"},"sound":"default"},"locale":"{{locale}}"}'
TOPIC = "com.example.app"


def make_tokens(path, rows, seed=7):
    """A push_devices export: device_id, token, platform, first_name, locale. Tokens start 0-3 so
    none hits the mock's special prefixes."""
    if os.path.exists(path):
        return
    rng = random.Random(seed)
    names = ["Alice", "Bob", "Li Na", "Анна", "محمد", "José"]
    with open(path + ".tmp", "w") as f:
        f.write("device_id,token,platform,first_name,locale\n")
        for i in range(rows):
            token = "%x" % rng.randrange(4) + "%063x" % rng.getrandbits(252)
            f.write("d%d,%s,ios,%s,en\n" % (i, token, names[i % len(names)]))
    os.replace(path + ".tmp", path)


def make_key(directory):
    path = os.path.join(directory, "key.p8")
    if not os.path.exists(path):
        ec = subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout"], capture_output=True, check=True)
        p8 = subprocess.run(["openssl", "pkcs8", "-topk8", "-nocrypt"], input=ec.stdout, capture_output=True, check=True)
        with open(path, "wb") as f:
            f.write(p8.stdout)
        os.chmod(path, 0o600)
    return path


MOCK_FLAGS = []


def start_mock(pushcast, work, name):
    ca = os.path.join(work, name + "-ca.pem")
    mock = Child(name + "-mock", [pushcast, "mock", "--auth", "none", "--port", "0", "--write-ca", ca] + MOCK_FLAGS, work)
    port = wait_for_port_line(mock)
    return mock, port, ca


def with_mock_cpu(result, mock):
    """The mock's own CPU (wait4 rusage after it stopped: start-up, the run, shutdown), beside the
    client's, so a table shows whether the mock could have limited the run."""
    result["mock_cpu"] = mock.cpu_seconds
    return result


def run_send(pushcast, work, tokens, rows, options, key, label, mock_binary=None, older=False):
    if older:
        # No --force for a baseline (older builds lack it): its earlier run's files go instead, so
        # a build with a journal starts afresh too.
        for name in os.listdir(work):
            if name.startswith(label + ".results.ndjson"):
                os.remove(os.path.join(work, name))
    mock, port, ca = start_mock(mock_binary or pushcast, work, label)
    try:
        argv = [pushcast, "send", tokens, "--payload", os.path.join(work, "payload.json"), "--apns-topic", TOPIC,
                "--apns-key", key, "--apns-key-id", "BENCHKEY01", "--apns-team-id", "BENCHTEAM1",
                "--apns-endpoint", "https://127.0.0.1:%d" % port, "--ca-file", ca,
                "--connections", str(options.connections), "--streams", str(options.streams)]
        argv += ["--workers", str(options.send_workers)] if options.send_workers > 0 else []
        argv += [
                "--results", os.path.join(work, label + ".results.ndjson"), "--prune", os.path.join(work, label + ".prune.csv"),
                "--summary", os.path.join(work, label + ".summary.json"), "--quiet"] + ([] if older else ["--force"] + options.send_flags)
        client = Child(label + "-send", argv, work)
        if not client.wait(options.timeout):
            raise BenchmarkError("%s: pushcast send ran past %d s" % (label, options.timeout))
        if client.exit_code != 0:
            raise BenchmarkError("%s: pushcast send exited %s:\n%s" % (label, client.exit_code, client.stderr()))
        with open(os.path.join(work, label + ".summary.json")) as f:
            summary = json.load(f)
        result = {"argv": argv, "rows": rows, "delivered": summary["outcomes"]["delivered"], "cpu": client.cpu_seconds,
                "wall": client.wall_seconds, "rss_kib": client.peak_rss_kib, "rate": summary["notifications_per_second"],
                "p50": summary["latency_ms"]["p50"], "p99": summary["latency_ms"]["p99"]}
    finally:
        mock.stop()
    return with_mock_cpu(result, mock)


FAKE_JWT = ("eyJhbGciOiJFUzI1NiIsImtpZCI6IkJFTkNIS0VZMDEifQ.eyJpc3MiOiJCRU5DSFRFQU0xIiwiaWF0IjoxNzk2MDAwMDAwfQ."
            + "A" * 86)
# The headers h2load sends (and `pushcast bench` in the transport-alone run): the campaign's, with
# one fixed apns-id and a JWT-shaped bearer of the real one's length.
H2_HEADERS = ["apns-topic: " + TOPIC, "apns-push-type: alert", "apns-priority: 10",
              "apns-id: 0a0b0c0d-0e0f-5000-8000-000000000000", "authorization: bearer " + FAKE_JWT,
              "content-type: application/json"]


def write_body(work):
    body = os.path.join(work, "body.json")
    with open(body, "w") as f:
        f.write(TEMPLATE.replace("{{first_name}}", "Alice").replace("{{locale}}", "en"))
    return body


def run_transport(pushcast, work, rows, options):
    """`pushcast bench` with h2load's exact requests: pushcast's HTTP/2 + TLS + io_uring client with
    none of the campaign's work (no file, template, apns-id, outcome or results line). The floor
    under the full job's CPU, measured the same way."""
    mock, port, ca = start_mock(pushcast, work, "transport")
    try:
        argv = [pushcast, "bench", "--endpoint", "https://127.0.0.1:%d" % port, "--ca-file", ca, "-n", str(rows),
                "-c", str(options.connections), "-m", str(options.streams), "--workers", "1", "-d", write_body(work),
                "--path", "/3/device/0" + "%063x" % 0x1234567, "--json"]
        for header in H2_HEADERS:
            argv += ["-H", header]
        client = Child("transport", argv, work)
        if not client.wait(options.timeout):
            raise BenchmarkError("pushcast bench ran past %d s" % options.timeout)
        if client.exit_code != 0:
            raise BenchmarkError("pushcast bench exited %s:\n%s" % (client.exit_code, client.stderr()))
        report = json.loads(client.stdout())
        result = {"argv": argv, "rows": rows, "delivered": report["succeeded"], "cpu": client.cpu_seconds,
                "wall": client.wall_seconds, "rss_kib": client.peak_rss_kib}
    finally:
        mock.stop()
    return with_mock_cpu(result, mock)


def run_h2load(pushcast, work, rows, options):
    mock, port, ca = start_mock(pushcast, work, "h2load")
    try:
        rng = random.Random(3)
        uris = os.path.join(work, "uris.txt")
        with open(uris, "w") as f:
            for _ in range(10000):
                f.write("https://127.0.0.1:%d/3/device/%x%063x\n" % (port, rng.randrange(4), rng.getrandbits(252)))
        argv = ["h2load", "-n", str(rows), "-c", str(options.connections), "-m", str(options.streams), "-t", "1",
                "-d", write_body(work)]
        for header in H2_HEADERS:
            argv += ["-H", header]
        argv += ["-i", uris]
        client = Child("h2load", argv, work)
        if not client.wait(options.timeout):
            raise BenchmarkError("h2load ran past %d s" % options.timeout)
        parsed = parse_h2load(client.stdout())
        result = {"argv": argv, "rows": rows, "delivered": parsed.get("succeeded"), "cpu": client.cpu_seconds,
                "wall": client.wall_seconds, "rss_kib": client.peak_rss_kib, "rate": parsed.get("requests_per_second"),
                "mean_ms": parsed["latency_us"]["mean"] / 1000.0 if "latency_us" in parsed else None}
    finally:
        mock.stop()
    return with_mock_cpu(result, mock)


def baseline_table(options, work, tokens, key, per_notification, median):
    """The current binary's full job against `--baseline`'s, alternating, `--repeat` runs each, both
    clients talking to the current binary's mock. The baseline gets none of --send-flags, nor --force
    (binaries before the journal have neither, and overwrite their results file)."""
    current, older = [], []
    for i in range(max(1, options.repeat)):
        older.append(run_send(options.baseline, work, tokens, options.rows, options, key, "baseline", mock_binary=options.pushcast,
                              older=True))
        current.append(run_send(options.pushcast, work, tokens, options.rows, options, key, "current"))
    us_old = median([per_notification(r) for r in older])
    us_new = median([per_notification(r) for r in current])
    return ["| pushcast send (full job) | client CPU µs per notification, median | every run |", "|---|---:|---|",
            "| baseline %s | %.2f | %s |" % (options.baseline, us_old, ", ".join("%.2f" % per_notification(r) for r in older)),
            "| current %s | %.2f | %s |" % (options.pushcast, us_new, ", ".join("%.2f" % per_notification(r) for r in current)),
            "", "current / baseline: **%.3f** (%d alternating runs each)" % (us_new / us_old, len(current))]


def client_table(sends, h2s, transports, per_notification, median):
    """Medians per client: CPU per notification (client and mock), rate, latency; then the ratios."""
    def middle(runs):
        return sorted(runs, key=per_notification)[len(runs) // 2]

    def mock_us(runs):
        return median([r["mock_cpu"] * 1e6 / max(1, r["delivered"] or 1) for r in runs])

    def rate(runs):
        rates = [r["rate"] for r in runs if r.get("rate")]
        return "%.0f" % median(rates) if rates else "n/a"

    def latency(runs):
        if runs and "p99" in runs[0]:
            return "%.1f / %.1f" % (median([r["p50"] for r in runs]), median([r["p99"] for r in runs]))
        means = [r["mean_ms"] for r in runs if r.get("mean_ms") is not None]
        return "mean %.1f" % median(means) if means else "n/a"

    lines = ["| client | rows / requests | delivered | client CPU µs per notification | mock CPU µs per notification "
             "| notifications/s | latency ms p50 / p99 | wall s | peak RSS MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    named = [("pushcast send (full job)", sends), ("pushcast bench, h2load's requests (transport alone)", transports),
             ("h2load (same requests)", h2s)]
    for name, runs in named:
        if not runs:
            continue
        r = middle(runs)
        lines.append("| %s | %d | %s | %.2f | %.2f | %s | %s | %.2f | %.1f |"
                     % (name, r["rows"], r["delivered"], median([per_notification(x) for x in runs]), mock_us(runs),
                        rate(runs), latency(runs), r["wall"], r["rss_kib"] / 1024))
    us_send = median([per_notification(r) for r in sends])
    us_h2 = median([per_notification(r) for r in h2s])
    lines += ["", "pushcast send / h2load, CPU per notification: **%.2f**" % (us_send / us_h2)]
    if transports:
        lines += ["", "pushcast's transport alone / h2load: **%.2f** (the floor under the full job's ratio: the same HTTP/2 "
                  "library frames both; pushcast sends `authorization` as a raw literal, h2load Huffman-codes it)" % (median([per_notification(r) for r in transports]) / us_h2)]
    if len(sends) > 1:
        every = "; ".join("%s %s" % (name, ", ".join("%.2f" % per_notification(r) for r in runs)) for name, runs in named if runs)
        lines += ["", "%d alternating runs each; medians above. Every run, µs per notification: %s" % (len(sends), every)]
        rates = "; ".join("%s %s" % (name, ", ".join("%.0f" % r["rate"] for r in runs if r.get("rate")))
                          for name, runs in named if runs and any(r.get("rate") for r in runs))
        lines += ["", "Every run, notifications/s (in the same order): %s" % rates]
    return lines + [""]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pushcast", default=os.path.join(REPO_ROOT, ".build/release/pushcast"))
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("-c", "--connections", type=int, default=4)
    parser.add_argument("-m", "--streams", type=int, default=250)
    parser.add_argument("--rss-rows", default="", help="comma-separated row counts for the memory runs, e.g. 1000000,10000000")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run pushcast and h2load this many times each, alternating, and report the medians "
                             "(this machine is noisy: one pair can swing the ratio by 20 %%)")
    parser.add_argument("--timeout", type=int, default=1800)
    parser.add_argument("--send-flags", type=shlex.split, default=[],
                        help="extra options for pushcast send, e.g. \"--fsync never\" (the journal's cost)")
    parser.add_argument("--baseline", metavar="BINARY",
                        help="also run this (older) pushcast's send, alternating with the current one against the same "
                             "mock binary, and report both medians: the no-regression check")
    parser.add_argument("--mock-flags", type=shlex.split, default=[],
                        help="extra options for every pushcast mock, e.g. \"--latency-ms 50 --max-streams 1000\" (the "
                             "latency-bound runs)")
    parser.add_argument("--send-workers", type=int, default=1,
                        help="pushcast send --workers (default 1, like h2load's one thread; 0: pushcast's own default)")
    parser.add_argument("--skip-transport", action="store_true", help="leave out the transport-alone run")
    parser.add_argument("--data-dir", default=os.path.join(tempfile.gettempdir(), "pushcast-bench-data"))
    options = parser.parse_args(argv)
    MOCK_FLAGS[:] = options.mock_flags
    if not os.path.exists(options.pushcast):
        print("campaign.py: no pushcast binary at %s; build it with `swift build -c release`" % options.pushcast, file=sys.stderr)
        return 2
    os.makedirs(options.data_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.join(REPO_ROOT, "Benchmarks", "results", "campaign-" + stamp)
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="pushcast-campaign-")
    with open(os.path.join(work, "payload.json"), "w") as f:
        f.write(TEMPLATE)
    key = make_key(work)
    lines = []
    try:
        tokens = os.path.join(options.data_dir, "tokens-%d.csv" % options.rows)
        make_tokens(tokens, options.rows)
        sends, h2s, transports = [], [], []
        for _ in range(max(1, options.repeat)):
            sends.append(run_send(options.pushcast, work, tokens, options.rows, options, key, "send"))
            h2s.append(run_h2load(options.pushcast, work, options.rows, options))
            if not options.skip_transport:
                transports.append(run_transport(options.pushcast, work, options.rows, options))

        def per_notification(r):
            return r["cpu"] * 1e6 / max(1, r["delivered"] or 1)

        def median(values):
            ordered = sorted(values)
            middle = len(ordered) // 2
            return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2

        if options.baseline:
            lines += baseline_table(options, work, tokens, key, per_notification, median) + [""]
        lines += client_table(sends, h2s, transports, per_notification, median)
        lines += [""]
        rss = []
        for rows in [int(r) for r in options.rss_rows.split(",") if r]:
            path = os.path.join(options.data_dir, "tokens-%d.csv" % rows)
            make_tokens(path, rows)
            result = run_send(options.pushcast, work, path, rows, options, key, "rss-%d" % rows)
            rss.append(result)
        if rss:
            lines += ["| rows | delivered | peak RSS MiB | wall s | notifications/s |", "|---:|---:|---:|---:|---:|"]
            for r in rss:
                lines.append("| %d | %d | %.1f | %.1f | %.0f |" % (r["rows"], r["delivered"], r["rss_kib"] / 1024, r["wall"], r["rate"]))
            if len(rss) > 1:
                lines += ["", "peak RSS, %d rows / %d rows: **%.2f**" % (rss[-1]["rows"], rss[0]["rows"], rss[-1]["rss_kib"] / rss[0]["rss_kib"])]
        commands = [" ".join(runs[0]["argv"]) for runs in (sends, transports, h2s) if runs]
        if MOCK_FLAGS:
            commands.insert(0, "pushcast mock --auth none --port 0 " + " ".join(MOCK_FLAGS))
        lines += ["", "Commands (paths and ports vary):", "```"] + commands + ["```"]
    except BenchmarkError as error:
        print("campaign.py: %s" % error, file=sys.stderr)
        return 1
    finally:
        stop_live_children()
        # The results files of a 10,000,000-row run are 2.8 GB each: left behind, they filled /tmp
        # and the page cache that the next run writes through. The tables keep what matters.
        shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text)
    print(text)
    print("campaign.py: results in %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
