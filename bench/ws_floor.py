"""The WebSocket floor: what uvicorn itself holds for an idle graphql-transport-ws connection.

A bare ASGI app (no Starlette, no Strawberry, no authentication) that accepts the
`graphql-transport-ws` subprotocol, answers `connection_init` with `connection_ack`, then
waits for the close. bench/subscribers.py holds its idle connections against it as against
convograph, under uvicorn with the options `convograph serve` gives a WebSocket (the same
implementation, compression off, the same frame size cap), so what convograph
holds above this per connection is the price of its own layers, and nothing served by
uvicorn can hold a connection for less.

Run:  python -m uvicorn bench.ws_floor:app --port 8012 --ws wsproto --ws-per-message-deflate false
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    if scope["type"] == "http":  # the bench's wait for the port, and nothing else
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        return
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept", "subprotocol": "graphql-transport-ws"})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        if '"connection_init"' in (message.get("text") or ""):
            await send({"type": "websocket.send", "text": '{"type":"connection_ack"}'})
