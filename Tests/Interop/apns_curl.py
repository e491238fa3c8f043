"""curl (Debian's, HTTP/2 over nghttp2) as an APNs client against `pushcast mock`.

One curl process sends every notification over HTTP/2, 100 at a time multiplexed (--parallel),
each transfer with its own provider-token header, topic and push type. curl reaches the mock through its own
--connect-to option and trusts only the mock's CA (--cacert), verifying the real host name.
"""

import json
import os
import subprocess
import sys

from interop_common import APNS_OPTIONS, Results, arguments, provider_token, tokens


def quoted(text):
    return json.dumps(text)  # a double-quoted string with \" and \\ escapes, as curl's config reads


def main():
    args = arguments(__doc__, {
        **APNS_OPTIONS, "--connect-to": {"required": True}, "--cacert": {"required": True},
        "--config": {"required": True, "help": "where to write curl's config file (0600: it holds the provider token)"},
        "--per-process": {"type": int, "default": 0, "help": "transfers per curl process (0: all in one)"},
        "--parallel": {"type": int, "default": 100, "help": "transfers at once, multiplexed (0: one after the other)"},
    })
    bearer = provider_token(args)
    every = tokens(args.count)
    blocks = []
    for index, token in enumerate(every):
        blocks.append("\n".join([
            f"url = {quoted('https://api.push.apple.com/3/device/' + token)}",
            f"connect-to = {quoted(args.connect_to)}",
            f"cacert = {quoted(args.cacert)}",
            "http2", "silent", "show-error",
            f"header = {quoted('authorization: bearer ' + bearer)}",
            f"header = {quoted('apns-topic: ' + args.topic)}",
            f"header = {quoted('apns-push-type: alert')}",
            f"data = {quoted(json.dumps({'aps': {'alert': f'interop {index}'}}))}",
            'output = "/dev/null"',
            f"write-out = {quoted('%{http_code} %{http_version} %{url}' + chr(92) + 'n')}",
        ]))
    # One curl process per `--per-process` transfers (0: one for all). One for all is the check
    # that curl keeps its connection: curl resets its streams, and with nghttp2's default
    # rapid-reset guard the mock used to end the connection after ~1,035 requests.
    per_process = args.per_process or len(blocks)
    stdout, stderr, codes = [], [], []
    for start in range(0, len(blocks), per_process):
        with open(os.open(args.config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as handle:
            handle.write("\nnext\n".join(blocks[start:start + per_process]) + "\n")
        parallel = ["--parallel", "--parallel-max", str(args.parallel)] if args.parallel > 0 else []
        run = subprocess.run(["curl", *parallel, "--config", args.config], capture_output=True, text=True, timeout=300, check=False)
        stdout.append(run.stdout)
        stderr.append(run.stderr)
        codes.append(run.returncode)
    results = Results(args.out)
    seen = 0
    for line in "".join(stdout).splitlines():
        status, version, url = line.split(" ", 2)
        if version != "2" and status != "000":
            raise SystemExit(f"curl used HTTP/{version}, not HTTP/2: {line}")
        results.add(url.rsplit("/", 1)[1], int(status))
        seen += 1
    results.close("curl")
    if any(codes) or seen != len(every):
        sys.stderr.write(f"curl exited {codes} after {seen} of {len(every)} transfers: {''.join(stderr)[-2000:]}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
