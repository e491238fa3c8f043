"""firebase-admin (PyPI), unmodified, against `pushcast mock --fcm` playing fcm.googleapis.com.

The SDK's HTTP/2 path (messaging.send_each_async, on httpx) sends; its credentials are the
service account the mock generated, whose token_uri is the mock's OAuth2 token endpoint. The
harness points it at the mock with SSL_CERT_FILE (the mock's CA) and PUSHCAST_CONNECT_TO
(resolve/sitecustomize.py) for fcm.googleapis.com.

One thing is set up from outside the SDK: google-auth fetches access tokens with `requests`,
which speaks HTTP/1.1 only, and the mock speaks HTTP/2 only. So the first token is fetched here,
by google-auth's own grant code (Credentials.refresh) over H2Request, google-auth's transport
interface implemented on httpx with HTTP/2; the SDK then uses that token until it expires (the
mock's default lifetime is an hour).
"""

import asyncio
import sys
import warnings

import firebase_admin
import google.auth.transport
import httpx
from firebase_admin import credentials, messaging

from interop_common import Results, arguments, tokens


class H2Response(google.auth.transport.Response):
    def __init__(self, response):
        self._response = response

    @property
    def status(self):
        return self._response.status_code

    @property
    def headers(self):
        return dict(self._response.headers)

    @property
    def data(self):
        return self._response.content


class H2Request(google.auth.transport.Request):
    """google-auth's transport interface over httpx with HTTP/2 (trusts SSL_CERT_FILE)."""

    def __init__(self):
        self._client = httpx.Client(http2=True, timeout=30)

    def __call__(self, url, method="GET", body=None, headers=None, timeout=None, **kwargs):
        response = self._client.request(method, url, content=body, headers=headers, timeout=timeout or 30)
        if response.http_version != "HTTP/2":
            raise RuntimeError(f"the token endpoint answered over {response.http_version}, not HTTP/2")
        return H2Response(response)


def outcome(response):
    """(status, reason) as the SDK reports a send: 200 and the message name, or the HTTP status
    and the SDK's error class with its code (UnregisteredError, QuotaExceededError, …)."""
    if response.success:
        return 200, response.message_id
    error = response.exception
    http = getattr(error, "http_response", None)
    status = http.status_code if http is not None else 0
    return status, f"{type(error).__name__}:{getattr(error, 'code', '')}"


async def main():
    # The mock's FCM (like the v1 API it plays) takes a message's `token`; this SDK calls it deprecated.
    warnings.filterwarnings("ignore", message="Message.token is deprecated")
    args = arguments(__doc__, {"--credentials": {"required": True}, "--batch": {"type": int, "default": 500, "help": "messages per send_each_async call (at most 500)"}})
    certificate = credentials.Certificate(args.credentials)
    certificate.get_credential().refresh(H2Request())
    results = Results(args.out)
    every = tokens(args.count)
    for start in range(0, len(every), args.batch):
        # An app (so an HTTP/2 connection) per batch: firebase-admin 7.7.0's retry transport
        # does not close a 503 response it retries, so each retried 503 keeps one of the
        # connection's stream slots (httpx allows 100) until the client closes; one connection
        # for all 200 `5030` tokens would hang (docs/USAGE.md: pointing any client at the mock).
        app = firebase_admin.initialize_app(certificate, name=f"batch-{start}")
        batch = every[start:start + args.batch]
        messages = [messaging.Message(token=token, data={"index": str(start + offset)},
                                      notification=messaging.Notification(title="interop", body=str(start + offset)))
                    for offset, token in enumerate(batch)]
        answer = await messaging.send_each_async(messages, app=app)
        for token, response in zip(batch, answer.responses):
            status, reason = outcome(response)
            results.add(token, status, reason)
    results.close("firebase-admin")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
