#!/usr/bin/env python3
"""Checks docs/deploy/kubernetes the way a cluster would use it, without a cluster.

1. Every manifest validates against the Kubernetes 1.33 schemas that kubernetes-validate bundles
   (offline, strict: an unknown field is an error).
2. The Indexed Job keeps the rules docs/deploy/README.md promises: completionMode Indexed,
   completions = parallelism = the N of `--shard auto/N`, backoffLimitPerIndex, a podFailurePolicy
   that ignores disruptions, podReplacementPolicy Failed, restartPolicy Never,
   terminationGracePeriodSeconds above --drain-timeout, --resume.
3. The container's command line, read from job.yaml (never copied), runs here once per index with
   JOB_COMPLETION_INDEX set as the Job controller sets it, all indexes at once (parallelism), against
   one `pushcast mock --fcm`. Volumes become folders: the PVC an empty folder, the ConfigMap's and
   the Secret's items files (the Secret's values are the mock's keys), `$(VAR)` references expand
   from the container's env as the kubelet expands them. One index is stopped with SIGTERM part way
   and run again with the same command line, as a replacement pod would be.
4. The merge Job's command line, read from merge-job.yaml, then reports every row exactly once
   (exit 0), and the mock's log shows no token delivered twice.

Usage: kubernetes_job.py --pushcast PATH [--rows N]. Exit 0: passed; 1: failed.
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from kubernetes_validate import utils as kubernetes_validate

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "docs" / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.33.0"


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


def load_manifests():
    documents = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document:
                documents.append((path.name, document))
    check(documents, f"no manifests in {MANIFESTS}")
    return documents


def validate(documents):
    check(KUBERNETES_VERSION in kubernetes_validate.all_versions(),
          f"kubernetes-validate {kubernetes_validate.__name__} has no {KUBERNETES_VERSION} schemas: "
          f"it has {kubernetes_validate.all_versions()[-3:]}")
    for name, document in documents:
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except Exception as error:  # ValidationError and SchemaNotFoundError alike
            raise Failure(f"{name}: {document.get('kind')} {document.get('metadata', {}).get('name')} "
                          f"does not validate against Kubernetes {KUBERNETES_VERSION}: {str(error).splitlines()[0]}")
        print(f"valid ({KUBERNETES_VERSION}, strict): {name} {document['kind']}/{document['metadata']['name']}")


def find(documents, kind, predicate=lambda d: True):
    found = [d for _, d in documents if d.get("kind") == kind and predicate(d)]
    check(len(found) == 1, f"expected one {kind}, found {len(found)}")
    return found[0]


def option(args, name):
    check(name in args, f"the command line has no {name}: {args}")
    return args[args.index(name) + 1]


def seconds(duration):
    match = re.fullmatch(r"(\d+)(ms|s|m|h)?", duration)
    check(match, f"cannot read the duration {duration!r}")
    value, unit = int(match.group(1)), match.group(2) or "s"
    return value * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]


def check_send_job(job):
    """The Indexed Job's failure and shard rules; returns its container and the shard count."""
    spec = job["spec"]
    pod = spec["template"]["spec"]
    check(spec.get("completionMode") == "Indexed", "the send Job is not completionMode: Indexed")
    check(spec.get("completions") == spec.get("parallelism"), "completions and parallelism differ")
    check(isinstance(spec.get("backoffLimitPerIndex"), int), "no backoffLimitPerIndex")
    check(spec.get("podReplacementPolicy") == "Failed", "podReplacementPolicy is not Failed")
    check(pod.get("restartPolicy") == "Never", "restartPolicy must be Never (backoffLimitPerIndex and podFailurePolicy need it)")
    rules = spec.get("podFailurePolicy", {}).get("rules", [])
    check(any(rule.get("action") == "Ignore" and any(c.get("type") == "DisruptionTarget" for c in rule.get("onPodConditions", []))
              for rule in rules), "the podFailurePolicy does not ignore DisruptionTarget")
    (container,) = pod["containers"]
    args = container.get("args", [])
    check(args[:1] == ["send"], f"the container does not run `pushcast send`: {args[:2]}")
    check("--resume" in args, "the send command line has no --resume: a replacement pod would refuse to go on")
    shard = option(args, "--shard")
    match = re.fullmatch(r"auto/(\d+)", shard)
    check(match, f"--shard {shard}: expected auto/N (the index comes from JOB_COMPLETION_INDEX)")
    shards = int(match.group(1))
    check(shards == spec["completions"], f"--shard auto/{shards} but completions is {spec['completions']}")
    drain = seconds(option(args, "--drain-timeout"))
    grace = pod.get("terminationGracePeriodSeconds", 30)
    check(grace > drain, f"terminationGracePeriodSeconds {grace} is not above --drain-timeout {drain:g} s")
    for name in ("--results", "--prune", "--summary", "--metrics-file"):
        check("{shard}" in option(args, name), f"{name} has no {{shard}}: the shards would share one file")
    print(f"send Job: Indexed, {shards} completions = parallelism, backoffLimitPerIndex {spec['backoffLimitPerIndex']}, "
          f"DisruptionTarget ignored, podReplacementPolicy Failed, grace {grace} s > drain {drain:g} s")
    return container, shards


class Mock:
    """A `pushcast mock --fcm` child that logs every request."""

    def __init__(self, binary, directory):
        self.log = directory / "mock.log"
        self.ca = directory / "ca.pem"
        self.keys = directory / "mock-keys"
        self.keys.mkdir()
        self.process = subprocess.Popen(
            [binary, "mock", "--port", "0", "--workers", "2", "--write-ca", str(self.ca), "--log", str(self.log),
             "--write-apns-key", str(self.keys), "--fcm", "--write-fcm-credentials", str(self.keys), "--duration", "300s"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
        self.fields = {}
        while not all(k in self.fields for k in ("PORT", "APNS_KEY_ID", "FCM_ENDPOINT")):
            line = self.process.stdout.readline()
            check(line, f"the mock exited before announcing itself: {self.fields}")
            for pair in line.split():
                key, _, value = pair.partition("=")
                self.fields[key] = value

    def flags(self):
        return ["--apns-endpoint", f"https://127.0.0.1:{self.fields['PORT']}", "--fcm-endpoint", self.fields["FCM_ENDPOINT"],
                "--ca-file", str(self.ca)]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def deliveries(self):
        counts = {}
        for line in self.log.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("status") == 200 and "token" in entry and entry.get("path", "/3/").startswith(("/3/", "/v1/")):
                key = (entry["provider"], entry["token"])
                counts[key] = counts.get(key, 0) + 1
        return counts


def write_tokens(path, rows, seed=12):
    """A mixed export: iOS and Android rows, some dead tokens, some duplicates."""
    generator = random.Random(seed)
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
    lines = ["device_id,token,platform,first_name"]
    earlier = {"ios": [], "android": []}
    for i in range(rows):
        platform = "ios" if i % 2 == 0 else "android"
        if platform == "ios":
            token = "%02x" % generator.randrange(0x40) + "".join("%02x" % generator.randrange(256) for _ in range(31))
        else:
            token = "f" + "".join(generator.choice(alphabet) for _ in range(21)) + ":APA91b" + "".join(generator.choice(alphabet) for _ in range(134))
        if i % 97 == 5:
            token = "dead" + token[4:]
        elif i % 89 == 7 and earlier[platform]:
            token = generator.choice(earlier[platform])
        elif len(earlier[platform]) < 200:
            earlier[platform].append(token)
        lines.append(f"d{i + 1},{token},{platform},Name {i}")
    path.write_text("\n".join(lines) + "\n")


class Pod:
    """What the kubelet would give the container: its volumes as folders, its env, its argv."""

    def __init__(self, root, job_or_pod_spec, documents, secret_values, binary):
        self.root = root
        pod = job_or_pod_spec["spec"]["template"]["spec"]
        (self.container,) = pod["containers"]
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        self.mounts = {}
        for mount in self.container.get("volumeMounts", []):
            volume = volumes[mount["name"]]
            if "persistentVolumeClaim" in volume:
                folder = root / "pvc" / volume["persistentVolumeClaim"]["claimName"]
            elif "configMap" in volume:
                name = volume["configMap"]["name"]
                data = find(documents, "ConfigMap", lambda d: d["metadata"]["name"] == name)["data"]
                folder = self.project(root / "configmap" / name, volume["configMap"], data)
            elif "secret" in volume:
                name = volume["secret"]["secretName"]
                declared = find(documents, "Secret", lambda d: d["metadata"]["name"] == name)
                keys = set(declared.get("stringData", {})) | set(declared.get("data", {}))
                for item in volume["secret"].get("items", []):
                    check(item["key"] in keys, f"the Secret {name} declares no key {item['key']}")
                folder = self.project(root / "secret" / name, volume["secret"], secret_values)
            elif "emptyDir" in volume:
                folder = root / "emptydir" / volume["name"]
            else:
                raise Failure(f"volume {volume['name']}: a kind this test cannot stand in for")
            folder.mkdir(parents=True, exist_ok=True)
            self.mounts[mount["mountPath"]] = folder
        self.env = {}
        for variable in self.container.get("env", []):
            source = variable.get("valueFrom", {})
            if "value" in variable:
                self.env[variable["name"]] = variable["value"]
            elif "secretKeyRef" in source:
                check(source["secretKeyRef"]["key"] in secret_values, f"no secret value for {source['secretKeyRef']['key']}")
                self.env[variable["name"]] = secret_values[source["secretKeyRef"]["key"]]
            elif "configMapKeyRef" in source:
                reference = source["configMapKeyRef"]
                data = find(documents, "ConfigMap", lambda d: d["metadata"]["name"] == reference["name"])["data"]
                self.env[variable["name"]] = data[reference["key"]]
            else:
                raise Failure(f"env {variable['name']}: a source this test cannot stand in for")
        self.binary = binary

    @staticmethod
    def project(folder, source, values):
        folder.mkdir(parents=True, exist_ok=True)
        items = source.get("items") or [{"key": k, "path": k} for k in values]
        for item in items:
            (folder / item["path"]).write_text(values[item["key"]])
        return folder

    def local_path(self, text):
        for mount_path in sorted(self.mounts, key=len, reverse=True):
            if text == mount_path or text.startswith(mount_path + "/"):
                return str(self.mounts[mount_path]) + text[len(mount_path):]
        return text

    def expand(self, text):
        # The kubelet's $(VAR) expansion; $$ escapes a literal $.
        return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                      lambda m: "$" if m.group(0) == "$$" else self.env.get(m.group(1), m.group(0)), text)

    def argv(self):
        command = self.container.get("command", [])
        check(command and command[0].endswith("/pushcast") or command == ["pushcast"], f"unexpected command {command}")
        return [self.binary] + [self.local_path(self.expand(a)) for a in command[1:] + self.container.get("args", [])]

    def environment(self, index=None):
        environment = dict(os.environ)
        environment.update(self.env)
        tmp = self.mounts.get("/tmp")
        if tmp:
            environment["TMPDIR"] = str(tmp)
        if index is not None:
            environment["JOB_COMPLETION_INDEX"] = str(index)
        for stray in ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT"):
            environment.pop(stray, None)
        return environment


def results_by_row(path):
    by_row = {}
    for line in Path(path).read_text().splitlines():
        entry = json.loads(line)
        check(entry["row"] not in by_row, f"row {entry['row']} has two lines in {path}")
        by_row[entry["row"]] = entry
    return by_row


def run_job(binary, documents, send_job, shards, rows):
    merge_job = find(documents, "Job", lambda d: d["metadata"]["name"] != send_job["metadata"]["name"])
    merge_args = merge_job["spec"]["template"]["spec"]["containers"][0]["args"]
    check(merge_args[:1] == ["merge"], "the second Job does not run `pushcast merge`")
    check(option(merge_args, "--shards") == str(shards), f"merge --shards {option(merge_args, '--shards')} but the send Job has {shards}")
    with tempfile.TemporaryDirectory(prefix="pushcast-k8s-") as scratch:
        root = Path(scratch)
        mock = Mock(binary, root)
        try:
            secret_values = {
                "apns-key.p8": (mock.keys / "apns-key.p8").read_text(),
                "fcm-service-account.json": (mock.keys / "fcm-service-account.json").read_text(),
                "apns-key-id": mock.fields["APNS_KEY_ID"],
                "apns-team-id": mock.fields["APNS_TEAM_ID"],
            }
            pod = Pod(root, send_job, documents, secret_values, binary)
            argv = pod.argv() + mock.flags()
            input_path = Path(argv[2])
            write_tokens(input_path, rows)
            Path(pod.local_path(option(pod.container["args"], "--results"))).parent.mkdir(parents=True, exist_ok=True)
            print("pod command (index from JOB_COMPLETION_INDEX):", " ".join(argv))

            started = time.monotonic()
            # Index 0 is evicted part way (SIGTERM, as the kubelet sends it) and replaced.
            children = {i: subprocess.Popen(argv, env=pod.environment(i), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                        for i in range(shards)}
            time.sleep(0.7)
            children[0].send_signal(signal.SIGTERM)
            statuses = {}
            for index, child in children.items():
                output, _ = child.communicate(timeout=300)
                statuses[index] = child.returncode
                if child.returncode not in (0, 3):
                    print(output)
            check(statuses[0] in (0, 3), f"index 0 after SIGTERM exited {statuses[0]} (expected 3, or 0 if it had finished)")
            check(all(statuses[i] == 0 for i in range(1, shards)), f"exit statuses per index: {statuses}")
            replacement = subprocess.run(argv, env=pod.environment(0), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
            check(replacement.returncode == 0, f"the replacement pod of index 0 exited {replacement.returncode}: {replacement.stderr}")
            print(f"{shards} indexes sent {rows} rows in {time.monotonic() - started:.1f} s "
                  f"(index 0: SIGTERM, exit {statuses[0]}, then its replacement: exit 0)")

            merge_pod = Pod(root, merge_job, documents, secret_values, binary)
            merge = subprocess.run(merge_pod.argv(), env=merge_pod.environment(), stdin=subprocess.DEVNULL,
                                   capture_output=True, text=True, timeout=300)
            check(merge.returncode == 0, f"pushcast merge exited {merge.returncode}: {merge.stdout}{merge.stderr}")
            merged = results_by_row(merge_pod.local_path(option(merge_args, "--results")))
            check(sorted(merged) == list(range(1, rows + 1)), f"merged results: {len(merged)} rows, expected 1..{rows}")
        finally:
            mock.stop()
        deliveries = mock.deliveries()
        twice = [key for key, count in deliveries.items() if count > 1]
        check(not twice, f"{len(twice)} tokens delivered twice, e.g. {twice[:3]}")
        delivered = sum(1 for entry in merged.values() if entry["outcome"] == "delivered")
        check(delivered == len(deliveries), f"{delivered} rows delivered in the results, {len(deliveries)} tokens answered 200 by the mock")
        outcomes = {}
        for entry in merged.values():
            outcomes[entry["outcome"]] = outcomes.get(entry["outcome"], 0) + 1
        print(f"merge: exit 0, {len(merged)} rows exactly once {dict(sorted(outcomes.items()))}; mock: {delivered} deliveries, none twice")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushcast", required=True)
    parser.add_argument("--rows", type=int, default=20000)
    arguments = parser.parse_args()
    try:
        documents = load_manifests()
        validate(documents)
        send_job = find(documents, "Job", lambda d: d["spec"].get("completionMode") == "Indexed")
        _, shards = check_send_job(send_job)
        run_job(arguments.pushcast, documents, send_job, shards, arguments.rows)
    except Failure as failure:
        print(f"FAIL: {failure}")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
