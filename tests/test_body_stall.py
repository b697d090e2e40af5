"""A request whose body arrived while the server's event loop stalled past the body's
deadline is answered, not refused with 408 (tests/unit/test_body.py has the same with a
receive of its own; this is uvicorn's own HTTP protocol and socket).

The server here is uvicorn with an app that reads its body as convograph's endpoint does
(graph.server.body.read_body) and then stalls its own event loop, as a long statement on
the loop or a starved process would; the client sends the body during the stall. When the
loop runs again, the body's arrival and the deadline's expiry come due in the same pass.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvicorn
import uvloop

from graph.server import body
from graph.server.body import BodyTooSlow, read_body
from tests.raw_http import graphql_post_head

GRACE = 0.5  # the body's grace period, shortened
STALL_AFTER, STALL = 0.05, 1.5  # the loop stalls from then, for this long
SEND_AFTER = 0.3  # the client sends its body then, during the stall, before the deadline
BODY = b'{"query": "{ viewer { ownerKey } }"}'


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    asyncio.get_running_loop().call_later(STALL_AFTER, time.sleep, STALL)
    try:
        status, text = 200, f"{len(await read_body(receive, 1_000))} bytes"
    except BodyTooSlow:
        status, text = 408, "too slow"
    headers = [(b"content-length", str(len(text)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text.encode()})


def post_with_the_body_later(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(graphql_post_head("unchecked", len(BODY), close=True))
        time.sleep(SEND_AFTER)
        sock.sendall(BODY)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
        return answer


async def answer_to_a_body_sent_during_a_stall() -> bytes:
    listening = socket.create_server(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning"))
    serving = asyncio.ensure_future(server.serve(sockets=[listening]))
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn says it with a flag only)
            await asyncio.sleep(0.01)
        return await asyncio.to_thread(post_with_the_body_later, port)
    finally:
        server.should_exit = True
        await serving
        listening.close()


# Both event loops: they order a pass's timers and I/O differently (uvloop is what
# `convograph serve` runs).
@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_a_body_sent_in_time_during_a_stall_is_read_not_refused_with_408(
    run: Callable[[Coroutine[Any, Any, bytes]], bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(body, "BODY_GRACE_SECONDS", GRACE)
    answer = run(answer_to_a_body_sent_during_a_stall())
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert answer.endswith(f"{len(BODY)} bytes".encode()), answer
