"""Reading a request body within its limits: a size cap, and a rate a body must keep up;
and which bodies are read at all.

After a grace period a body must arrive at a minimum average rate (Kestrel's
MinRequestBodyDataRate rule): a client that trickles its body (slow loris) is refused
with 408 instead of holding a request open for ever.

A body is JSON in UTF-8, uncompressed: `Content-Type: application/json` (any case, RFC
9110 8.3.1), with no charset or UTF-8's, and no `Content-Encoding` but `identity`. Anything
else is refused with 415 before it is read, as GraphQL over HTTP's reference server does:
read as UTF-8 JSON regardless, an ISO-8859-1 body was stored as other text than the client
sent, and a gzip body was "not JSON".
"""

from __future__ import annotations

import asyncio
import functools

from cross_web import parse_content_type
from starlette.types import Message, Receive

JSON_MEDIA_TYPE = "application/json"
_UTF8 = frozenset({"utf-8", "utf8"})
_NO_CODING = frozenset({"", "identity"})

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
    while True:
        deadline = start + BODY_GRACE_SECONDS + size / BODY_MIN_BYTES_PER_SECOND
        message = await _received_by(receive, deadline)
        if message["type"] == "http.disconnect":
            raise ClientGone("client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _received_by(receive: Receive, deadline: float) -> Message:
    """The next message, if it has arrived by `deadline` (the event loop's clock)."""
    try:
        async with asyncio.timeout_at(deadline):
            return await receive()
    except TimeoutError:
        pass
    # An event loop that stalled past the deadline (a long statement on it, a starved
    # process) runs the read that delivered the data and the deadline's expiry in one pass,
    # and the expiry cancels the reader before it resumes: what had arrived must still count,
    # or an honest client gets a 408 for the server's stall. A cancelled receive leaves the
    # data where it was; this look takes it if it is there, and waits no longer.
    try:
        async with asyncio.timeout(0):
            return await receive()
    except TimeoutError:
        raise BodyTooSlow from None


@functools.lru_cache(maxsize=256)  # a client sends the same two headers with every request
def unsupported_body(content_type: str | None, content_encoding: str | None) -> str | None:
    """Why a body of this Content-Type and Content-Encoding is not read (415), or None."""
    media_type, params = parse_content_type(content_type or "")
    if media_type != JSON_MEDIA_TYPE:
        shown = f" {media_type!r}" if media_type else ""
        return f"Unsupported content type{shown}: send the request as {JSON_MEDIA_TYPE}"
    charset = params.get("charset")
    if charset is not None and charset.strip().lower() not in _UTF8:
        return f"Unsupported charset {charset!r}: send the request body in UTF-8"
    coding = (content_encoding or "").strip().lower()
    if coding not in _NO_CODING:
        return (
            f"Unsupported Content-Encoding {content_encoding!r}: send the request body uncompressed"
        )
    return None
