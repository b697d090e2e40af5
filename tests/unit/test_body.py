"""Reading a request body within its time: a client whose body arrived is never told 408.

The body must arrive within a grace period, then at a minimum rate. The deadline is an
event-loop timer, so when the loop stalls past it (a long statement on the loop, a starved
process), the read that delivers the body and the timer's expiry run in one pass, and the
expiry cancels the reader before it takes what arrived. The receive below behaves as
uvicorn's HTTP protocols do: data lands in a buffer and sets an event; a receive waits for
the event and takes the buffer; a cancelled receive leaves both as they were.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from graph.server import body
from graph.server.body import BodyTooSlow, read_body

GRACE = 0.05
BODY = b'{"query": "{ viewer { ownerKey } }"}'


class Client:
    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.buffer = b""
        self.more = True

    def deliver(self, chunk: bytes, *, more: bool = False) -> None:
        self.buffer += chunk
        self.more = more
        self.event.set()

    async def receive(self) -> dict[str, Any]:
        await self.event.wait()
        self.event.clear()
        message = {"type": "http.request", "body": self.buffer, "more_body": self.more}
        self.buffer = b""
        return message


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(body, "BODY_GRACE_SECONDS", GRACE)


async def test_a_body_that_arrived_while_the_loop_stalled_past_the_deadline_is_read() -> None:
    client = Client()
    reading = asyncio.ensure_future(read_body(client.receive, limit=1_000))
    await asyncio.sleep(0)  # the reader waits for its body
    # The body arrives during a stall in which the loop runs nothing, past the deadline:
    # its delivery and the deadline's expiry run in the loop's next pass.
    asyncio.get_running_loop().call_soon(client.deliver, BODY)
    time.sleep(2 * GRACE)  # noqa: ASYNC251 (the stall: nothing else may run)
    assert await reading == BODY


async def test_the_rest_of_a_body_that_arrived_during_a_stall_is_read() -> None:
    client = Client()
    reading = asyncio.ensure_future(read_body(client.receive, limit=1_000))
    client.deliver(BODY[:10], more=True)
    await asyncio.sleep(0.01)  # the first part is taken
    asyncio.get_running_loop().call_soon(client.deliver, BODY[10:])
    time.sleep(2 * GRACE)  # noqa: ASYNC251 (the stall: nothing else may run)
    assert await reading == BODY


async def test_a_body_that_does_not_come_is_too_slow() -> None:
    client = Client()
    started = time.monotonic()
    with pytest.raises(BodyTooSlow):
        await read_body(client.receive, limit=1_000)
    assert GRACE <= time.monotonic() - started < 1


async def test_a_body_that_trickles_below_the_rate_is_too_slow() -> None:
    client = Client()

    async def trickle() -> None:
        while True:  # one byte a tenth of the grace: far below 1 KB/s once it is over
            client.deliver(b" ", more=True)
            await asyncio.sleep(GRACE / 10)

    sending = asyncio.ensure_future(trickle())
    try:
        with pytest.raises(BodyTooSlow):
            await asyncio.wait_for(read_body(client.receive, limit=1_000), 1)
    finally:
        sending.cancel()
