#!/usr/bin/env python3
"""Web Push: pushcast's CPU per notification against the crypto floor, its APNs cost in the same
run, and pywebpush.

    floor        Benchmarks/webpush-crypto-floor.py: one ephemeral key, one ECDH, HKDF and
                 AES-128-GCM of a 256-byte payload, from `openssl speed`, one core
    web          pushcast send ROWS subscriptions (one push service, HTTP/2) to
                 Tests/Interop/webpush_service.py, which decrypts every body (http-ece) and
                 checks every VAPID token (py-vapid)
    apns         pushcast send ROWS APNs rows to `pushcast mock --auth none` (Benchmarks/campaign.py's
                 run), for pushcast's cost per notification apart from the crypto
    pywebpush    pywebpush 2.5.0 sending PYROWS of the same subscriptions (its `requests` session,
                 HTTP/1.1, to the service's HTTP/1.1 port)

CPU is the client process's user + system time (wait4 rusage); the push service's own CPU is not
counted. Needs the venv of `make venv` (http-ece, py-vapid, pywebpush, h2, h11).

Usage: python3 Benchmarks/webpush.py --pushcast .build/release/pushcast [--rows 20000] [--pyrows 2000]
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import BenchmarkError, Child, stop_live_children  # noqa: E402
import campaign  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVICE = os.path.join(REPO_ROOT, "Tests/Interop/webpush_service.py")
PAYLOAD = '{"title":"Hello {{name}}","body":"Your order shipped","url":"https://shop.example/orders/{{name}}"}'

PYWEBPUSH_DRIVER = r'''
import csv, json, socket, sys, time
# The push service's host names are the benchmark's own: they resolve to loopback here.
_getaddrinfo = socket.getaddrinfo
socket.getaddrinfo = lambda host, *rest, **kw: _getaddrinfo("127.0.0.1" if host.endswith(".test") else host, *rest, **kw)
from pywebpush import WebPusher
from py_vapid import Vapid02
rows, origin, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
vapid = Vapid02(); vapid.generate_keys()
template = sys.argv[4]
sent = 0
headers, signed = None, 0
for row in csv.DictReader(open(rows)):
    if not row["endpoint"].startswith(origin + "/"):
        continue
    if headers is None or time.time() - signed > 3600:
        headers, signed = vapid.sign({"sub": "mailto:bench@example.com", "aud": origin, "exp": int(time.time()) + 12 * 3600}), time.time()
    subscription = {"endpoint": row["endpoint"], "keys": {"p256dh": row["p256dh"], "auth": row["auth"]}}
    response = WebPusher(subscription).send(template.replace("{{name}}", row["name"]), headers=dict(headers), ttl=60,
                                            content_encoding="aes128gcm")
    if response.status_code != 201:
        sys.exit(f"{row['endpoint']}: {response.status_code}")
    sent += 1
    if sent == count:
        break
print(sent)
'''


def floor_us(seconds):
    script = os.path.join(REPO_ROOT, "Benchmarks/webpush-crypto-floor.py")
    out = subprocess.run([sys.executable, script, "--seconds", str(seconds)], capture_output=True, text=True, check=True).stdout
    match = re.search(r"floor\s+([\d.]+) us/message", out)
    if not match:
        raise BenchmarkError("no floor in:\n" + out)
    return float(match.group(1)), out


def start_service(python, work, h2, h1):
    service = Child("service", [python, SERVICE, "serve", "--dir", work, "--h2-port", str(h2[0]), "--h2-origin", h2[1],
                                "--h1-port", str(h1[0]), "--h1-origin", h1[1], "--log", os.path.join(work, "service.ndjson")], work)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(service.stdout_path) as f:
            if "READY" in f.read():
                return service
        if service.poll():
            break
        time.sleep(0.1)
    raise BenchmarkError("the push service did not start: " + service.stderr())


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_web(pushcast, work, rows, h2, options):
    with open(os.path.join(work, "web-payload.json"), "w") as f:
        f.write(PAYLOAD)
    argv = [pushcast, "send", os.path.join(work, "web.csv"), "--webpush-payload", os.path.join(work, "web-payload.json"),
            "--vapid-key", os.path.join(work, "vapid.txt"), "--vapid-subject", "mailto:bench@example.com",
            "--ca-file", os.path.join(work, "ca.pem"), "--resolve", "push-a.test:%d:127.0.0.1" % h2[0],
            "--webpush-connections", str(options.connections), "--webpush-streams", str(options.streams),
            "--results", os.path.join(work, "web.results.ndjson"), "--prune", os.path.join(work, "web.prune.csv"),
            "--summary", os.path.join(work, "web.summary.json"), "--quiet", "--force"]
    client = Child("web-send", argv, work)
    if not client.wait(options.timeout) or client.exit_code != 0:
        raise BenchmarkError("pushcast send (web) exited %s:\n%s" % (client.exit_code, client.stderr()))
    with open(os.path.join(work, "web.summary.json")) as f:
        summary = json.load(f)
    if summary["outcomes"]["delivered"] != rows:
        raise BenchmarkError("web: %d of %d delivered" % (summary["outcomes"]["delivered"], rows))
    return {"argv": argv, "cpu": client.cpu_seconds, "wall": client.wall_seconds, "rss_kib": client.peak_rss_kib, "rows": rows}


def run_pywebpush(python, work, rows, h1):
    driver = os.path.join(work, "pywebpush_driver.py")
    with open(driver, "w") as f:
        f.write(PYWEBPUSH_DRIVER)
    os.environ["REQUESTS_CA_BUNDLE"] = os.path.join(work, "ca.pem")
    client = Child("pywebpush", [python, driver, os.path.join(work, "py.csv"), h1[1], str(rows), PAYLOAD], work)
    if not client.wait(3600) or client.exit_code != 0:
        raise BenchmarkError("pywebpush exited %s:\n%s" % (client.exit_code, client.stderr()))
    return {"cpu": client.cpu_seconds, "wall": client.wall_seconds, "rows": rows}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushcast", default=os.path.join(REPO_ROOT, ".build/release/pushcast"))
    parser.add_argument("--python", default=os.path.join(REPO_ROOT, ".venv/bin/python"))
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--pyrows", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--floor-seconds", type=int, default=2)
    parser.add_argument("--timeout", type=int, default=1800)
    options = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="pushcast-webpush-bench-")
    h2_port, h1_port = free_port(), free_port()
    h2, h1 = (h2_port, "https://push-a.test:%d" % h2_port), (h1_port, "https://push-b.test:%d" % h1_port)
    # One set of subscriptions alternating between the two origins (one certificate names both);
    # pushcast sends the HTTP/2 origin's, pywebpush the HTTP/1.1 one's.
    subprocess.run([options.python, SERVICE, "make", "--dir", work, "--count", str(2 * max(options.rows, options.pyrows)),
                    "--origin", h2[1], "--origin", h1[1], "--plain"], check=True)
    with open(os.path.join(work, "subscriptions.csv")) as f:
        header, *lines = f.read().splitlines()
    for name, origin, count in (("web.csv", h2[1], options.rows), ("py.csv", h1[1], options.pyrows)):
        mine = [line for line in lines if line.startswith(origin + "/")][:count]
        with open(os.path.join(work, name), "w") as f:
            f.write("\n".join([header] + mine) + "\n")
    floor, floor_text = floor_us(options.floor_seconds)
    service = start_service(options.python, work, h2, h1)
    try:
        web = run_web(options.pushcast, work, options.rows, h2, options)
        py = run_pywebpush(options.python, work, options.pyrows, h1) if options.pyrows > 0 else None
    finally:
        service.stop()
    apns = apns_cost(options, work)
    report(options, floor, floor_text, web, apns, py, work)
    return 0


def apns_cost(options, work):
    """pushcast's CPU per APNs notification, the same machine and run (campaign.py's full job)."""
    tokens = os.path.join(work, "apns.csv")
    campaign.make_tokens(tokens, options.rows)
    with open(os.path.join(work, "payload.json"), "w") as f:
        f.write(campaign.TEMPLATE)
    key = campaign.make_key(work)
    send_options = argparse.Namespace(connections=options.connections, streams=options.streams, send_workers=0, send_flags=[],
                                      timeout=options.timeout)
    return campaign.run_send(options.pushcast, work, tokens, options.rows, send_options, key, "apns")


def report(options, floor, floor_text, web, apns, py, work):
    web_us = web["cpu"] * 1e6 / web["rows"]
    apns_us = apns["cpu"] * 1e6 / apns["rows"]
    lines = [
        "| measure | µs CPU per notification | notifications per CPU-second |",
        "|---|---:|---:|",
        "| crypto floor (one core, 256-byte payload) | %.1f | %.0f |" % (floor, 1e6 / floor),
        "| pushcast, APNs full job | %.1f | %.0f |" % (apns_us, 1e6 / apns_us),
        "| pushcast, Web Push full job | %.1f | %.0f |" % (web_us, 1e6 / web_us),
    ]
    if py:
        py_us = py["cpu"] * 1e6 / py["rows"]
        lines.append("| pywebpush 2.5.0 | %.1f | %.0f |" % (py_us, 1e6 / py_us))
    lines.append("")
    lines.append("Web Push against floor + APNs cost: %.2f (target ≤ 1.5)" % (web_us / (floor + apns_us)))
    if py:
        lines.append("pushcast against pywebpush, notifications per CPU-second: %.1f× (target ≥ 20×)" % (py_us / web_us))
    lines.append("pushcast Web Push peak RSS: %.1f MiB for %d rows" % (web["rss_kib"] / 1024, web["rows"]))
    text = "\n".join(lines)
    print(floor_text)
    print(text)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = os.path.join(REPO_ROOT, "Benchmarks/results", "webpush-" + stamp)
    os.makedirs(out, exist_ok=True)
    command = "python3 Benchmarks/webpush.py --rows %d --pyrows %d --connections %d --streams %d" % (
        options.rows, options.pyrows, options.connections, options.streams)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write("`%s`\n\n%s\n" % (command, text))
    with open(os.path.join(out, "raw.json"), "w") as f:
        json.dump({"floor_us": floor, "web": {k: v for k, v in web.items() if k != "argv"},
                   "apns": {k: v for k, v in apns.items() if k != "argv"}, "pywebpush": py}, f, indent=1)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchmarkError as error:
        print("benchmark failed: %s" % error, file=sys.stderr)
        stop_live_children()
        sys.exit(1)
