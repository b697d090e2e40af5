"""WebSocket compression (permessage-deflate) is off unless CONVOGRAPH_WS_COMPRESSION asks
for it: a connection that negotiates it holds about 50 KB of zlib state in the server, and
a subscription's events are a few hundred bytes. Either way a subscription works."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import websockets

from tests.operations import create, touch
from tests.ws import PROTOCOL, RECEIVE_TIMEOUT, subscribed

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]


async def _accepted_extensions(server: LiveServer, token: str) -> str | None:
    """What the server accepts of a client that offers permessage-deflate (the `websockets`
    client offers it by default)."""
    async with websockets.connect(
        server.ws_url,
        subprotocols=[websockets.Subprotocol(PROTOCOL)],
        additional_headers={"Authorization": f"Bearer {token}"},
        open_timeout=RECEIVE_TIMEOUT,
    ) as ws:
        assert ws.response is not None
        return ws.response.headers.get("Sec-WebSocket-Extensions")


@pytest.mark.parametrize(
    ("setting", "accepted"),
    [({}, None), ({"CONVOGRAPH_WS_COMPRESSION": "true"}, "permessage-deflate")],
    ids=["default", "on"],
)
async def test_compression_is_negotiated_only_when_turned_on(
    database_url: str, live_servers: LiveServers, setting: dict[str, str], accepted: str | None
) -> None:
    server = await live_servers.start(database_url, env=setting)
    async with server.client(await server.token()) as gql:
        assert gql.token is not None
        extensions = await _accepted_extensions(server, gql.token)
        assert (extensions or "").split(";")[0] == (accepted or "")

        cid = await create(gql)
        async with subscribed(server, gql, cid) as socket:
            version = await touch(gql, cid)
            assert (await socket.event())["version"] == version
