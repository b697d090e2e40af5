"""WebSocket clients that vanish: the server's log stays quiet.

A client on a dead network reads nothing, so what the server sends piles up in the socket's
buffers until its sends wait; then the connection resets. Whatever the server was doing
then (delivering an event, answering a query or a mutation, acknowledging or refusing a
connection_init, closing a socket that never said it) ends without a traceback and without
an error line: a client that goes away is no server failure. Before, strawberry logged
"Exception in worker task" with a traceback at error level, and a refused connection_init
ended in uvicorn's "Exception in ASGI application".

The client here speaks WebSocket frames itself, to stop reading at will: it fills the
server's outgoing buffers with pongs (each ping it sends is answered by one) while it reads
nothing, so the server's next send waits; a graphql-transport-ws ping makes the handler's
own loop wait to send its pong too (a handler that waits to receive learns of the reset
first and cancels its operations, which is quiet), and then it resets the connection.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import struct
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest

from tests.operations import TOUCH, WATCH, create
from tests.ws import PROTOCOL

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

# What the server may hold for a client that reads nothing (its send buffer grows to 4 MiB
# on Linux, uvicorn's transport pauses past 64 KiB): the pongs sent to jam it exceed it.
JAM_BYTES = 6 * 1024 * 1024
PING = b"\x89\xfd" + b"\0" * 4 + b"p" * 125  # a masked ping frame of 125 bytes (zero mask)
# Long enough for the server to answer every ping and reach a send that waits.
SETTLE_SECONDS = 1.0


class RawSocket:
    """A graphql-transport-ws client over bare frames, reading only when asked."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def send(self, message: dict[str, Any]) -> None:
        payload = json.dumps(message).encode()
        n = len(payload)
        head = bytes([0x81, 0x80 | n]) if n < 126 else b"\x81\xfe" + struct.pack("!H", n)
        self.writer.write(head + b"\0" * 4 + payload)  # masked with a zero key

    async def receive(self) -> dict[str, Any]:
        """The next text message (control frames skipped)."""
        while True:
            first, second = await asyncio.wait_for(self.reader.readexactly(2), 10)
            size = second & 0x7F
            if size == 126:
                (size,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif size == 127:
                (size,) = struct.unpack("!Q", await self.reader.readexactly(8))
            data = await self.reader.readexactly(size)
            if first & 0x0F == 0x1:
                message: dict[str, Any] = json.loads(data)
                return message

    async def jam(self) -> None:
        """Stop reading and make the server write more than it can hold: its next send of
        this connection waits."""
        self.writer.transport.pause_reading()  # type: ignore[attr-defined]
        for _ in range(JAM_BYTES // len(PING) // 256 + 1):
            self.writer.write(PING * 256)
            await self.writer.drain()
        await asyncio.sleep(SETTLE_SECONDS)

    async def vanish(self) -> None:
        """A protocol ping (graphql-ws clients send them now and then), whose pong waits
        behind what the server was sending already; then the connection resets, as a network
        gone away does: no close frame. The server's sends that waited fail in the order they
        began, the operation's before the pong's."""
        self.send({"type": "ping"})
        await self.writer.drain()
        await asyncio.sleep(SETTLE_SECONDS)
        self.writer.transport.abort()


@contextlib.asynccontextmanager
async def raw_socket(server: LiveServer, token: str | None = None) -> AsyncIterator[RawSocket]:
    sock = socket.socket()
    # A small window: the server's buffers, not this side's, hold what is not read.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    key = base64.b64encode(os.urandom(16)).decode()
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    writer.write(
        (
            f"GET /graphql HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: {PROTOCOL}\r\n{auth}\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 101"), head
    try:
        yield RawSocket(reader, writer)
    finally:
        writer.transport.abort()


@pytest.fixture
async def server(live_servers: LiveServers, database_url: str) -> LiveServer:
    return await live_servers.start(
        database_url,
        env={
            "CONVOGRAPH_LOG_FORMAT": "text",
            # The one line a vanished client leaves, shown so that each test can see that
            # it made the server meet one.
            "CONVOGRAPH_LOG_LEVELS": "convograph.ws=debug",
            "CONVOGRAPH_HEADER_TIMEOUT_SECONDS": "2",
        },
    )


async def assert_quiet(server: LiveServer, *, gone: int = 1) -> None:
    """The server met `gone` vanished clients (each leaves one debug line), and logged no
    traceback, no error and no warning."""
    for _ in range(50 if gone else 0):
        if server.logs().count("convograph.ws: WebSocket client gone") >= gone:
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(0.3)  # what else the end of those connections may log
    logs = server.logs()
    assert "Traceback" not in logs, logs
    assert " ERROR " not in logs and " CRITICAL " not in logs and " WARNING " not in logs, logs
    assert logs.count("convograph.ws: WebSocket client gone") == gone, logs


async def test_a_subscriber_gone_while_an_event_is_delivered(server: LiveServer) -> None:
    token = await server.token()
    async with server.client(token) as gql:
        conversation_id = await create(gql)
        async with raw_socket(server, token) as ws:
            ws.send({"type": "connection_init"})
            assert (await ws.receive())["type"] == "connection_ack"
            ws.send(
                {
                    "id": "1",
                    "type": "subscribe",
                    "payload": {"query": WATCH, "variables": {"id": conversation_id}},
                }
            )
            # Live once a write's event arrives (the protocol acknowledges no subscribe).
            for _ in range(50):
                await gql(TOUCH, {"id": conversation_id})
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.3):
                        assert (await ws.receive())["type"] == "next"
                        break
            else:
                raise AssertionError("the subscription never delivered an event")
            await ws.jam()
            await gql(TOUCH, {"id": conversation_id})  # its event waits to be sent
            await asyncio.sleep(SETTLE_SECONDS)
            await ws.vanish()
    await assert_quiet(server)


@pytest.mark.parametrize(
    "document",
    [
        pytest.param("query Me { viewer { ownerKey } }", id="query"),
        pytest.param(
            'mutation Make { createConversation(input: {title: "t"}) { conversation { id } } }',
            id="mutation",
        ),
    ],
)
async def test_a_client_gone_while_its_operation_is_answered(
    server: LiveServer, document: str
) -> None:
    token = await server.token()
    async with raw_socket(server, token) as ws:
        ws.send({"type": "connection_init"})
        assert (await ws.receive())["type"] == "connection_ack"
        await ws.jam()
        ws.send({"id": "1", "type": "subscribe", "payload": {"query": document}})
        await asyncio.sleep(SETTLE_SECONDS)  # it runs; its answer waits to be sent
        await ws.vanish()
    await assert_quiet(server)


@pytest.mark.parametrize("accepted", [True, False], ids=["acknowledged", "refused"])
async def test_a_client_gone_while_its_connection_init_is_answered(
    server: LiveServer, accepted: bool
) -> None:
    token = await server.token() if accepted else "cvg_not_a_token"
    async with raw_socket(server) as ws:
        await ws.jam()
        ws.send({"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
        await asyncio.sleep(SETTLE_SECONDS)  # its connection_ack, or its close, waits
        await ws.vanish()
    await assert_quiet(server)


async def test_a_client_gone_that_never_said_connection_init(server: LiveServer) -> None:
    async with raw_socket(server) as ws:
        await ws.jam()
        # The server closes the socket with 4408 once the header timeout has passed (the
        # close waits behind the pongs); the client's ping comes after it, and its pong is
        # dropped: before, that send on a closed socket ended in uvicorn's "Exception in ASGI
        # application". The handler then ends, the socket's close with it: nothing more is
        # sent to the client, so it leaves no "client gone" line.
        await asyncio.sleep(2 + SETTLE_SECONDS)
        await ws.vanish()
    await assert_quiet(server, gone=0)
