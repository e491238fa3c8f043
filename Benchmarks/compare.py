#!/usr/bin/env python3
"""Compare pushcast with h2load (client) and with nghttpd (server), in one run, on loopback.

Four runs, each against a freshly started server so that the server's CPU time belongs to one
client run only:

    nghttpd      <- h2load          (the reference pair)
    nghttpd      <- pushcast bench
    pushcast mock <- h2load
    pushcast mock <- pushcast bench

Every run sends the same work: N POST requests of the same JSON body to /3/device/<64 hex>,
over C TLS connections with at most M concurrent streams each. For each client the script
measures wall time and CPU time (user + sys, from wait4's rusage of the client process) and
peak RSS; for each server, CPU time from its rusage after SIGINT/SIGTERM. Raw outputs, the
exact commands and a markdown table go to Benchmarks/results/<UTC timestamp>/.

Python 3 standard library only. See Benchmarks/README.md.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEVICE_TOKEN = "a1" * 32  # 64 hex characters, as an APNs device token
REQUEST_PATH = "/3/device/" + DEVICE_TOKEN
BODY = b'{"aps":{"alert":{"title":"pushcast","body":"benchmark notification"},"sound":"default"}}'
SERVER_START_SECONDS = 15.0
SERVER_STOP_SECONDS = 10.0


class BenchmarkError(Exception):
    """A failure that stops the whole comparison (missing tool, server that never starts)."""


# ---------------------------------------------------------------------------------------------
# Processes


_live_children = []


def stop_live_children():
    """Stops whatever is still running (after an error or Ctrl-C), so no server outlives us."""
    for child in list(_live_children):
        child.stop(timeout=2.0)


class Child:
    """A child process whose stdout and stderr go to files, reaped with os.wait4 for rusage."""

    def __init__(self, name, argv, directory):
        self.name = name
        self.argv = argv
        self.stdout_path = os.path.join(directory, name + ".stdout")
        self.stderr_path = os.path.join(directory, name + ".stderr")
        self.started = time.monotonic()
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        self.status = None
        self.rusage = None
        self.wall_seconds = None
        _live_children.append(self)

    @property
    def pid(self):
        return self.process.pid

    def poll(self):
        """Reaps the child if it has exited; returns True once it has."""
        if self.status is not None:
            return True
        pid, status, rusage = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return False
        self._reaped(status, rusage)
        return True

    def wait(self, timeout):
        """Waits up to `timeout` seconds; kills the child after that. Returns False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.poll():
                return True
            time.sleep(0.02)
        self.kill()
        return False

    def stop(self, timeout=SERVER_STOP_SECONDS):
        """SIGINT, then SIGTERM, then SIGKILL; always reaps. Returns how it ended."""
        for sig, share in ((signal.SIGINT, 0.6), (signal.SIGTERM, 0.4)):
            if self.poll():
                return "exited"
            os.kill(self.pid, sig)
            deadline = time.monotonic() + timeout * share
            while time.monotonic() < deadline:
                if self.poll():
                    return signal.Signals(sig).name
                time.sleep(0.02)
        self.kill()
        return "SIGKILL"

    def kill(self):
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            _, status, rusage = os.wait4(self.pid, 0)
            self._reaped(status, rusage)

    def _reaped(self, status, rusage):
        self.status = status
        self.rusage = rusage
        self.wall_seconds = time.monotonic() - self.started
        if self in _live_children:
            _live_children.remove(self)
        # Popen must not try to reap the pid again.
        self.process.returncode = os.waitstatus_to_exitcode(status)

    @property
    def exit_code(self):
        return None if self.status is None else os.waitstatus_to_exitcode(self.status)

    @property
    def cpu_seconds(self):
        return self.rusage.ru_utime + self.rusage.ru_stime

    @property
    def peak_rss_kib(self):
        return self.rusage.ru_maxrss  # kilobytes on Linux

    def stdout(self):
        with open(self.stdout_path, "r", errors="replace") as f:
            return f.read()

    def stderr(self):
        with open(self.stderr_path, "r", errors="replace") as f:
            return f.read()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_listener(child, port, timeout=SERVER_START_SECONDS):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.poll():
            raise BenchmarkError("%s exited during start-up (status %s):\n%s" % (child.name, child.exit_code, child.stderr()))
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    child.stop()
    raise BenchmarkError("%s did not listen on 127.0.0.1:%d within %.0f s" % (child.name, port, timeout))


def wait_for_port_line(child, timeout=SERVER_START_SECONDS):
    """Reads `PORT=N` from the first line of the child's stdout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(child.stdout_path, "r", errors="replace") as f:
            first = f.readline()
        if first.endswith("\n"):
            match = re.fullmatch(r"PORT=(\d+)\n", first)
            if not match:
                child.stop()
                raise BenchmarkError("%s: expected 'PORT=N' as the first stdout line, got %r" % (child.name, first))
            return int(match.group(1))
        if child.poll():
            raise BenchmarkError("%s exited during start-up (status %s):\n%s" % (child.name, child.exit_code, child.stderr()))
        time.sleep(0.05)
    child.stop()
    raise BenchmarkError("%s printed no PORT= line within %.0f s" % (child.name, timeout))


def run_command(argv, timeout=30):
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------------------------------
# Certificates and files


def make_certificates(directory):
    """A throw-away CA and a localhost certificate it signs (EC P-256, SAN localhost and 127.0.0.1)."""
    def openssl(*arguments):
        result = run_command(["openssl"] + list(arguments))
        if result.returncode != 0:
            raise BenchmarkError("openssl %s failed:\n%s" % (" ".join(arguments), result.stderr))

    path = lambda name: os.path.join(directory, name)
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path("ca.key"))
    openssl("req", "-x509", "-new", "-key", path("ca.key"), "-sha256", "-days", "2",
            "-subj", "/CN=pushcast benchmark CA", "-out", path("ca.pem"),
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path("server.key"))
    openssl("req", "-new", "-key", path("server.key"), "-subj", "/CN=localhost", "-out", path("server.csr"))
    with open(path("server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", path("server.csr"), "-CA", path("ca.pem"), "-CAkey", path("ca.key"),
            "-CAcreateserial", "-days", "2", "-sha256", "-extfile", path("server.ext"), "-out", path("server.pem"))
    return path("ca.pem"), path("server.key"), path("server.pem")


def make_docroot(directory):
    """nghttpd answers a POST to an existing file with 200 and the file, without storing the upload."""
    docroot = os.path.join(directory, "htdocs")
    os.makedirs(os.path.join(docroot, "3", "device"))
    with open(os.path.join(docroot, REQUEST_PATH.lstrip("/")), "w") as f:
        f.write("{}")
    return docroot


# ---------------------------------------------------------------------------------------------
# Output parsing

_DURATION_UNITS_US = {"us": 1.0, "ms": 1000.0, "s": 1_000_000.0}


def duration_us(text):
    """h2load's durations: '451us', '3.62ms', '1.05s' -> microseconds."""
    match = re.fullmatch(r"([0-9.]+)(us|ms|s)", text.strip())
    if not match:
        raise ValueError("not an h2load duration: %r" % text)
    return float(match.group(1)) * _DURATION_UNITS_US[match.group(2)]


def parse_h2load(output):
    """The numbers h2load prints at the end of a run. Raises ValueError when a line is missing."""
    result = {}
    finished = re.search(r"^finished in ([0-9.]+(?:us|ms|s)), ([0-9.]+) req/s", output, re.M)
    requests = re.search(r"^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                         r"(\d+) failed, (\d+) errored", output, re.M)
    if not finished or not requests:
        raise ValueError("no 'finished in' / 'requests:' summary in h2load output")
    result["seconds"] = duration_us(finished.group(1)) / 1e6
    result["requests_per_second"] = float(finished.group(2))
    keys = ("total", "started", "done", "succeeded", "failed", "errored")
    result.update({key: int(value) for key, value in zip(keys, requests.groups())})
    status = re.search(r"^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", output, re.M)
    if status:
        result["status_2xx"] = int(status.group(1))
    latency = re.search(r"^time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", output, re.M)
    if latency:
        result["latency_us"] = dict(zip(("min", "max", "mean", "sd"), map(duration_us, latency.groups())))
    return result


def parse_pushcast_json(output):
    """The one JSON object `pushcast bench --json` prints on stdout."""
    text = output.strip()
    try:
        return json.loads(text)
    except ValueError:
        for line in reversed(text.splitlines()):
            if line.startswith("{"):
                return json.loads(line)
        raise ValueError("no JSON object in pushcast bench output")


# ---------------------------------------------------------------------------------------------
# Runs


class Tools:
    def __init__(self, options):
        self.pushcast = None if options.skip_pushcast else os.path.abspath(options.pushcast)
        self.h2load = shutil.which("h2load")
        self.nghttpd = shutil.which("nghttpd")
        missing = [name for name, path in (("h2load (nghttp2-client)", self.h2load),
                                           ("nghttpd (nghttp2-server)", self.nghttpd),
                                           ("openssl", shutil.which("openssl"))) if not path]
        if missing:
            raise BenchmarkError("missing %s; run `make deps`" % ", ".join(missing))
        if self.pushcast is not None and not (os.path.isfile(self.pushcast) and os.access(self.pushcast, os.X_OK)):
            raise BenchmarkError("pushcast binary not found at %s; build it with `swift build -c release` "
                                 "(`make bench` does), pass --pushcast PATH, or use --skip-pushcast "
                                 "to compare only h2load and nghttpd" % self.pushcast)


def start_server(kind, tools, options, work, raw, run_name, certificates):
    ca_file, key_file, cert_file = certificates
    name = run_name + ".server"
    if kind == "nghttpd":
        port = free_port()
        argv = [tools.nghttpd, "-a", "127.0.0.1", "-d", make_docroot_once(work), "-m", "1000"]
        if options.nghttpd_workers:
            argv += ["-n", str(options.nghttpd_workers)]
        argv += [str(port), key_file, cert_file]
        child = Child(name, argv, raw)
        wait_for_listener(child, port)
        return child, port, ca_file
    mock_ca = os.path.join(work, run_name + "-mock-ca.pem")
    # --auth none: h2load sends no provider token; this row measures plain HTTP/2 serving.
    argv = [tools.pushcast, "mock", "--port", "0", "--write-ca", mock_ca, "--auth", "none"]
    if options.mock_workers:
        argv += ["--workers", str(options.mock_workers)]
    child = Child(name, argv, raw)
    port = wait_for_port_line(child)
    wait_for_listener(child, port)
    return child, port, mock_ca


_docroots = {}


def make_docroot_once(work):
    if work not in _docroots:
        _docroots[work] = make_docroot(work)
    return _docroots[work]


def client_argv(kind, tools, options, port, ca_file, body_file):
    url = "https://127.0.0.1:%d" % port
    if kind == "h2load":
        return [tools.h2load, "-n", str(options.requests), "-c", str(options.connections),
                "-m", str(options.streams), "-t", str(options.h2load_threads), "-d", body_file,
                "-H", "content-type: application/json", url + REQUEST_PATH]
    argv = [tools.pushcast, "bench", "--endpoint", url, "--path", REQUEST_PATH,
            "-n", str(options.requests), "-c", str(options.connections), "-m", str(options.streams),
            "--data", body_file, "--ca-file", ca_file, "--json",
            # Same number of client threads as h2load's -t, so CPU per request compares like for like.
            "--workers", str(options.h2load_threads)]
    if options.io:
        argv += ["--io", options.io]
    return argv


def run_pair(server_kind, client_kind, tools, options, work, raw, certificates, body_file, commands):
    run_name = "%s-%s" % (server_kind.replace(" ", "-"), client_kind)
    row = {"server": server_kind, "client": client_kind, "requests": options.requests}
    server, port, ca_file = start_server(server_kind, tools, options, work, raw, run_name, certificates)
    commands.append("# %s\n%s" % (run_name + " server", shlex.join(server.argv)))
    try:
        argv = client_argv(client_kind, tools, options, port, ca_file, body_file)
        commands.append("# %s\n%s" % (run_name + " client", shlex.join(argv)))
        client = Child(run_name + ".client", argv, raw)
        finished = client.wait(options.timeout)
    finally:
        row["server_stop"] = server.stop()
    row["server_cpu_s"] = server.cpu_seconds
    row["server_exit"] = server.exit_code
    row["client_wall_s"] = client.wall_seconds
    row["client_cpu_s"] = client.cpu_seconds
    row["client_user_s"] = client.rusage.ru_utime
    row["client_sys_s"] = client.rusage.ru_stime
    row["client_peak_rss_kib"] = client.peak_rss_kib
    row["client_exit"] = client.exit_code
    if not finished:
        row["error"] = "client timed out after %d s" % options.timeout
        return row
    try:
        if client_kind == "h2load":
            parsed = parse_h2load(client.stdout())
            row["succeeded"] = parsed["succeeded"]
            row["failed"] = parsed["total"] - parsed["succeeded"]
            row["requests_per_second"] = parsed["requests_per_second"]
            latency = parsed.get("latency_us", {})
            row["latency_mean_us"] = latency.get("mean")
            row["latency_max_us"] = latency.get("max")
        else:
            parsed = parse_pushcast_json(client.stdout())
            row["succeeded"] = parsed["succeeded"]
            row["failed"] = parsed["failed"]
            row["requests_per_second"] = parsed["requests_per_second"]
            latency = parsed.get("latency_us", {})
            row["latency_p50_us"] = latency.get("p50")
            row["latency_p99_us"] = latency.get("p99")
            row["latency_mean_us"] = latency.get("mean")
            row["latency_max_us"] = latency.get("max")
            row["pushcast_cpu_us_per_request"] = parsed.get("cpu_us_per_request")
            row["io"] = parsed.get("io")
        row["parsed"] = parsed
    except (ValueError, KeyError) as error:
        row["error"] = "could not read %s output (exit %s): %s" % (client_kind, client.exit_code, error)
        return row
    if client.exit_code != 0:
        row["error"] = "%s exited with %s" % (client_kind, client.exit_code)
    elif row["succeeded"] != options.requests:
        row["error"] = "%d of %d requests succeeded" % (row["succeeded"], options.requests)
    row["client_cpu_us_per_request"] = 1e6 * client.cpu_seconds / max(1, row["succeeded"])
    row["server_cpu_us_per_request"] = 1e6 * server.cpu_seconds / max(1, row["succeeded"])
    return row


# ---------------------------------------------------------------------------------------------
# Report


def fmt(value, digits=1):
    if value is None:
        return "n/a"
    if isinstance(value, int):
        return "{:,}".format(value)
    return "{:,.{}f}".format(value, digits)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return "n/a"
    return "%.2f" % (a / b)


def find(rows, server, client):
    for row in rows:
        if row["server"] == server and row["client"] == client and "error" not in row:
            return row
    return None


def markdown(rows, options, machine):
    lines = ["# pushcast vs h2load / nghttpd", "",
             "Machine: %s" % machine["cpu"], "Kernel: %s; %s" % (machine["kernel"], machine["cpus"]),
             "Tools: %s" % "; ".join(machine["versions"]), "",
             "Work per run: %d POST requests of %d bytes to `%s`, %d connections, %d streams per connection, "
             "TLS on 127.0.0.1. nghttpd serves a static file for the path, with `-m 1000`."
             % (options.requests, len(BODY), REQUEST_PATH, options.connections, options.streams), "",
             "## Clients", "",
             "| server | client | requests | succeeded | req/s | client CPU µs/req | server CPU µs/req | p50 µs | p99 µs | mean µs "
             "| client peak RSS KiB |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if "succeeded" not in row:
            lines.append("| %s | %s | %s | — | — | — | — | — | — | — | — |" % (row["server"], row["client"], fmt(row["requests"])))
            continue
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["server"], row["client"], fmt(row["requests"]), fmt(row["succeeded"]),
            fmt(row.get("requests_per_second"), 0), fmt(row.get("client_cpu_us_per_request"), 2),
            fmt(row.get("server_cpu_us_per_request"), 2),
            fmt(row.get("latency_p50_us"), 0), fmt(row.get("latency_p99_us"), 0),
            fmt(row.get("latency_mean_us"), 0), fmt(row.get("client_peak_rss_kib"))))
    lines += ["", "p50/p99 come from pushcast's histogram; h2load reports only min/max/mean/sd per request.",
              "Client CPU is user+sys time of the client process (wait4 rusage) divided by succeeded requests; server "
              "CPU the same for the server, beside it, so a row whose server needed as much CPU as its client shows it.", ""]

    has_pushcast = any(row["client"] == "pushcast" for row in rows)
    if has_pushcast:
        lines += ["### pushcast / h2load", "", "| server | CPU µs/req ratio | req/s ratio |", "|---|---:|---:|"]
        for server in ("nghttpd", "pushcast mock"):
            ours, theirs = find(rows, server, "pushcast"), find(rows, server, "h2load")
            lines.append("| %s | %s | %s |" % (
                server,
                ratio(ours and ours["client_cpu_us_per_request"], theirs and theirs["client_cpu_us_per_request"]),
                ratio(ours and ours["requests_per_second"], theirs and theirs["requests_per_second"])))
        lines += ["", "Below 1 means pushcast used less CPU per request; above 1 means more requests per second.", ""]

    lines += ["## Servers (h2load as the client)", "",
              "| server | req/s | server CPU µs/req | server stopped by |", "|---|---:|---:|---|"]
    for server in sorted({row["server"] for row in rows}, key=("nghttpd", "pushcast mock").index):
        row = find(rows, server, "h2load")
        if row:
            lines.append("| %s | %s | %s | %s |" % (server, fmt(row["requests_per_second"], 0),
                                                    fmt(row["server_cpu_us_per_request"], 2), row["server_stop"]))
        else:
            lines.append("| %s | — | — | — |" % server)
    mock, reference = find(rows, "pushcast mock", "h2load"), find(rows, "nghttpd", "h2load")
    lines.append("")
    if mock and reference:
        lines.append("pushcast mock / nghttpd, h2load as the client: req/s %s, server CPU µs/req %s "
                     "(nghttpd's CPU per request is %s× the mock's)." % (
                         ratio(mock.get("requests_per_second"), reference.get("requests_per_second")),
                         ratio(mock.get("server_cpu_us_per_request"), reference.get("server_cpu_us_per_request")),
                         ratio(reference.get("server_cpu_us_per_request"), mock.get("server_cpu_us_per_request"))))
    lines += ["Server CPU covers the server's whole life (start-up, the run, shutdown), from wait4 after SIGINT.", ""]

    errors = [row for row in rows if "error" in row]
    if errors:
        lines += ["## Failures", ""] + ["- %s <- %s: %s" % (r["server"], r["client"], r["error"]) for r in errors] + [""]
    return "\n".join(lines)


def machine_description(tools):
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = []
    for argv in ([tools.h2load, "--version"], [tools.nghttpd, "--version"], ["openssl", "version"]):
        try:
            versions.append(run_command(argv, timeout=10).stdout.strip().splitlines()[0])
        except (OSError, IndexError, subprocess.TimeoutExpired):
            pass
    return {"cpu": cpu, "kernel": platform.release(), "cpus": "%d CPUs" % (os.cpu_count() or 0),
            "versions": versions}


def parse_options(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--requests", type=int, default=200_000, help="requests per run (default 200000)")
    parser.add_argument("-c", "--connections", type=int, default=4, help="connections per client (default 4)")
    parser.add_argument("-m", "--streams", type=int, default=250, help="concurrent streams per connection (default 250)")
    parser.add_argument("--quick", action="store_true", help="N=20000 unless --requests is given")
    parser.add_argument("--pushcast", default=os.path.join(REPO_ROOT, ".build", "release", "pushcast"),
                        help="the pushcast binary (default .build/release/pushcast)")
    parser.add_argument("--skip-pushcast", action="store_true", help="only h2load against nghttpd")
    parser.add_argument("--io", choices=("uring", "epoll"), help="pass --io to pushcast bench")
    parser.add_argument("--h2load-threads", type=int, default=1, help="h2load -t (default 1)")
    parser.add_argument("--nghttpd-workers", type=int, help="nghttpd -n (default: nghttpd's own, 1)")
    parser.add_argument("--mock-workers", type=int, help="pass --workers to pushcast mock")
    parser.add_argument("--timeout", type=int, default=300, help="seconds allowed per client run (default 300)")
    parser.add_argument("--results-dir", default=os.path.join(REPO_ROOT, "Benchmarks", "results"),
                        help="where the <UTC timestamp>/ folder goes")
    options = parser.parse_args(argv)
    if options.quick and "-n" not in argv and not any(a.startswith("--requests") for a in argv):
        options.requests = 20_000
    for name in ("requests", "connections", "streams", "h2load_threads", "timeout"):
        if getattr(options, name) < 1:
            parser.error("--%s must be at least 1" % name.replace("_", "-"))
    return options


def main(argv):
    options = parse_options(argv)
    try:
        tools = Tools(options)
    except BenchmarkError as error:
        print("compare.py: %s" % error, file=sys.stderr)
        return 2
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results = os.path.join(options.results_dir, stamp)
    suffix = 1
    while os.path.exists(results):
        suffix += 1
        results = os.path.join(options.results_dir, "%s-%d" % (stamp, suffix))
    raw = os.path.join(results, "raw")
    os.makedirs(raw)
    work = tempfile.mkdtemp(prefix="pushcast-bench-")
    rows, commands = [], []
    try:
        certificates = make_certificates(work)
        body_file = os.path.join(work, "body.json")
        with open(body_file, "wb") as f:
            f.write(BODY)
        servers = ["nghttpd"] if tools.pushcast is None else ["nghttpd", "pushcast mock"]
        clients = ["h2load"] if tools.pushcast is None else ["h2load", "pushcast"]
        for server in servers:
            for client in clients:
                print("compare.py: %s <- %s, %d requests ..." % (server, client, options.requests), file=sys.stderr)
                rows.append(run_pair(server, client, tools, options, work, raw, certificates, body_file, commands))
    except BenchmarkError as error:
        print("compare.py: %s" % error, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("compare.py: interrupted", file=sys.stderr)
        return 130
    finally:
        stop_live_children()
        shutil.rmtree(work, ignore_errors=True)
    machine = machine_description(tools)
    table = markdown(rows, options, machine)
    with open(os.path.join(results, "commands.txt"), "w") as f:
        f.write("\n\n".join(commands) + "\n")
    with open(os.path.join(results, "results.json"), "w") as f:
        json.dump({"options": vars(options), "machine": machine, "runs": rows}, f, indent=2, default=str)
    with open(os.path.join(results, "table.md"), "w") as f:
        f.write(table)
    print(table)
    print("compare.py: raw outputs, commands and table in %s" % os.path.relpath(results), file=sys.stderr)
    return 1 if any("error" in row for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
