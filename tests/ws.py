"""One graphql-transport-ws client for the tests: a `Session` over a live server's WebSocket
(`connect`, the `websockets` library) or over an app in this process (`connect_app`,
httpx-ws's ASGI transport). Every read times out instead of hanging.

    async with ws.connect(live_server, token=token) as socket:
        await socket.init()  # connection_init, and its connection_ack
        await socket.subscribe(WATCH, {"id": cid})
        await ws.until_live(socket, gql, cid)  # see there: `subscribe` has no acknowledgement
        event = await socket.event()  # the next `conversationEvents` of operation "1"

The token goes in the upgrade request's Authorization header (`connect(token=...)`) or in
connection_init's payload (`init(token, acting_for=...)`), as a client chooses. What a test
of the protocol itself needs (a malformed message, frames as they come) is `send_raw` and
`receive_raw`; a closed connection is `Closed`, with the server's code and reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import httpx
import websockets
from httpx_ws import AsyncWebSocketSession, WebSocketDisconnect, aconnect_ws
from httpx_ws.transport import ASGIWebSocketTransport
from websockets.exceptions import ConnectionClosed

from tests.operations import CONVERSATION_EVENTS, touch

if TYPE_CHECKING:
    from tests.conftest import GraphQLClient
    from tests.live_server import LiveServer

PROTOCOL = "graphql-transport-ws"
# Long enough for a slow CI machine, short enough that a broken server fails the test.
RECEIVE_TIMEOUT = 10.0
# How long to wait for an event that a write a moment ago makes, before writing again.
SYNC_TIMEOUT = 0.3

T = TypeVar("T")


class Closed(Exception):
    """The connection is closed. `code` and `reason` are the server's close frame's; `code`
    is None when the server sent none (this side closed, or the connection was lost)."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(code, reason)
        self.code = code
        self.reason = reason


def graphql_errors(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The GraphQL errors a message carries: an `error`'s payload, a `next`'s errors."""
    if message["type"] == "error":
        return list(message["payload"])
    if message["type"] == "next":
        return list(message["payload"].get("errors") or [])
    return []


# -- the two transports ----------------------------------------------------------------------


class _Frames(Protocol):
    async def send(self, text: str) -> None: ...

    async def receive(self, within: float) -> str: ...


class _OverTcp:
    """A real WebSocket (the `websockets` client)."""

    def __init__(self, ws: websockets.ClientConnection) -> None:
        self.ws = ws

    async def send(self, text: str) -> None:
        try:
            await self.ws.send(text)
        except ConnectionClosed as closed:
            raise _closed(closed) from closed

    async def receive(self, within: float) -> str:
        try:
            frame = await asyncio.wait_for(self.ws.recv(), within)
        except ConnectionClosed as closed:
            raise _closed(closed) from closed
        # Browser clients (graphql-ws, so GraphiQL) parse text frames only.
        assert isinstance(frame, str), f"a binary frame: {frame!r}"
        return frame


def _closed(closed: ConnectionClosed) -> Closed:
    if closed.rcvd is None:
        return Closed(None)
    return Closed(closed.rcvd.code, closed.rcvd.reason)


class _InProcess:
    """The ASGI app in this process (httpx-ws), no socket in between."""

    def __init__(self, ws: AsyncWebSocketSession) -> None:
        self.ws = ws

    async def send(self, text: str) -> None:
        await self.ws.send_text(text)

    async def receive(self, within: float) -> str:
        try:
            # A binary frame raises WebSocketInvalidTypeReceived.
            return await self.ws.receive_text(timeout=within)
        except WebSocketDisconnect as closed:
            raise Closed(closed.code, closed.reason or "") from closed


# -- a session -------------------------------------------------------------------------------


class Session:
    """One connection speaking graphql-transport-ws; `subprotocol` is the one the server
    chose in the handshake."""

    def __init__(self, frames: _Frames, subprotocol: str | None) -> None:
        self._frames = frames
        self.subprotocol = subprotocol

    async def send_raw(self, text: str) -> None:
        await self._frames.send(text)

    async def receive_raw(self, within: float = RECEIVE_TIMEOUT) -> str:
        """The next text frame as it came (a ping included); TimeoutError after `within` s."""
        return await self._frames.receive(within)

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_raw(json.dumps(message))

    async def receive(self, within: float = RECEIVE_TIMEOUT) -> dict[str, Any]:
        """The next message, answering the protocol's keep-alive pings on the way."""
        while True:
            message: dict[str, Any] = json.loads(await self.receive_raw(within))
            if message.get("type") != "ping":
                return message
            await self.send({"type": "pong"})

    async def send_init(self, token: str | None = None, *, acting_for: str | None = None) -> None:
        """connection_init, its payload carrying `token` and the Convograph-Owner a SERVICE
        token acts for, when given."""
        payload: dict[str, str] = {}
        if token is not None:
            payload["Authorization"] = f"Bearer {token}"
        if acting_for is not None:
            payload["Convograph-Owner"] = acting_for
        await self.send({"type": "connection_init", "payload": payload})

    async def init(self, token: str | None = None, *, acting_for: str | None = None) -> None:
        """connection_init (see `send_init`), acknowledged."""
        await self.send_init(token, acting_for=acting_for)
        assert await self.receive() == {"type": "connection_ack"}

    async def subscribe(
        self, query: str, variables: dict[str, Any] | None = None, *, op: str = "1"
    ) -> None:
        payload: dict[str, Any] = {"query": query}
        if variables is not None:
            payload["variables"] = variables
        await self.send({"id": op, "type": "subscribe", "payload": payload})

    async def complete(self, op: str = "1") -> None:
        """The client ends operation `op`."""
        await self.send({"id": op, "type": "complete"})

    async def next(self, op: str = "1", within: float = RECEIVE_TIMEOUT) -> dict[str, Any]:
        """The `data` of the next message, which must be a `next` of `op` without errors."""
        message = await self.receive(within)
        assert message["type"] == "next" and message["id"] == op, message
        assert "errors" not in message["payload"], message
        data: dict[str, Any] = message["payload"]["data"]
        return data

    async def event(self, op: str = "1", within: float = RECEIVE_TIMEOUT) -> dict[str, Any]:
        """The next `conversationEvents` event of `op` (see `next`)."""
        event: dict[str, Any] = (await self.next(op, within))["conversationEvents"]
        return event

    async def closed(self, within: float = RECEIVE_TIMEOUT) -> tuple[int, str]:
        """The code and reason the server closes with, reading whatever it sends before."""
        try:
            while True:
                await self.receive_raw(within)
        except Closed as closed:
            assert closed.code is not None, "the client side closed, not the server"
            return closed.code, closed.reason

    async def close_code(self, within: float = RECEIVE_TIMEOUT) -> int:
        return (await self.closed(within))[0]

    async def messages_until_closed(
        self, within: float = RECEIVE_TIMEOUT
    ) -> tuple[list[dict[str, Any]], int]:
        """Every message (but pings) the server sends until it closes, and its close code."""
        received: list[dict[str, Any]] = []
        try:
            while True:
                received.append(await self.receive(within))
        except Closed as closed:
            assert closed.code is not None, "the client side closed, not the server"
            return received, closed.code

    async def wait_until_live(
        self,
        write: Callable[[], Awaitable[T]],
        until: Callable[[T, dict[str, Any]], bool] = lambda _written, _event: True,
        *,
        op: str = "1",
        within: float = SYNC_TIMEOUT,
        attempts: int = int(RECEIVE_TIMEOUT / SYNC_TIMEOUT),
    ) -> dict[str, Any]:
        """`write`, again and again, until subscription `op` delivers an event that `until`
        accepts (given what that `write` returned); that event.

        The protocol has no acknowledgement of `subscribe`, so a write made right after it
        could commit before the server registers the subscriber: from the event on, no
        write can be missed. Every message read on the way must be an event of `op`.
        """
        for _ in range(attempts):
            written = await write()
            try:
                while True:
                    event = await self.event(op, within)
                    if until(written, event):
                        return event
            except TimeoutError:
                continue
        raise AssertionError("the subscription never delivered an event")


# -- connecting ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def connect(
    server: LiveServer,
    *,
    token: str | None = None,
    subprotocols: Sequence[str] = (PROTOCOL,),
    ping_interval: float | None = 20.0,
    max_queue: int | None = 16,
) -> AsyncIterator[Session]:
    """A WebSocket to the live server's /graphql, `token` in the upgrade request's header.

    `ping_interval=None` sends no WebSocket pings from this side (whose unanswered pong
    would close a connection that the test stops reading for a while). `max_queue` is the
    client library's: past that many unread messages it stops reading the socket, and a
    close then waits its whole timeout behind them (None: it reads everything).
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with websockets.connect(
        server.ws_url,
        subprotocols=[websockets.Subprotocol(p) for p in subprotocols],
        additional_headers=headers,
        open_timeout=RECEIVE_TIMEOUT,
        close_timeout=2,
        ping_interval=ping_interval,
        max_queue=max_queue,
    ) as ws:
        yield Session(_OverTcp(ws), ws.subprotocol)


@contextlib.asynccontextmanager
async def session(
    server: LiveServer,
    token: str,
    *,
    ping_interval: float | None = 20.0,
    max_queue: int | None = 16,
) -> AsyncIterator[Session]:
    """`connect` with `token` in the header, connection_init acknowledged."""
    async with connect(
        server, token=token, ping_interval=ping_interval, max_queue=max_queue
    ) as socket:
        await socket.init()
        yield socket


@contextlib.asynccontextmanager
async def connect_app(
    app: Any,
    *,
    token: str | None = None,
    subprotocols: Sequence[str] = (PROTOCOL,),
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[Session]:
    """A WebSocket to the ASGI `app`'s /graphql in this process, `token` in the header
    (with `headers`, more of the upgrade request's headers)."""
    headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    transport = ASGIWebSocketTransport(app)
    ws: AsyncWebSocketSession
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://localhost") as http,
        aconnect_ws("/graphql", http, subprotocols=list(subprotocols), headers=headers) as ws,
    ):
        yield Session(_InProcess(ws), ws.subprotocol)


# -- conversationEvents ----------------------------------------------------------------------


async def until_live(
    socket: Session, gql: GraphQLClient, conversation_id: str, *, op: str = "1"
) -> dict[str, Any]:
    """Touch the conversation until `op` delivers that write's event (see
    `Session.wait_until_live`); the event. The subscription must select kind,
    conversationId and version."""
    return await socket.wait_until_live(
        lambda: touch(gql, conversation_id),
        lambda version, event: (
            (event["kind"], event["conversationId"], event["version"])
            == ("CONVERSATION_UPDATED", conversation_id, version)
        ),
        op=op,
    )


@contextlib.asynccontextmanager
async def subscribed(
    server: LiveServer,
    gql: GraphQLClient,
    conversation_id: str,
    *,
    descendants: bool | None = None,
) -> AsyncIterator[Session]:
    """A socket authenticated as `gql`'s token, subscribed to every field of the
    conversation's events (operation "1") and known to be receiving."""
    assert gql.token is not None
    variables: dict[str, Any] = {"id": conversation_id}
    if descendants is not None:
        variables["descendants"] = descendants
    async with session(server, gql.token) as socket:
        await socket.subscribe(CONVERSATION_EVENTS, variables)
        await until_live(socket, gql, conversation_id)
        yield socket
