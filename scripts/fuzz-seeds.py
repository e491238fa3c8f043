#!/usr/bin/env python3
"""Writes the seed inputs of every fuzz target into Tests/Fuzz/Corpus/<target>/seed-*.

Seeds are realistic inputs (data/demo, the response bodies the unit tests use, HTTP/2 frames a
server sends) with each body's settings byte in front (Sources/PushcastFuzzing says what the
first byte means per target). `make fuzz-seed` runs it; `make fuzz-merge` then keeps the corpus
minimal. Re-running it rewrites the seed files only.
"""
import gzip
import os
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Tests", "Fuzz", "Corpus")


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "seed-" + name), "wb") as f:
        f.write(data)


def demo(name):
    with open(os.path.join(ROOT, "data", "demo", name), "rb") as f:
        return f.read()


CSV = [
    b"token,first_name,locale\n" + b"a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90,Ana,pt-BR\n" * 2,
    b"\xef\xbb\xbftoken,first_name\r\n\"0f0f\",\"Zo\xc3\xab \"\"Z\"\"\"\r\n\r\n1234,\"multi\nline\"\r\n",
    b"token,name\nabc,\"unterminated\nxyz,bad\"quote\nok,\"x\"y\n\xff\xfe,1\n",
    b"token\n" + b"t" * 60 + b"\nshort\n,,,\n",
]
NDJSON = [
    b'{"token":"a1b2c3","first_name":"Ana","locale":"pt-BR"}\n{"token":"d4e5f6","first_name":null,"n":3}\n',
    b'\xef\xbb\xbf{"token":"x\\u00e9\\ud83d\\ude00","tags":["a",{"b":1}],"ok":true}\r\n\n{"token":"y"}',
    b'{"token":"a"}\n{"token":\n[1,2]\n{"token":"b","token":"c"}\n{"bad":"\\x"}\n',
    b'{"a":1,"b":2,"c":3,"d":4}\n{"e":"' + b"z" * 50 + b'"}\n',
]
JSON = [
    demo("payload.json"),
    demo("fcm-message.json"),
    b'{"a":[1,-2.5e10,true,false,null,{"b":"\\u00e9\\ud83d\\ude00\\n"}],"c":{}}',
    b'[' * 70 + b']' * 70,
    b'{"reason":"BadDeviceToken"} x',
    b'"\xed\xa0\x80" 1e 01 {"a" 1}',
]
TEMPLATE = [
    b"\x01" + demo("payload.json") + b"\x00Ana\x00pt-BR\x00u-1\x00tok",
    b"\x05" + demo("fcm-message.json") + b"\x00Zo\xc3\xab \"q\" \\\x00\xe2\x80\xa8\x00\x01\x1f\x00\xff",
    b"\x00" + b'{"aps":{"alert":"{{ title }} {{body}}"},"k":["{{name}}",{"x":"{{token}}"}]}' + b"\x00a\x00b",
    b"\x02" + b'{"{{title}}":"x","y":"{{unknown}}","z":"{{","w":"{{}}"}',
    b"\x04" + b'{"notification":{"title":"{{title}}"},"data":{"from":"x","k":"{{body}}"},"token":"t"}\x00v',
]
APNS = [
    b"\x01" + b'{"reason":"BadDeviceToken"}',
    b"\x06" + b'{"reason":"Unregistered","timestamp":1700000000000}',
    b"\x06" + b'{"timestamp":"1700000000123.5","reason":"Unregistered"}',
    b"\x08" + b'{"reason":"TooManyProviderTokenUpdates"}',
    b"\x0a" + b'{"reason":"Shutdown","extra":{"nested":[1,2]},"reason":"Other"}',
    b"\x03" + b'{"reason":"\\u0042adTopic\\ud83d\\ude00"',
]
FCM_ERROR = b'{"error":{"code":%d,"message":"%s","status":"%s","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"%s"},{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"bad"}]}]}}'
FCM = [
    b"\x00\x00\n" + b'{"name":"projects/p/messages/0:1500415314455276%31bd1c9631bd1c96"}',
    b"\x01\x00\n" + FCM_ERROR % (400, b"The registration token is not a valid FCM registration token", b"INVALID_ARGUMENT", b"INVALID_ARGUMENT"),
    b"\x04\x00\n" + FCM_ERROR % (404, b"Requested entity was not found.", b"NOT_FOUND", b"UNREGISTERED"),
    b"\x08\x0030\n" + FCM_ERROR % (429, b"Quota exceeded", b"RESOURCE_EXHAUSTED", b"QUOTA_EXCEEDED"),
    b"\x0a\x01Sun, 06 Nov 2033 08:49:37 GMT\n" + FCM_ERROR % (503, b"Unavailable\\n\\u0001", b"UNAVAILABLE", b"UNAVAILABLE"),
    b"\x02\x00\n" + b'{"error":{"code":401,"status":"UNAUTHENTICATED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"THIRD_PARTY_AUTH_ERROR"}]}}',
]
OAUTH = [
    b"\x00" + b'{"access_token":"ya29.c.b0Aaekm1K-fuzz","expires_in":3599,"token_type":"Bearer"}',
    b"\x03" + b'{"error":"invalid_grant","error_description":"Invalid JWT Signature."}',
    b"\x05" + b'{"error":"unauthorized_client","error_description":"Client is unauthorized to retrieve access tokens using this method."}',
    b"\x00" + b'{"access_token":"t","expires_in":1e3,"token_type":"mac","x":[{"y":null}]}',
    b"\x00" + b"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=eyJhbGciOiJSUzI1NiJ9.e30.c2ln",
]


# HTTP/2 frames (RFC 9113 §4.1) and HPACK without Huffman coding (RFC 7541).
def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(name, value):
    # Literal header field without indexing, new name (RFC 7541 §6.2.2).
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


DATA, HEADERS, RST, SETTINGS, PING, GOAWAY, WINDOW, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 1, 4, 1
OK = b"\x88"  # :status 200 (static table index 8)
S400, S500 = b"\x8c", b"\x8e"
APNS_ID = literal(b"apns-id", b"8f8b4c2e-0d6f-4b9e-9a51-2c3f4e5d6a7b")
BODY = b'{"reason":"BadDeviceToken"}'
HTTP2 = [
    b"\x07" + frame(HEADERS, END_HEADERS | END_STREAM, 1, OK + APNS_ID) + frame(HEADERS, END_HEADERS, 3, S400 + APNS_ID)
    + frame(DATA, END_STREAM, 3, BODY) + frame(HEADERS, END_HEADERS | END_STREAM, 5, OK + APNS_ID),
    b"\x00" + frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 1)) + frame(PING, 0, 0, b"12345678")
    + frame(WINDOW, 0, 0, struct.pack(">I", 65535)) + frame(HEADERS, END_HEADERS, 1, S500) + frame(DATA, 0, 1, b'{"reason":')
    + frame(DATA, END_STREAM, 1, b'"InternalServerError"}'),
    b"\x0b" + frame(GOAWAY, 0, 0, struct.pack(">II", 1, 0) + b"shutting down") + frame(HEADERS, END_HEADERS | END_STREAM, 1, OK),
    b"\x16" + frame(RST, 0, 3, struct.pack(">I", 7)) + frame(HEADERS, 0, 5, OK) + frame(CONTINUATION, END_HEADERS, 5, APNS_ID)
    + frame(DATA, 0x08 | END_STREAM, 5, b"\x02" + b"{}" + b"\x00\x00") + frame(PING, ACK, 0, b"\x00" * 8),
    b"\x24" + frame(SETTINGS, 0, 0, struct.pack(">HIHI", 4, 0, 5, 16384)) + frame(HEADERS, END_HEADERS | END_STREAM, 7, OK)
    + frame(GOAWAY, 0, 0, struct.pack(">II", 5, 2)),
]


# HTTP/1.1 answers (RFC 9112); the settings byte: bits 0-2 piece size, 0x08 small limits,
# 0x10 pipelined, 0x20 first request HEAD, 0x40 clean end, 0x80 clock past every deadline.
def answer(status, body=b"", headers=()):
    return (b"HTTP/1.1 %d Reason\r\n" % status + b"".join(h + b"\r\n" for h in headers)
            + b"Content-Length: %d\r\n\r\n" % len(body) + body)


CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
           + b"5;name=value\r\n{\"a\":\r\n003 ; x=\"q\"\r\n1}\n\r\n0;last\r\nExpires: never\r\n\r\n")
HTTP1 = [
    b"\x00" + answer(200, b"ok") + answer(201) + answer(410, BODY, [b"Apns-Id: 8f8b4c2e", b"content-type: application/json"]),
    b"\x13" + CHUNKED + answer(204) + answer(429, b"", [b"Retry-After: 30"]),
    b"\x41" + b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\n" + answer(201, b"created"),
    b"\x12" + answer(200, b"a", [b"Connection: keep-alive, close"]) + b"HTTP/1.1 200 OK\r\n",
    b"\x42" + b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbody to the close",
    b"\x04" + b"HTTP/1.1 410 Gone\r\nContent-Length: 100\r\n\r\n" + BODY,
    b"\x35" + b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + answer(304) + answer(500, b"e"),
    b"\x01" + b"HTTP/1.1 200 OK\r\nX-A: 1\r\n  folded\r\nContent-Length: 0\r\n\r\n",
    b"\x16" + b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    b"\x0b" + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
    b"\x1a" + b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 20) for i in range(6)) + b"\r\n",
    b"\x03" + b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    b"\x50" + b"HTTP/1.1 200\nContent-Length: 2\n\nokHTTP/1.1 202\nTransfer-Encoding: chunked\n\n2\nab\n0\n\n" + answer(200),
    b"\x90" + answer(200, b"first") + b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\npart",
    b"\x07" + answer(200) + answer(200),
    b"\x1c" + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * 6 + b"0\r\n\r\n",
]


# Compressed exports: gzip members from Python's gzip module (mtime 0, so the bytes are stable),
# zstd frames from the zstd tool (scripts/deps.sh installs it).
def gz(data):
    return gzip.compress(data, mtime=0)


def zst(data):
    return subprocess.run(["zstd", "-q", "-c", "-3"], input=data, stdout=subprocess.PIPE, check=True).stdout


def skippable(payload):
    return b"\x50\x2a\x4d\x18" + struct.pack("<I", len(payload)) + payload


def flipped(data, index):
    return data[:index] + bytes([data[index] ^ 0xFF]) + data[index + 1:]


DECOMPRESS = [
    b"\x00" + gz(CSV[0]),
    b"\x01" + zst(CSV[1]),
    b"\x02" + gz(CSV[0])[:40],                                          # truncated gzip
    b"\x00" + zst(CSV[0])[:-3],                                         # truncated zstd
    b"\x03" + gz(CSV[0]) + gz(b"") + gz(CSV[3]),                        # multi-member gzip
    b"\x07" + skippable(b"pzstd") + zst(CSV[0]) + zst(CSV[2]),          # skippable frame, two frames
    b"\x00" + CSV[0],                                                   # plain
    b"\x08" + flipped(gz(CSV[2]), len(gz(CSV[2])) - 6),                 # gzip with a bad CRC
    b"\x04" + zst(b"token\n" + b"0" * 65536),                          # 64 KiB from a few bytes
    b"\x05" + gz(b"token\n" + b"a" * (1 << 20)),                        # 1 MiB: past the body's cap
]

for target, seeds in [("csv", [b"\x00" + s for s in CSV] + [b"\x08" + CSV[0], b"\x01" + CSV[1]]),
                      ("ndjson", [b"\x00" + s for s in NDJSON] + [b"\x08" + NDJSON[0], b"\x02" + NDJSON[1]]),
                      ("json-scanner", JSON), ("template", TEMPLATE), ("apns-response", APNS),
                      ("fcm-response", FCM), ("oauth-response", OAUTH), ("http2-client", HTTP2), ("http1-client", HTTP1),
                      ("decompress", DECOMPRESS)]:
    for index, seed in enumerate(seeds):
        write(target, "%02d" % index, seed)
print("seeds written under", os.path.relpath(CORPUS, ROOT), file=sys.stderr)
