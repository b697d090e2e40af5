"""Reading a request body within its limits: a size cap, and a rate a body must keep up.

After a grace period a body must arrive at a minimum average rate (Kestrel's
MinRequestBodyDataRate rule): a client that trickles its body (slow loris) is refused
with 408 instead of holding a request open for ever.
"""

from __future__ import annotations

import asyncio

from starlette.types import Receive

BODY_GRACE_SECONDS = 5.0
BODY_MIN_BYTES_PER_SECOND = 1024


class BodyTooLarge(Exception):
    pass


class BodyTooSlow(Exception):
    pass


class ClientGone(ConnectionError):
    """The client closed its connection before its body was complete: there is nobody to
    answer (the access log says 499, access_log.py)."""


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    start = asyncio.get_running_loop().time()
    try:
        async with asyncio.timeout_at(start + BODY_GRACE_SECONDS) as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone("client went away")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
                deadline.reschedule(start + BODY_GRACE_SECONDS + size / BODY_MIN_BYTES_PER_SECOND)
    except TimeoutError:
        raise BodyTooSlow from None
