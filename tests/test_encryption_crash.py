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
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import asyncpg
import httpx
import pytest

from tests.conftest import GraphQLClient
from tests.operations import APPEND, CHECKPOINT, CREATE, DELETE
from tests.test_sessions import session_doc

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


# -- a crash between a delete's commit and its keys' end ----------------------------------


class KeyStoreTable:
    """The test's key store, read and write-locked from the test itself: the SQLite file
    beside the database, or the PostgreSQL schema of `key_store_env`."""

    def __init__(self, database_url: str, key_store_env: dict[str, str]) -> None:
        from graph.settings import Settings

        self.database_url = database_url
        self.settings = Settings(database_url=database_url, **key_store_settings(key_store_env))

    async def live_refs(self) -> set[str]:
        """The refs of the data keys that still hold key material (the index's aside)."""
        query = "SELECT ref FROM {} WHERE key_id <> '-' AND ref <> '!index'"
        if self.settings.is_sqlite:
            with contextlib.closing(sqlite3.connect(self.settings.resolved_key_store_file)) as db:
                return {ref for (ref,) in db.execute(query.format("data_key"))}
        rows = await pg_rows(self.database_url, query.format(self._pg_table))
        return {ref for (ref,) in rows}

    @property
    def _pg_table(self) -> str:
        return f'"{self.settings.encryption_key_schema}".data_key'

    @contextlib.asynccontextmanager
    async def write_locked(self, *, reads: bool = True) -> AsyncIterator[None]:
        """No process writes to the key store meanwhile (each waits); reads go on, unless
        not `reads` (an operator's `LOCK TABLE … IN ACCESS EXCLUSIVE MODE`)."""
        if self.settings.is_sqlite:
            db = sqlite3.connect(self.settings.resolved_key_store_file, isolation_level=None)
            try:
                db.execute("BEGIN IMMEDIATE" if reads else "BEGIN EXCLUSIVE")
                yield
            finally:
                db.close()
            return
        conn = await asyncpg.connect(self.database_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            async with conn.transaction():
                mode = "EXCLUSIVE" if reads else "ACCESS EXCLUSIVE"
                await conn.execute(f"LOCK TABLE {self._pg_table} IN {mode} MODE")
                yield
        finally:
            await conn.close()


def key_store_settings(key_store_env: dict[str, str]) -> dict[str, str]:
    schema = key_store_env.get("CONVOGRAPH_ENCRYPTION_KEY_SCHEMA")
    return {"encryption_key_schema": schema} if schema else {}


async def pg_rows(database_url: str, query: str) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        return [tuple(row) for row in await conn.fetch(query)]
    finally:
        await conn.close()


async def data_rows(database_url: str, query: str) -> int:
    """How many rows `query` finds in the data, read beside the server."""
    from graph.settings import Settings

    path = Settings(database_url=database_url).sqlite_path
    if path is not None:
        with contextlib.closing(sqlite3.connect(path)) as db:
            return len(db.execute(query).fetchall())
    return len(await pg_rows(database_url, query))


SESSION = "crash-session"
DELETE_SESSION = """mutation($s: String!) { deleteSessionState(input: {sessionId: $s}) {
  deleted } }"""


@pytest.mark.parametrize("deleted", ["conversation", "session"])
async def test_a_crash_after_a_delete_commits_leaves_no_key_once_restarted(
    live_servers: LiveServers, database_url: str, key_store_env: dict[str, str], deleted: str
) -> None:
    """The server is killed after the delete committed, while it waits to destroy the keys
    (the test holds the key store's write lock): before, the key outlived the data, a
    session's for good (the sweep collects conversations' keys only, an hour after they
    were made). Now the delete records its keys in its own transaction, and the next start
    destroys them."""
    env = {**key_store_env, "CONVOGRAPH_ENCRYPTION_KEY": KEY}
    server = await live_servers.start(database_url, env=env)
    token = await server.token()
    keys = KeyStoreTable(database_url, key_store_env)
    async with server.client(token) as client:
        if deleted == "conversation":
            cid = (await client(CREATE, {"title": "doomed"}))["createConversation"]
            cid = cid["conversation"]["id"]
            await client(APPEND, {"id": cid, "m": [{"role": "user", "content": "doomed"}]})
            delete, variables = DELETE, {"id": cid}
            gone = f"SELECT 1 FROM conversation WHERE id = '{cid}'"
        else:
            saved = await client(CHECKPOINT, {"s": SESSION, "state": session_doc(SESSION)})
            assert saved["checkpointSession"]["userErrors"] == []
            delete, variables = DELETE_SESSION, {"s": SESSION}
            gone = f"SELECT 1 FROM session_state WHERE session_id = '{SESSION}'"
    doomed = await keys.live_refs()
    assert len(doomed) == 1 and next(iter(doomed))[0] == deleted[0], doomed
    async with keys.write_locked():
        async with server.client(token) as client:
            deleting = asyncio.create_task(client.post(delete, variables))
            async with asyncio.timeout(30):
                while await data_rows(database_url, gone):  # noqa: ASYNC110 (another process)
                    await asyncio.sleep(0.02)
            await server.kill()
            with contextlib.suppress(httpx.HTTPError):
                await deleting
        # The crash fell between the delete's commit and its keys' end.
        assert await keys.live_refs() == doomed
    server = await live_servers.restart(server)
    assert await keys.live_refs() == set(), "the deleted data's key outlived the restart"


# -- a key store locked by another session ------------------------------------------------


async def test_a_locked_key_store_is_database_unavailable_not_a_hang(
    live_servers: LiveServers, database_url: str, key_store_env: dict[str, str]
) -> None:
    """Another session holds the key store's table (`LOCK TABLE … IN ACCESS EXCLUSIVE
    MODE`): a createConversation, which must store its new key first, and a delete, which
    destroys its key once committed, waited for it without limit on PostgreSQL (the key
    store's pool had no statement timeout), past the client's own timeout; on SQLite the
    create was INTERNAL, "Unexpected error". Now the create is DATABASE_UNAVAILABLE once the
    statement timeout passes, nothing stored; the delete, committed, answers deleted and
    leaves its key to the next sweep; and both are served again once the lock is gone."""
    env = {
        **key_store_env,
        "CONVOGRAPH_ENCRYPTION_KEY": KEY,
        "CONVOGRAPH_STATEMENT_TIMEOUT_SECONDS": "1",
        "CONVOGRAPH_SQLITE_BUSY_TIMEOUT_MS": "1000",
    }
    server = await live_servers.start(database_url, env=env)
    token = await server.token()
    keys = KeyStoreTable(database_url, key_store_env)
    async with server.client(token) as client:
        doomed = (await client(CREATE, {"title": "doomed"}))["createConversation"]
        doomed = doomed["conversation"]["id"]
        doomed_keys = await keys.live_refs()
        async with keys.write_locked(reads=False):
            response = await client.post(CREATE, {"title": "while locked"})
            assert response.status_code == 200, response.text
            body = response.json()
            assert body["data"] is None, body
            assert [e["extensions"]["code"] for e in body["errors"]] == ["DATABASE_UNAVAILABLE"], (
                body
            )
            deleted = await client(DELETE, {"id": doomed})
            assert deleted["deleteConversation"]["deleted"] is True
        assert await data_rows(database_url, "SELECT 1 FROM conversation") == 0
        assert await keys.live_refs() == doomed_keys, "the key went while the store was locked"
        await server.cli("sweep")
        assert await keys.live_refs() == set(), "the deleted conversation's key outlived a sweep"
        created = (await client(CREATE, {"title": "after"}))["createConversation"]
        assert created["userErrors"] == []
