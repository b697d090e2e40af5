"""A kept-alive connection is closed by its client, not under it.

A client reuses an idle connection until its own expiry (httpx: 5 s); a server that closes
idle connections at the same age (uvicorn's default, 5 s) can close one just as the client
sends its next request on it, which then fails with no answer (a POST is not retried). The
server keeps them longer (CONVOGRAPH_KEEP_ALIVE_SECONDS, 20 s), and still closes them.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import httpx

from tests.operations import VIEWER
from tests.raw_http import graphql_post_head

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

# httpx's own default: how long it reuses an idle connection.
CLIENT_EXPIRY = httpx.Limits().keepalive_expiry or 5.0


async def request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, token: str) -> bytes:
    """One kept-alive POST on the connection; the whole answer, head and body."""
    body = json.dumps({"query": VIEWER}).encode()
    writer.write(graphql_post_head(token, len(body)) + body)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await asyncio.wait_for(reader.readexactly(length), 10)


async def test_an_idle_connection_outlives_the_clients_own_expiry(
    live_server: LiveServer,
) -> None:
    token = await live_server.token()
    reader, writer = await asyncio.open_connection("127.0.0.1", live_server.port)
    try:
        assert (await request(reader, writer, token)).startswith(b"HTTP/1.1 200")
        # Idle past the age at which the client itself would drop it: still open, and
        # the next request on it is answered.
        await asyncio.sleep(CLIENT_EXPIRY + 1)
        assert not reader.at_eof()
        answer = await request(reader, writer, token)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    finally:
        writer.close()


async def test_an_idle_connection_is_closed_after_the_setting(
    database_url: str, live_servers: LiveServers
) -> None:
    server = await live_servers.start(database_url, env={"CONVOGRAPH_KEEP_ALIVE_SECONDS": "0.5"})
    token = await server.token()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        assert (await request(reader, writer, token)).startswith(b"HTTP/1.1 200")
        # The server closes it (EOF), well before uvicorn's default of 5 s would.
        assert await asyncio.wait_for(reader.read(), 3.5) == b""
    finally:
        writer.close()
