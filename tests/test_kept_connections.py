"""Connections wait between uses for the next one (store/kept_connections.py): SQLite's
readers, and every PostgreSQL connection; reused only when a use ended cleanly with no
transaction open, and counted as idle."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from graph.services import Services
from graph.settings import Settings
from graph.store.connections import driver_connection, in_driver_transaction
from tests.conftest import GraphQLClient, Server
from tests.operations import APPEND, CREATE
from tests.test_http import serving

LIST = "{ conversations(first: 5) { totalCount } }"


def checked_out(services: Services) -> tuple[int, int]:
    """(connections the reading pool has given out, of which the metrics count in use)."""
    db = services.db
    pool = db.reader.pool
    name = "reader" if db.is_sqlite else "shared"
    return pool.checkedout(), db.pool_stats()[name][0]  # type: ignore[attr-defined]


async def test_requests_reuse_one_reader_and_it_counts_as_idle(
    server: Server, gql: GraphQLClient
) -> None:
    await gql(CREATE)
    for _ in range(5):
        assert (await gql(LIST))["conversations"]["totalCount"] == 1
    assert checked_out(server.services) == (1, 0)


async def test_a_read_left_in_a_transaction_or_failed_is_not_reused(
    server: Server, gql: GraphQLClient
) -> None:
    db = server.services.db
    async with db.read() as conn:
        await driver_connection(conn).execute("BEGIN")
        left_open = conn
    with pytest.raises(RuntimeError):
        async with db.read() as conn:
            failed = conn
            raise RuntimeError("a read that fails")
    assert checked_out(server.services) == (0, 0)
    async with db.read() as conn:
        assert conn is not left_open and conn is not failed
        assert not in_driver_transaction(driver_connection(conn))
        assert (await conn.execute(text("SELECT 1"))).scalar() == 1
    # A read through SQLAlchemy's own execution leaves its (autobegun) transaction: dropped too.
    assert checked_out(server.services) == (0, 0)
    await gql(CREATE)
    assert (await gql(LIST))["conversations"]["totalCount"] == 1
    assert checked_out(server.services) == (1, 0)


async def test_a_reused_reader_sees_each_new_commit(server: Server, gql: GraphQLClient) -> None:
    for count in range(1, 4):
        await gql(CREATE)
        assert (await gql(LIST))["conversations"]["totalCount"] == count


async def test_more_concurrent_queries_than_connections_all_answer(settings: Settings) -> None:
    # A connection a read ends with goes to the reads waiting for the pool, not to the idle
    # list, where they would not see it (and time out).
    settings = settings.replace(pool_size=2, pool_timeout_seconds=3)
    async with serving(settings) as (server, http):
        gql = GraphQLClient(http, await server.token())
        cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
        read = "query($id: ID!) { conversation(id: $id) { version transcript } }"
        answers = await asyncio.gather(*(gql(read, {"id": cid}) for _ in range(12)))
        assert [a["conversation"]["version"] for a in answers] == [1] * 12
        kept, in_use = checked_out(server.services)
        # No more kept than the pool keeps open when idle (its overflow is closed).
        assert in_use == 0 and kept <= 2


async def test_a_write_that_raises_leaves_nothing_and_its_connection_in_no_transaction(
    server: Server, gql: GraphQLClient
) -> None:
    await gql(CREATE)
    db = server.services.db
    with pytest.raises(RuntimeError):
        async with db.write() as conn:
            await conn.execute(text("UPDATE conversation SET title = 'not kept'"))
            raise RuntimeError("a write that fails")
    async with db.write() as conn:
        titles = (await conn.execute(text("SELECT title FROM conversation"))).scalars().all()
    assert titles and "not kept" not in titles
    async with db.read() as conn:
        assert not in_driver_transaction(driver_connection(conn))


async def test_a_refused_write_keeps_its_connection(server: Server, gql: GraphQLClient) -> None:
    cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
    stale = await gql(APPEND, {"id": cid, "m": [{"role": "user", "content": "x"}], "v": 7})
    assert stale["appendMessages"]["userErrors"][0]["code"] == "CONFLICT"
    # Rolled back, then kept: still the one connection, and none in use.
    assert checked_out(server.services) == (1, 0)
