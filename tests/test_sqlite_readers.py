"""SQLite's read connections wait between reads for the next one (store/sqlite_readers.py):
reused only when a read ended cleanly with no transaction open, and counted as idle."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

from graph.services import Services
from graph.settings import Settings
from graph.store.connections import driver_connection
from tests.conftest import GraphQLClient, Server
from tests.operations import CREATE
from tests.test_http import serving

LIST = "{ conversations(first: 5) { totalCount } }"


@pytest.fixture(autouse=True)
def sqlite_only(server: Server) -> None:
    if not server.settings.is_sqlite:
        pytest.skip("SQLite's readers")


def checked_out(services: Services) -> tuple[int, int]:
    """(connections the reader pool has given out, of which the metrics count in use)."""
    pool = services.db.reader.pool
    return pool.checkedout(), services.db.pool_stats()["reader"][0]  # type: ignore[attr-defined]


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
        assert not driver_connection(conn).in_transaction
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
        assert checked_out(server.services)[1] == 0
