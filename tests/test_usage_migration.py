"""Revision 0009 fills each conversation's stored bytes from the rows stored before it.

Records are written through the API at the newest revision; the database is then taken
down to 0008 (the columns and the usage table are dropped) and up again, and the stored
bytes must come out as the API kept them: the migration's byte count (SQLite's
length(CAST … AS BLOB), PostgreSQL's octet_length) is the UTF-8 length the API counts.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from graph.settings import Settings
from tests.conftest import GraphQLClient
from tests.migrations import before_encryption, columns_after
from tests.operations import create
from tests.test_quotas import (
    APPEND,
    DELEGATE,
    FIGURES,
    REPLACE,
    SNAPSHOT,
    said,
    serving_as,
    size_of,
)


async def seed(gql: GraphQLClient) -> int:
    """Messages, a shorter replace, a snapshot and a child transcript; the bytes they hold."""
    first = await create(gql)
    messages = [said("plain"), said("héllo wörld ☕"), said("nul \x00 inside")]
    await gql(APPEND, {"id": first, "messages": messages})
    kept = messages[:2]
    await gql(REPLACE, {"id": first, "messages": kept})
    snapshot = [said("before compaction: ünïcode")]
    await gql(SNAPSHOT, {"id": first, "messages": snapshot})
    child = (await gql(DELEGATE, {"id": first}))["createDelegation"]["delegation"]
    work = [said("child work")]
    await gql(APPEND, {"id": child["childConversation"]["id"], "messages": work})
    await create(gql)  # an empty one
    return size_of(kept) + size_of(snapshot) + 2 + size_of(work)


async def test_the_migration_fills_the_stored_bytes_the_api_keeps(settings: Settings) -> None:
    settings = before_encryption(settings)
    async with serving_as(settings, "site:old") as (_, gql):
        stored = await seed(gql)
        assert (await gql(FIGURES))["workspaceFigures"] == {"messages": 3, "storedBytes": stored}

    def down(config: Config) -> None:
        command.downgrade(config, "0008")

    def up(config: Config) -> None:
        command.upgrade(config, "head")

    columns = await columns_after(settings, "conversation", down)
    assert "message_bytes" not in columns and "snapshot_bytes" not in columns
    columns = await columns_after(settings, "conversation", up)
    assert "message_bytes" in columns and "snapshot_bytes" in columns

    async with serving_as(settings, "site:old") as (_, gql):
        assert (await gql(FIGURES))["workspaceFigures"] == {"messages": 3, "storedBytes": stored}
