"""httpx with h2 (PyPI), as an APNs client written directly on it, against `pushcast mock`.

The provider token is an ES256 JWT made with PyJWT from the key the mock generated; requests go
out over one HTTP/2 connection, up to 100 at a time, to https://api.push.apple.com (the harness
resolves it to the mock and trusts the mock's CA through SSL_CERT_FILE).
"""

import asyncio
import sys
import uuid

import httpx

from interop_common import APNS_OPTIONS, Results, arguments, provider_token, tokens


async def main():
    args = arguments(__doc__, {**APNS_OPTIONS, "--host": {"default": "api.push.apple.com"}})
    bearer = provider_token(args)
    results = Results(args.out)
    semaphore = asyncio.Semaphore(100)
    async with httpx.AsyncClient(http2=True, timeout=60) as client:
        async def send(token, index):
            notification_id = str(uuid.uuid4())
            headers = {"authorization": f"bearer {bearer}", "apns-topic": args.topic, "apns-push-type": "alert",
                       "apns-id": notification_id}
            async with semaphore:
                response = await client.post(f"https://{args.host}/3/device/{token}", headers=headers,
                                             json={"aps": {"alert": f"interop {index}"}})
            if response.http_version != "HTTP/2":
                raise RuntimeError(f"answered over {response.http_version}")
            reason = response.json().get("reason") if response.content else None
            results.add(token, response.status_code, reason, response.headers.get("apns-id"))

        every = tokens(args.count)
        # APNs (and the mock) allow one stream on a new connection until a request with a good
        # provider token; httpx 0.28 starts streams before it sees that setting and then fails
        # ("Max outbound streams is 1"), so the first notification goes alone.
        await send(every[0], 0)
        await asyncio.gather(*(send(token, index) for index, token in enumerate(every) if index > 0))
    results.close("httpx+h2")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
