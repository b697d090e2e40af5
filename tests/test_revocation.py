"""Revoking a token ends the subscriptions it opened: an error, then the socket is closed.

Before, an open subscription kept delivering events after its token was revoked; only a
new socket was refused. Now every event is delivered only after the token was found live
(the checks of one moment share one query), and an idle subscription checks every couple
of seconds: revocation ends it before it delivers another event, and within 5 s without
events.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import websockets
from websockets.exceptions import ConnectionClosed

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]

SUBSCRIBE = """subscription($id: ID!) { conversationEvents(conversationId: $id) {
  kind conversationId version } }"""
CREATE = 'mutation { createConversation(input: {title: "watched"}) { conversation { id } } }'
TOUCH = """mutation($id: ID!) { updateConversation(input: {id: $id, markRead: true}) {
  conversation { version } } }"""


@asynccontextmanager
async def subscription(server: LiveServer, token: str, cid: str) -> AsyncIterator[Any]:
    async with websockets.connect(
        server.ws_url,
        subprotocols=[websockets.Subprotocol("graphql-transport-ws")],
        open_timeout=10,
        close_timeout=2,
    ) as ws:
        await ws.send(
            json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
        )
        assert json.loads(await asyncio.wait_for(ws.recv(), 10)) == {"type": "connection_ack"}
        subscribe = {"query": SUBSCRIBE, "variables": {"id": cid}}
        await ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": subscribe}))
        yield ws


async def messages_until_closed(ws: Any, within: float) -> tuple[list[dict[str, Any]], int]:
    """Every message the server sends until it closes the socket, and its close code."""
    received: list[dict[str, Any]] = []
    try:
        while True:
            message = json.loads(await asyncio.wait_for(ws.recv(), within))
            if message.get("type") == "ping":
                await ws.send(json.dumps({"type": "pong"}))
                continue
            received.append(message)
    except ConnectionClosed as closed:
        assert closed.rcvd is not None, "the client closed, not the server"
        return received, closed.rcvd.code


async def token_id(server: LiveServer, label: str) -> str:
    listed = (await server.cli("token", "list")).splitlines()
    (found,) = [line.split("\t")[0] for line in listed if f"\t{label}\t" in line]
    return found


async def live_until_an_event(ws: Any, gql: Any, cid: str) -> None:
    """Write until the subscription delivers (the protocol does not acknowledge subscribe)."""
    for _ in range(50):
        version = (await gql(TOUCH, {"id": cid}))["updateConversation"]["conversation"]["version"]
        try:
            while True:
                message = json.loads(await asyncio.wait_for(ws.recv(), 0.2))
                event = (message.get("payload", {}).get("data") or {}).get("conversationEvents")
                if message.get("type") == "next" and event and event["version"] == version:
                    return
        except TimeoutError:
            continue
    raise AssertionError("the subscription never delivered an event")


async def test_revocation_ends_a_subscription_before_its_next_event(
    live_server: LiveServer,
) -> None:
    watcher = await live_server.token(label="watcher")
    writer = await live_server.token(label="writer")  # the same owner's other token
    async with live_server.client(writer) as gql:
        cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
        async with subscription(live_server, watcher, cid) as ws:
            await live_until_an_event(ws, gql, cid)
            await live_server.cli("token", "revoke", await token_id(live_server, "watcher"))
            await gql(TOUCH, {"id": cid})  # an event the revoked token must not see
            received, code = await messages_until_closed(ws, within=10)

    assert code == 4403
    assert not [m for m in received if m["type"] == "next" and "errors" not in m["payload"]]
    errors = [e for m in received for e in _errors(m)]
    assert errors and all(e["extensions"]["code"] == "FORBIDDEN" for e in errors), received
    assert "revoked" in errors[0]["message"]


async def test_revocation_ends_an_idle_subscription_within_5_seconds(
    live_server: LiveServer,
) -> None:
    watcher = await live_server.token(label="idle watcher")
    writer = await live_server.token(label="writer")
    async with live_server.client(writer) as gql:
        cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
        async with subscription(live_server, watcher, cid) as ws:
            await live_until_an_event(ws, gql, cid)
            await live_server.cli("token", "revoke", await token_id(live_server, "idle watcher"))
            revoked = time.perf_counter()
            received, code = await messages_until_closed(ws, within=10)
            ended = time.perf_counter() - revoked

    assert code == 4403
    assert ended < 5, ended
    assert [e["extensions"]["code"] for m in received for e in _errors(m)] == ["FORBIDDEN"]


async def test_a_live_token_keeps_its_subscription(live_server: LiveServer) -> None:
    # The control: another token's revocation ends nothing, and events keep coming.
    watcher = await live_server.token(label="kept")
    other = await live_server.token(label="other")
    async with live_server.client(watcher) as gql:
        cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
        async with subscription(live_server, watcher, cid) as ws:
            await live_until_an_event(ws, gql, cid)
            await live_server.cli("token", "revoke", await token_id(live_server, "other"))
            await asyncio.sleep(2.5)  # past an idle check
            await live_until_an_event(ws, gql, cid)
    assert other


def _errors(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message["type"] == "error":
        return list(message["payload"])
    if message["type"] == "next":
        return list(message["payload"].get("errors") or [])
    return []
