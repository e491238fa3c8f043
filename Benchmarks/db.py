#!/usr/bin/env python3
"""Database input and prune-apply benchmarks, in one run on this machine.

For each database (SQLite file, PostgreSQL and MariaDB servers started here in temporary
directories on loopback, stopped afterwards):

1. A push_devices table (the seed schema, token indexed) filled with ROWS rows.
2. `pushcast snapshot --from URL --query ...` for the first 100,000 rows and for all ROWS rows:
   the client's CPU (user + sys from wait4's rusage), rows per second of client CPU, wall time,
   peak RSS, and the database's own CPU over the same run (PostgreSQL: the postmaster's reaped
   children, i.e. the backend; MariaDB: mariadbd; SQLite runs inside the client).
3. `pushcast prune-apply` of PRUNES prune lines (every 10th row's token) against the table:
   --dry-run first (its statement plan is printed), then the apply and a second apply (which
   must change nothing); wall time of each.

Raw outputs, the exact commands and a markdown table go to Benchmarks/results/db-<UTC time>/.
Python 3 standard library only.
"""

import argparse
import datetime
import os
import pwd
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
TICKS = os.sysconf("SC_CLK_TCK")
QUERY = "SELECT id AS device_id, token, platform, app_version FROM push_devices WHERE is_active AND id <= {rows}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, env=None, stdin=None, check=True, timeout=1800):
    result = subprocess.run(args, env=env, stdin=stdin, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"{shlex.join(args)} exited {result.returncode}: {result.stdout}{result.stderr}")
    return result


def process_cpu(pid, children=False):
    """utime + stime (and the reaped children's, when asked) of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total = int(fields[11]) + int(fields[12])
    if children:
        total += int(fields[13]) + int(fields[14])
    return total / TICKS


def make_csv(path, rows):
    """The table's rows as CSV (no header): every 3rd row iOS, the rest Android."""
    with open(path, "w") as f:
        for i in range(1, rows + 1):
            if i % 3 == 0:
                token = f"{i:064x}"
                platform = "ios"
            else:
                token = "f" + f"{i:012d}" + ":APA91b" + "x" * 140
                platform = "android"
            f.write(f"{i},{i // 2},{platform},{token},1.{i % 10}.0,1,2025-12-01 08:00:00,2025-06-01 00:00:00,2026-01-01 00:00:00\n")


SCHEMAS = {
    "sqlite": """CREATE TABLE push_devices (id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, platform TEXT NOT NULL,
        token TEXT NOT NULL, app_version TEXT, is_active BOOLEAN NOT NULL DEFAULT TRUE, last_seen_at TEXT NULL,
        created_at TEXT NOT NULL, updated_at TEXT NOT NULL, pruned_at TEXT NULL);""",
    "postgres": """CREATE TABLE push_devices (id BIGINT PRIMARY KEY, user_id BIGINT NOT NULL, platform VARCHAR(16) NOT NULL,
        token TEXT NOT NULL, app_version VARCHAR(32), is_active BOOLEAN NOT NULL DEFAULT TRUE, last_seen_at TIMESTAMP NULL,
        created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL, pruned_at TIMESTAMP NULL);""",
    "mysql": """CREATE TABLE push_devices (id BIGINT PRIMARY KEY AUTO_INCREMENT, user_id BIGINT NOT NULL, platform VARCHAR(16) NOT NULL,
        token TEXT NOT NULL, app_version VARCHAR(32), is_active BOOLEAN NOT NULL DEFAULT TRUE, last_seen_at DATETIME NULL,
        created_at DATETIME NOT NULL, updated_at DATETIME NOT NULL, pruned_at DATETIME NULL);""",
}
INDEX = {"sqlite": "CREATE INDEX token_index ON push_devices (token);",
         "postgres": "CREATE INDEX token_index ON push_devices (token); ANALYZE push_devices;",
         "mysql": "CREATE INDEX token_index ON push_devices (token(255)); ANALYZE TABLE push_devices;"}


class SQLite:
    kind = "sqlite"
    server_pid = None

    def __init__(self, directory):
        self.path = os.path.join(directory, "push.db")
        self.url = "sqlite:" + self.path
        self.env = dict(os.environ)

    def load(self, csv):
        script = f"{SCHEMAS['sqlite']}\n.mode csv\n.import {csv} push_devices\n{INDEX['sqlite']}\n"
        subprocess.run(["sqlite3", "-batch", "-bail", self.path], input=script, text=True, check=True, capture_output=True)

    def db_cpu(self):
        return 0.0

    def stop(self):
        pass


class Postgres:
    kind = "postgres"

    def __init__(self, directory):
        self.directory = directory
        self.port = free_port()
        self.password = "bench-pw"
        self.url = f"postgres://pushcast@127.0.0.1:{self.port}/push"
        self.env = dict(os.environ, PGPASSWORD=self.password)
        versions = sorted(int(v) for v in os.listdir("/usr/lib/postgresql") if v.isdigit())
        self.bin = f"/usr/lib/postgresql/{versions[-1]}/bin"
        as_pg = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--"]
        with open(os.path.join(directory, "pw"), "w") as f:
            f.write(self.password)
        run(["chown", "-R", "postgres:postgres", directory])
        data = os.path.join(directory, "data")
        run(as_pg + [self.bin + "/initdb", "-D", data, "-U", "pushcast", "--pwfile=" + directory + "/pw",
                     "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
        self.log = open(os.path.join(directory, "server.log"), "w")
        self.process = subprocess.Popen(as_pg + [self.bin + "/postgres", "-D", data, "-p", str(self.port), "-k", directory,
                                                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                                                 "-c", "shared_buffers=512MB", "-c", "max_wal_size=4GB",
                                                 "-c", "autovacuum=off"],
                                        stdout=self.log, stderr=self.log)
        self.server_pid = self.process.pid
        for _ in range(300):
            if self.psql("SELECT 1", "postgres", check=False).returncode == 0:
                break
            time.sleep(0.1)
        self.psql("CREATE DATABASE push", "postgres")

    def psql(self, sql, database="push", check=True):
        return subprocess.run([self.bin + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(self.port),
                               "-U", "pushcast", "-d", database], input=sql, text=True, env=self.env, capture_output=True, check=check)

    def load(self, csv):
        self.psql(SCHEMAS["postgres"] + f"\n\\copy push_devices (id, user_id, platform, token, app_version, is_active, last_seen_at, "
                  f"created_at, updated_at) FROM '{csv}' WITH (FORMAT csv)\n" + INDEX["postgres"])

    def db_cpu(self):
        # The backend that served the client has exited and been reaped by the postmaster.
        return process_cpu(self.server_pid, children=True)

    def stop(self):
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=60)


class MariaDB:
    kind = "mysql"

    def __init__(self, directory):
        self.directory = directory
        self.port = free_port()
        self.password = "bench-pw"
        self.url = f"mysql://pushcast@127.0.0.1:{self.port}/push"
        self.env = dict(os.environ, MYSQL_PWD=self.password)
        self.socket = os.path.join(directory, "mysqld.sock")
        data = os.path.join(directory, "data")
        run(["mariadb-install-db", "--no-defaults", "--datadir=" + data, "--user=root", "--skip-test-db", "--skip-name-resolve"])
        self.log = open(os.path.join(directory, "server.log"), "w")
        self.process = subprocess.Popen(["mariadbd", "--no-defaults", "--datadir=" + data, "--user=root", f"--port={self.port}",
                                         "--bind-address=127.0.0.1", "--socket=" + self.socket, "--skip-name-resolve",
                                         "--innodb-buffer-pool-size=1G", "--innodb-flush-log-at-trx-commit=0", "--local-infile=1",
                                         "--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin"],
                                        stdout=self.log, stderr=self.log)
        self.server_pid = self.process.pid
        for _ in range(300):
            if self.sql("SELECT 1", None, check=False).returncode == 0:
                break
            time.sleep(0.1)
        self.sql("CREATE DATABASE push; CREATE USER 'pushcast'@'127.0.0.1' IDENTIFIED BY 'bench-pw'; "
                 "GRANT ALL ON push.* TO 'pushcast'@'127.0.0.1';", None)

    def sql(self, text, database="push", check=True):
        return subprocess.run(["mariadb", "--no-defaults", "-S", self.socket, "-u", "root", "--batch", "--skip-column-names",
                               "--local-infile=1"] + ([database] if database else []),
                              input=text, text=True, capture_output=True, check=check)

    def load(self, csv):
        self.sql(SCHEMAS["mysql"] + f"\nLOAD DATA LOCAL INFILE '{csv}' INTO TABLE push_devices FIELDS TERMINATED BY ',' "
                 "(id, user_id, platform, token, app_version, is_active, last_seen_at, created_at, updated_at);\n" + INDEX["mysql"])

    def db_cpu(self):
        return process_cpu(self.server_pid)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


def rusage_of(args):
    """`db.py --rusage-of CMD…`: runs CMD and prints its exit code, CPU and peak RSS last. A child
    of this small fresh process, not of the benchmark's big one: Linux carries a parent's peak RSS
    into a forked child's ru_maxrss across exec, which would hide the command's own."""
    pid = os.fork()
    if pid == 0:
        os.execvp(args[0], args)
    _, status, usage = os.wait4(pid, 0)
    sys.stdout.flush()
    print(f"RUSAGE {os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime} {usage.ru_maxrss}")
    return 0


def timed(args, env, db, out_dir, name):
    """Runs a pushcast command; returns wall, client CPU, peak RSS (MiB), DB CPU, and its output."""
    db_before = db.db_cpu()
    started = time.monotonic()
    with open(os.path.join(out_dir, name + ".out"), "w") as out:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--rusage-of"] + args, env=env, stdout=out, stderr=subprocess.STDOUT)
    wall = time.monotonic() - started
    time.sleep(0.2)  # the postmaster reaps the backend
    db_after = db.db_cpu()
    with open(os.path.join(out_dir, name + ".out")) as f:
        output, _, last = f.read().rstrip("\n").rpartition("\n")
    code, cpu, rss = last.split()[1:]
    if int(code) != 0:
        raise RuntimeError(f"{shlex.join(args)} failed: {output}")
    with open(os.path.join(out_dir, "commands.txt"), "a") as f:
        f.write(shlex.join(args) + "\n")
    return {"wall": wall, "cpu": float(cpu), "rss": int(rss) / 1024, "db": db_after - db_before,
            "output": output}


def bench_database(db, pushcast, rows, prunes, out_dir, work, batch):
    measured = {}
    for count in sorted({min(100_000, rows), rows}):
        snapshot = os.path.join(work, f"{db.kind}-{count}.csv")
        measured[count] = timed([pushcast, "snapshot", "--from", db.url, "--query", QUERY.format(rows=count), "--out", snapshot],
                                db.env, db, out_dir, f"{db.kind}-snapshot-{count}")
        os.unlink(snapshot)
    prune_file = os.path.join(work, f"{db.kind}-prune.csv")
    with open(prune_file, "w") as f:
        f.write("token,provider,reason,unregistered_at,id\n")
        step = max(1, rows // prunes)
        for i in range(step, rows + 1, step)[:prunes]:
            token = f"{i:064x}" if i % 3 == 0 else "f" + f"{i:012d}" + ":APA91b" + "x" * 140
            f.write(f"{token},{'apns' if i % 3 == 0 else 'fcm'},Unregistered,{'2026-11-30T10:00:00.000Z' if i % 3 == 0 else ''},{i}\n")
    apply = [pushcast, "prune-apply", prune_file, "--to", db.url, "--table", "push_devices", "--token-column", "token",
             "--set", "is_active = false", "--set", "pruned_at = {unregistered_at}", "--updated-column", "updated_at",
             "--since", "2026-12-01T00:00:00Z"] + (["--batch", str(batch)] if batch else [])
    dry = timed(apply + ["--dry-run"], db.env, db, out_dir, f"{db.kind}-prune-dry-run")
    first = timed(apply, db.env, db, out_dir, f"{db.kind}-prune-apply")
    second = timed(apply, db.env, db, out_dir, f"{db.kind}-prune-apply-again")
    changed = re.search(r"rows changed:\s+(\d+)", first["output"])
    again = re.search(r"rows changed:\s+(\d+)", second["output"])
    return measured, dry, first, second, int(changed.group(1)) if changed else None, int(again.group(1)) if again else None


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--rusage-of":
        return rusage_of(sys.argv[2:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pushcast", default=os.path.join(REPO_ROOT, ".build/release/pushcast"))
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--prunes", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=None, help="prune-apply --batch")
    parser.add_argument("--databases", default="sqlite,postgres,mysql")
    parser.add_argument("--results-dir", default=None)
    options = parser.parse_args()
    if not os.access(options.pushcast, os.X_OK):
        sys.exit(f"db.py: no pushcast binary at {options.pushcast}: run `swift build -c release`")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = options.results_dir or os.path.join(REPO_ROOT, "Benchmarks", "results", "db-" + stamp)
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="pushcast-dbbench-", dir="/tmp")
    os.chmod(work, 0o755)
    csv = os.path.join(work, "rows.csv")
    make_csv(csv, options.rows)
    os.chmod(csv, 0o644)
    lines = ["| database | rows | client CPU s | rows/s of client CPU | wall s | database CPU s | peak RSS MiB |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    prune_lines = ["| database | prune lines | dry run s | apply s | rows changed | again s | changed again |",
                   "|---|---:|---:|---:|---:|---:|---:|"]
    plans = []
    try:
        for kind in options.databases.split(","):
            directory = tempfile.mkdtemp(prefix=f"pushcast-dbbench-{kind}-", dir="/tmp")
            os.chmod(directory, 0o755)
            db = {"sqlite": SQLite, "postgres": Postgres, "mysql": MariaDB}[kind](directory)
            try:
                started = time.monotonic()
                db.load(csv)
                time.sleep(2.0)  # the loading session's backend exits and is reaped before anything is measured
                print(f"{kind}: {options.rows} rows loaded in {time.monotonic() - started:.1f} s", file=sys.stderr)
                measured, dry, first, second, changed, again = bench_database(db, options.pushcast, options.rows, options.prunes, out_dir, work,
                                                                              options.batch)
            finally:
                db.stop()
                shutil.rmtree(directory, ignore_errors=True)
            for count, m in sorted(measured.items()):
                db_cpu = "in the client" if kind == "sqlite" else f"{m['db']:.2f}"
                lines.append(f"| {kind} | {count:,} | {m['cpu']:.2f} | {count / m['cpu']:,.0f} | {m['wall']:.2f} | {db_cpu} | {m['rss']:.1f} |")
            prune_lines.append(f"| {kind} | {options.prunes:,} | {dry['wall']:.2f} | {first['wall']:.2f} | {changed} | {second['wall']:.2f} | {again} |")
            marker = "plan (first batch loaded):"
            plan = dry["output"].split(marker, 1)[1].split("prune-apply:", 1)[0] if marker in dry["output"] else ""
            plans.append(f"{kind}:\n{plan.rstrip()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = "\n".join(lines) + "\n\n" + "\n".join(prune_lines) + "\n\nplans:\n" + "\n\n".join(plans) + "\n"
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(report)
    print(report)
    print(f"results: {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
