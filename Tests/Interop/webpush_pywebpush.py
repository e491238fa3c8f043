"""pywebpush (PyPI) as a Web Push sender against `pushcast mock --webpush`.

pywebpush's own `WebPusher` encrypts each message (RFC 8291 aes128gcm, through http_ece) and
builds its headers; py_vapid's `Vapid02.sign` makes the VAPID Authorization for the mock's origin.
pywebpush posts with `requests` (HTTP/1.1) and the mock speaks HTTP/2, so the prepared request
goes out with httpx over HTTP/2. The subscriptions are the mock's demo subscriptions: each key pair
and auth secret is derived here from the endpoint's path, as WebPushDemoSubscriptions documents
(HMAC-SHA-256 of a seed), with `cryptography`, independently of pushcast's code.

Endpoints: one in ten each of `gone`, `nf`, `slow`, `busy`, the rest `ok`. Results: one NDJSON
line per notification, {"token": endpoint, "status", "reason", "id": Location, "sha256": of the
payload sent}.
"""

import asyncio
import base64
import hashlib
import hmac
import json
import sys
import time

import httpx
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid02
from pywebpush import WebPusher

from interop_common import Results, arguments

KINDS = ["gone", "nf", "slow", "busy"]
ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def demo_keys(path, seed):
    """(p256dh, auth) of the demo subscription at `path`."""
    key = seed.encode()
    for attempt in range(16):
        scalar = hmac.new(key, b"pushcast webpush key\0" + path.encode() + bytes([0, attempt]), hashlib.sha256).digest()
        value = int.from_bytes(scalar, "big")
        if 0 < value < ORDER:
            break
    private = ec.derive_private_key(value, ec.SECP256R1())
    point = private.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    auth = hmac.new(key, b"pushcast webpush auth\0" + path.encode(), hashlib.sha256).digest()[:16]
    return b64(point), b64(auth)


async def main():
    args = arguments(__doc__, {"--origin": {"required": True, "help": "https://HOST:PORT of the mock's Web Push listener"},
                               "--seed": {"default": "pushcast-demo-webpush"}})
    vapid = Vapid02()
    vapid.generate_keys()
    authorization = vapid.sign({"aud": args.origin, "sub": "mailto:interop@example.com", "exp": int(time.time()) + 3600})["Authorization"]
    results = Results(args.out)
    semaphore = asyncio.Semaphore(50)
    async with httpx.AsyncClient(http2=True, timeout=60) as client:
        async def send(index):
            kind = KINDS[index % 10] if index % 10 < len(KINDS) else "ok"
            path = f"/{kind}{index}/pywebpush"
            p256dh, auth = demo_keys(path, args.seed)
            payload = json.dumps({"title": f"interop {index}", "n": index}).encode()
            prepared = WebPusher({"endpoint": args.origin + path, "keys": {"p256dh": p256dh, "auth": auth}})._prepare_send_data(
                payload, headers={"authorization": authorization}, ttl=60)
            async with semaphore:
                response = await client.post(prepared["endpoint"], headers=dict(prepared["headers"]), content=prepared["data"])
            if response.http_version != "HTTP/2":
                raise RuntimeError(f"answered over {response.http_version}")
            reason = response.json().get("reason") if response.content else None
            results.add(args.origin + path, response.status_code, reason, response.headers.get("location"),
                        sha256=hashlib.sha256(payload).hexdigest())

        await asyncio.gather(*(send(index) for index in range(args.count)))
    results.close("pywebpush+httpx")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
