"""What every interop driver shares: the notifications to send and the results file.

Each driver sends COUNT notifications through a client that nobody here wrote, to tokens whose
first four characters pick the mock's outcome (docs/USAGE.md: the mock): one in ten `dead`, `bad0`,
`5030` and `4290` each, the rest ordinary. It writes one NDJSON line per notification with what
the client reported; EndToEndTests/InteropClientTests compares those lines with the mock's request
log.
"""

import argparse
import json
import os
import time

PREFIXES = ["dead", "bad0", "5030", "4290"]
ORDINARY = "feed"


def tokens(count):
    """COUNT distinct tokens of 64 hex digits (an APNs token's shape; FCM takes it as well)."""
    out = []
    for index in range(count):
        prefix = PREFIXES[index % 10] if index % 10 < len(PREFIXES) else ORDINARY
        out.append(prefix + f"{index:060x}")
    return out


def arguments(description, extra=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--out", required=True, help="results, NDJSON, one line per notification")
    for name, kwargs in (extra or {}).items():
        parser.add_argument(name, **kwargs)
    return parser.parse_args()


# The APNs drivers' options: the key the mock generated (--write-apns-key), its ids, a topic.
APNS_OPTIONS = {
    "--key": {"required": True, "help": "the ES256 key (.p8) the mock generated"},
    "--key-id": {"required": True}, "--team-id": {"required": True},
    "--topic": {"default": "com.example.interop"},
}


def read_key(args):
    with open(args.key, encoding="utf-8") as handle:
        return handle.read()


def provider_token(args):
    """An APNs provider token (ES256 JWT, kid and iss as the mock expects), made with PyJWT."""
    import jwt  # PyJWT, installed with aioapns
    return jwt.encode({"iss": args.team_id, "iat": int(time.time())}, read_key(args), algorithm="ES256",
                      headers={"kid": args.key_id})


class Results:
    """The results file: {"token","status","reason","id"} per notification, as the client saw it."""

    def __init__(self, path):
        self.handle = open(path, "w", encoding="utf-8")
        os.chmod(path, 0o600)
        self.counts = {}

    def add(self, token, status, reason=None, notification_id=None, **extra):
        self.counts[status] = self.counts.get(status, 0) + 1
        self.handle.write(json.dumps({"token": token, "status": status, "reason": reason, "id": notification_id, **extra}) + "\n")

    def close(self, client):
        self.handle.close()
        print(f"{client}: " + ", ".join(f"{status}: {n}" for status, n in sorted(self.counts.items(), key=str)))
