"""A Web Push service that nobody here wrote the crypto of: it decrypts with PyPI's http-ece and
checks VAPID with py-vapid, so a pushcast that agrees with it agrees with independent code.

Two modes:

    webpush_service.py make --dir DIR --count N --origin https://push-a.test:PORT --origin ...
        writes DIR/subscriptions.csv (endpoint, p256dh, auth, name), DIR/keys.json (each
        subscription's private key and auth secret), DIR/vapid.txt (an application server key
        as the web-push tool prints it: the raw scalar, base64url) and a throw-away CA and
        server certificate
        (DIR/ca.pem, DIR/server.pem, DIR/server.key) whose names cover every origin's host.

    webpush_service.py serve --dir DIR --h2-port P --h1-port Q --log FILE
        serves the origin on P over HTTP/2 only (ALPN h2) and the one on Q over HTTP/1.1 only
        (ALPN http/1.1, keep-alive), both TLS. Every POST is VAPID-checked (signature with
        py_vapid.jwt.decode, `aud` equal to the origin it arrived on, `exp` at most 24 h ahead,
        `sub` a mailto: or https: contact) and decrypted with http_ece (aes128gcm); the answer
        follows the endpoint's kind, the path's first letters:
          ok   201 Created with a Location header
          gone 410, nf 404, big 413,
          slow 429 with Retry-After: 1 the first time, then 201,
          busy 503 the first time, then 201.
        A bad VAPID header gets 403, an undecryptable body 400. One NDJSON line per request goes
        to --log: endpoint, origin, protocol, status, the decrypted payload, the VAPID claims.

EndToEndTests/WebPushInteropTests drives it.
"""

import argparse
import asyncio
import base64
import datetime
import json
import os
import ssl
import sys
import time

import h11
import h2.config
import h2.connection
import h2.events
import http_ece
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from py_vapid import jwt as vapid_jwt

KINDS = ["ok", "gone", "nf", "big", "slow", "busy"]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def kind_of(index, plain=False):
    """Half the subscriptions are plain (all of them with `plain`); the rest cycle through the
    other kinds."""
    return "ok" if plain or index % 2 == 0 else KINDS[1 + (index // 2) % (len(KINDS) - 1)]


# --- make -----------------------------------------------------------------------------------

def make(args):
    os.makedirs(args.dir, exist_ok=True)
    keys = {}
    with open(os.path.join(args.dir, "subscriptions.csv"), "w", encoding="utf-8") as out:
        out.write("endpoint,p256dh,auth,name\n")
        for index in range(args.count):
            origin = args.origin[index % len(args.origin)]
            endpoint = f"{origin}/{kind_of(index // len(args.origin), args.plain)}{index:06d}/x"
            private = ec.generate_private_key(ec.SECP256R1())
            public = private.public_key().public_bytes(serialization.Encoding.X962,
                                                       serialization.PublicFormat.UncompressedPoint)
            auth = os.urandom(16)
            value = private.private_numbers().private_value.to_bytes(32, "big")
            keys[endpoint] = {"private": b64url(value), "auth": b64url(auth)}
            out.write(f"{endpoint},{b64url(public)},{b64url(auth)},n{index}\n")
    with open(os.path.join(args.dir, "keys.json"), "w", encoding="utf-8") as out:
        json.dump(keys, out)
    vapid = ec.generate_private_key(ec.SECP256R1()).private_numbers().private_value.to_bytes(32, "big")
    with open(os.path.join(args.dir, "vapid.txt"), "w", encoding="utf-8") as out:
        out.write(b64url(vapid) + "\n")
    hosts = sorted({origin.split("//", 1)[1].rsplit(":", 1)[0] for origin in args.origin})
    certificates(args.dir, hosts)


def certificates(directory, hosts):
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webpush interop CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in hosts]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    with open(os.path.join(directory, "ca.pem"), "wb") as out:
        out.write(ca.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(directory, "server.pem"), "wb") as out:
        out.write(leaf.public_bytes(serialization.Encoding.PEM))
    with open(os.path.join(directory, "server.key"), "wb") as out:
        out.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))


# --- the push service's rules ----------------------------------------------------------------

class Service:
    def __init__(self, directory, log_path):
        with open(os.path.join(directory, "keys.json"), encoding="utf-8") as handle:
            self.keys = json.load(handle)
        self.log = open(log_path, "a", encoding="utf-8", buffering=1)
        self.seen = {}

    def vapid(self, header, origin):
        """The claims of a valid VAPID header for `origin` (RFC 8292), or raises ValueError."""
        if not header.lower().startswith("vapid "):
            raise ValueError("not a vapid authorization")
        params = {}
        for part in header[6:].split(","):
            name, _, value = part.strip().partition("=")
            params[name.strip()] = value.strip()
        if "t" not in params or "k" not in params:
            raise ValueError("t or k missing")
        claims = vapid_jwt.decode(params["t"], params["k"])  # raises on a bad signature
        if claims.get("aud") != origin:
            raise ValueError(f"aud {claims.get('aud')!r} is not {origin!r}")
        exp = int(claims.get("exp", 0))
        if exp <= time.time() or exp > time.time() + 24 * 3600 + 60:
            raise ValueError(f"exp {exp} is past or more than 24 h ahead")
        sub = str(claims.get("sub", ""))
        if not (sub.startswith("mailto:") or sub.startswith("https:")):
            raise ValueError(f"sub {sub!r} is not a mailto: or https: contact")
        return claims

    def answer(self, origin, protocol, path, headers, body):
        """(status, extra headers) for one request, after logging it."""
        endpoint = origin + path
        entry = {"endpoint": endpoint, "origin": origin, "protocol": protocol}
        try:
            entry["claims"] = self.vapid(headers.get("authorization", ""), origin)
        except Exception as error:  # noqa: BLE001 - any failure is a refused credential
            return self.finish(entry, 403, [], f"vapid: {error}")
        key = self.keys.get(endpoint)
        if key is None:
            return self.finish(entry, 404, [], "no such subscription")
        if headers.get("content-encoding", "") != "aes128gcm" or "ttl" not in headers:
            return self.finish(entry, 400, [], "Content-Encoding aes128gcm and TTL are required")
        try:
            private = ec.derive_private_key(int.from_bytes(unb64url(key["private"]), "big"), ec.SECP256R1())
            entry["payload"] = http_ece.decrypt(body, private_key=private, auth_secret=unb64url(key["auth"]),
                                                version="aes128gcm").decode("utf-8")
        except Exception as error:  # noqa: BLE001
            return self.finish(entry, 400, [], f"decrypt: {error}")
        kind = path.lstrip("/")[:4].rstrip("0123456789")
        count = self.seen[endpoint] = self.seen.get(endpoint, 0) + 1
        status = {"gone": 410, "nf": 404, "big": 413}.get(kind, 201)
        if kind in ("slow", "busy") and count == 1:
            status = 429 if kind == "slow" else 503
        extra = [("retry-after", "1")] if status == 429 else []
        if status == 201:
            extra = [("location", f"{origin}/m/{len(self.seen)}-{count}")]
        return self.finish(entry, status, extra, None)

    def finish(self, entry, status, extra, error):
        entry["status"] = status
        if error:
            entry["error"] = error
        self.log.write(json.dumps(entry) + "\n")
        return status, extra


# --- HTTP/2 -----------------------------------------------------------------------------------

async def serve_h2(service, origin, reader, writer):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    writer.write(conn.data_to_send())
    streams = {}
    while True:
        data = await reader.read(65536)
        if not data:
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                streams[event.stream_id] = (dict(event.headers), bytearray())
            elif isinstance(event, h2.events.DataReceived):
                streams[event.stream_id][1].extend(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                headers, body = streams.pop(event.stream_id)
                status, extra = service.answer(origin, "h2", headers.get(":path", ""), headers, bytes(body))
                conn.send_headers(event.stream_id, [(":status", str(status)), ("content-length", "0")] + extra,
                                  end_stream=True)
        writer.write(conn.data_to_send())
        await writer.drain()
    writer.close()


# --- HTTP/1.1 ---------------------------------------------------------------------------------

async def serve_h1(service, origin, reader, writer):
    conn = h11.Connection(h11.SERVER)
    request, body = None, bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            conn.receive_data(data)
            if not data:
                break
            continue
        if isinstance(event, h11.Request):
            request, body = event, bytearray()
        elif isinstance(event, h11.Data):
            body.extend(event.data)
        elif isinstance(event, h11.EndOfMessage):
            headers = {name.decode().lower(): value.decode() for name, value in request.headers}
            status, extra = service.answer(origin, "http/1.1", request.target.decode(), headers, bytes(body))
            response = h11.Response(status_code=status, headers=[("content-length", "0")] + extra)
            writer.write(conn.send(response) + conn.send(h11.EndOfMessage()))
            await writer.drain()
            conn.start_next_cycle()
        elif isinstance(event, (h11.ConnectionClosed,)) or event is h11.PAUSED:
            break
    writer.close()


def context(directory, protocol):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(directory, "server.pem"), os.path.join(directory, "server.key"))
    ctx.set_alpn_protocols([protocol])
    return ctx


async def serve(args):
    service = Service(args.dir, args.log)
    h2_server = await asyncio.start_server(lambda r, w: serve_h2(service, args.h2_origin, r, w), "127.0.0.1", args.h2_port,
                                           ssl=context(args.dir, "h2"))
    h1_server = await asyncio.start_server(lambda r, w: serve_h1(service, args.h1_origin, r, w), "127.0.0.1", args.h1_port,
                                           ssl=context(args.dir, "http/1.1"))
    print("READY", flush=True)
    async with h2_server, h1_server:
        await asyncio.gather(h2_server.serve_forever(), h1_server.serve_forever())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    modes = parser.add_subparsers(dest="mode", required=True)
    made = modes.add_parser("make")
    made.add_argument("--dir", required=True)
    made.add_argument("--count", type=int, default=5000)
    made.add_argument("--origin", action="append", required=True)
    made.add_argument("--plain", action="store_true", help="every subscription ordinary (201): for benchmarks")
    served = modes.add_parser("serve")
    served.add_argument("--dir", required=True)
    served.add_argument("--h2-port", type=int, required=True)
    served.add_argument("--h2-origin", required=True)
    served.add_argument("--h1-port", type=int, required=True)
    served.add_argument("--h1-origin", required=True)
    served.add_argument("--log", required=True)
    args = parser.parse_args()
    if args.mode == "make":
        make(args)
    else:
        asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
