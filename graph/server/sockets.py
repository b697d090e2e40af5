"""The open WebSockets, so that a shutdown can close each with 1001 (going away).

Uvicorn closes the WebSockets it still holds when it shuts down, with 1012 (service
restart) and at the transport. Before that, `close_all` says "going away" (1001), the code
clients reconnect on, from the application. A socket is closed through the ASGI `send` it
was given, not through Starlette's WebSocket (whose later sends would raise): what the
GraphQL handler sends after the close is dropped here, and the server's answer to the
close (a `websocket.disconnect` to receive) ends the handler. A socket accepted once
closing has begun is closed right after its accept.
"""

from __future__ import annotations

import asyncio

from starlette.types import Message, Send

GOING_AWAY = 1001
REASON = "server shutting down"
# A client that reads nothing (its socket's buffer full) cannot hold the shutdown up: past
# this, uvicorn's own close (1012, at the transport) ends its connection.
CLOSE_WITHIN = 1.0


class _Socket:
    """One open WebSocket: the `send` its handler is given (it is called as that send), and
    the block it is open for (`with`). A plain object rather than a generator-based context
    manager and a closure: a server holds one per subscriber."""

    __slots__ = ("_send", "_sockets", "accepted", "closed")

    def __init__(self, send: Send, sockets: OpenSockets) -> None:
        self._send = send
        self._sockets = sockets
        self.accepted = False
        self.closed = False

    def __enter__(self) -> _Socket:
        self._sockets._open.add(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._sockets._open.discard(self)

    async def __call__(self, message: Message) -> None:
        await self.send(message)
        if self._sockets.closing and message["type"] == "websocket.accept":
            await self.close()

    async def send(self, message: Message) -> None:
        if self.closed:
            return
        if message["type"] == "websocket.close":
            self.closed = True
        await self._send(message)
        if message["type"] == "websocket.accept":
            self.accepted = True

    async def close(self) -> None:
        if self.accepted and not self.closed:
            await self.send({"type": "websocket.close", "code": GOING_AWAY, "reason": REASON})


class OpenSockets:
    def __init__(self) -> None:
        self._open: set[_Socket] = set()
        self.closing = False

    def __len__(self) -> int:
        return len(self._open)

    def watch(self, send: Send) -> _Socket:
        """`with sockets.watch(send) as watched:` the `send` to hand the WebSocket's handler
        while it runs."""
        return _Socket(send, self)

    async def close_all(self, within: float = CLOSE_WITHIN) -> None:
        """Close every open WebSocket with 1001, and any accepted from now on."""
        self.closing = True
        closing = [asyncio.ensure_future(socket.close()) for socket in self._open]
        if not closing:
            return
        _, late = await asyncio.wait(closing, timeout=within)
        for task in late:
            task.cancel()
        # Retrieved, so that a socket that failed to close is not reported as unhandled.
        await asyncio.gather(*closing, return_exceptions=True)
