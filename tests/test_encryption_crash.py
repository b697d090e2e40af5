"""Encryption at rest and a crash: no acknowledged content is ever left without its key.

A new conversation's data key is committed to the key store before the data it seals, and
a delete destroys keys only after it committed (store/encryption.py). Here a live server
with a master key is killed (SIGKILL) while clients create conversations and write their
first messages, the moment a key is made; after each restart every conversation and
message the server acknowledged reads back exactly, and every conversation stored, whether
acknowledged or not, can be opened: the crash left no content without its key.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

from tests.conftest import GraphQLClient
from tests.operations import APPEND, CREATE

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

KEY = base64.b64encode(b"crash-test-master-key-32-bytes!!").decode()
WRITERS = 4
LOOPS = 3
ROUND_MINIMUM = 12
READ = "query($id: ID!) { conversation(id: $id) { title transcript } }"
LIST = """query($after: String) { conversations(first: 100, after: $after) {
  totalCount nodes { id } pageInfo { hasNextPage endCursor } } }"""


@dataclass
class Acknowledged:
    titles: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    grew: asyncio.Condition = field(default_factory=asyncio.Condition)


async def write_until_killed(client: GraphQLClient, writer: int, seen: Acknowledged) -> None:
    """Create conversations and append each one's first message, until the server is gone."""
    n = 0
    with contextlib.suppress(httpx.HTTPError, AssertionError):
        while True:
            title = f"secret title {writer}.{n}"
            created = (await client(CREATE, {"title": title}))["createConversation"]
            cid = created["conversation"]["id"]
            seen.titles[cid] = title
            text = f"secret message {writer}.{n}"
            appended = await client(APPEND, {"id": cid, "m": [{"role": "user", "content": text}]})
            assert appended["appendMessages"]["userErrors"] == []
            seen.messages[cid] = text
            async with seen.grew:
                seen.grew.notify_all()
            n += 1


async def acknowledged(seen: Acknowledged, count: int) -> None:
    async with seen.grew:
        await seen.grew.wait_for(lambda: len(seen.messages) >= count)


async def load_then_kill(
    server: LiveServer, token: str, seen: Acknowledged, rng: random.Random
) -> None:
    async with server.client(token) as client:
        writers = [asyncio.create_task(write_until_killed(client, w, seen)) for w in range(WRITERS)]
        # Kill under load, however slow the machine: once this round has had some writes
        # acknowledged, then at a random moment, most likely between a key and its data.
        await asyncio.wait_for(acknowledged(seen, len(seen.messages) + ROUND_MINIMUM), 60)
        await asyncio.sleep(rng.uniform(0.0, 0.5))
        await server.kill()
        await asyncio.wait_for(asyncio.gather(*writers), 30)


async def test_a_crash_leaves_no_acknowledged_content_without_its_key(
    live_servers: LiveServers, database_url: str
) -> None:
    env = {"CONVOGRAPH_ENCRYPTION_KEY": KEY}
    server = await live_servers.start(database_url, env=env)
    token = await server.token()
    seen = Acknowledged()
    rng = random.Random(18)
    for _ in range(LOOPS):
        await load_then_kill(server, token, seen, rng)
        server = await live_servers.restart(server)
        async with server.client(token) as client:
            for cid, title in list(seen.titles.items()):
                found = (await client(READ, {"id": cid}))["conversation"]
                assert found is not None, f"{cid} was acknowledged but reads as missing"
                assert found["title"] == title
                if cid in seen.messages:
                    assert found["transcript"] == [
                        {"role": "user", "content": seen.messages[cid]}
                    ], cid
            # Unacknowledged writes too: a row the crash left without its key would be
            # counted (counting opens nothing) but not listed (it cannot be opened).
            listed, after, total = 0, None, None
            while True:
                page = (await client(LIST, {"after": after}))["conversations"]
                total = page["totalCount"]
                listed += len(page["nodes"])
                if not page["pageInfo"]["hasNextPage"]:
                    break
                after = page["pageInfo"]["endCursor"]
            assert listed == total >= len(seen.titles), (listed, total)
    assert len(seen.messages) >= ROUND_MINIMUM * LOOPS, len(seen.messages)
