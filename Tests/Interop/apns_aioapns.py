"""aioapns (PyPI), unmodified, with token auth, against `pushcast mock` playing api.push.apple.com.

aioapns has no host or port option and verifies Apple's host name: the harness points it at the
mock with SSL_CERT_FILE (the mock's CA) and a network namespace whose /etc/hosts names the mock's
address for api.push.apple.com, where the mock listens on port 443.
"""

import asyncio
import sys

from aioapns import APNs, NotificationRequest, PushType

from interop_common import APNS_OPTIONS, Results, arguments, read_key, tokens


async def ignore(request, result):
    """Failures are written to the results file, not logged one by one."""


async def main():
    args = arguments(__doc__, {**APNS_OPTIONS, "--sandbox": {"action": "store_true"}})
    client = APNs(key=read_key(args), key_id=args.key_id, team_id=args.team_id, topic=args.topic,
                  use_sandbox=args.sandbox, max_connections=1, max_connection_attempts=3, err_func=ignore)
    results = Results(args.out)
    semaphore = asyncio.Semaphore(200)

    async def send(token, index):
        request = NotificationRequest(device_token=token, message={"aps": {"alert": f"interop {index}"}},
                                      push_type=PushType.ALERT)
        async with semaphore:
            result = await asyncio.wait_for(client.send_notification(request), timeout=60)
        results.add(token, int(result.status), result.description, request.notification_id)

    # One connection, and one notification alone on it first. With token auth APNs, like the
    # mock, allows one stream per connection until a request with a valid token arrives, and
    # refuses a second one that comes before (RST_STREAM REFUSED_STREAM, RFC 9113 §8.7). aioapns
    # does not handle a refused stream: it logs "Unknown event", waits for its 10 s idle close and
    # retries, at most three times (then MaxAttemptsExceeded). Its pool opens connections mid-run
    # and sends a burst on each at once, so with four connections about 7 % of runs stalled 10 s
    # and about one in a hundred failed. Once authenticated, the connection takes 1,000 streams.
    everything = list(enumerate(tokens(args.count)))
    await send(everything[0][1], everything[0][0])
    await asyncio.gather(*(send(token, index) for index, token in everything[1:]))
    results.close("aioapns")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
