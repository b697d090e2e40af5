"""The SQLite connection modes (graph/db.py, graph/sqlite_inline.py) keep writes whole.

Every mode the settings offer: statements on the loop with COMMIT inline (the default) or
in a thread, and aiosqlite's own thread. Each takes concurrent appends gapless, refuses a
stale write without disturbing the writer, and goes on writing after it.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from graph.app import create_app
from graph.settings import Settings
from tests.conftest import GraphQLClient, Server
from tests.operations import CREATE

APPEND = """mutation($id: ID!, $m: [JSON!]!, $v: Int) {
  appendMessages(input: {conversationId: $id, messages: $m, expectedVersion: $v}) {
    messages { seq } conversation { version } userErrors { code }
  }
}"""
TRANSCRIPT = "query($id: ID!) { conversation(id: $id) { version transcript } }"


@pytest.mark.parametrize(
    "commit_in_thread",
    [pytest.param(False, id="commit-on-the-loop"), pytest.param(True, id="commit-in-thread")],
)
async def test_every_sqlite_mode_keeps_writes_whole(
    settings: Settings, commit_in_thread: bool
) -> None:
    if not settings.is_sqlite:
        pytest.skip("SQLite connection modes")
    settings = settings.replace(sqlite_commit_in_thread=commit_in_thread)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        server = Server(app, settings)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            gql = GraphQLClient(http, await server.token())
            cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]

            async def append(i: int) -> int:
                data = await gql(APPEND, {"id": cid, "m": [{"role": "user", "content": str(i)}]})
                assert data["appendMessages"]["userErrors"] == [], data
                seq: int = data["appendMessages"]["messages"][0]["seq"]
                return seq

            seqs = await asyncio.gather(*(append(i) for i in range(40)))
            assert sorted(seqs) == list(range(1, 41))

            stale = await gql(
                APPEND, {"id": cid, "m": [{"role": "user", "content": "stale"}], "v": 1}
            )
            assert stale["appendMessages"]["userErrors"] == [{"code": "CONFLICT"}]
            version = (await gql(TRANSCRIPT, {"id": cid}))["conversation"]["version"]
            after = await gql(
                APPEND, {"id": cid, "m": [{"role": "user", "content": "40"}], "v": version}
            )
            assert after["appendMessages"]["messages"] == [{"seq": 41}], after

            stored = (await gql(TRANSCRIPT, {"id": cid}))["conversation"]
            assert stored["version"] == version + 1
            assert sorted(int(m["content"]) for m in stored["transcript"]) == list(range(41))
