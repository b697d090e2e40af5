"""Revision 0011 (SQLite) replaces the list of messages waiting for the full-text index with
the id up to which it has indexed: messages indexed before it and messages still waiting are
found after it, after its downgrade (which lists the waiting ones again) and after it again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from alembic import command

from graph.settings import Settings
from tests.conftest import GraphQLClient, Server
from tests.migrations import columns_after
from tests.operations import append
from tests.test_search_index import assert_index_consistent, found, new


def waiting(path: Path) -> set[int]:
    with sqlite3.connect(path) as db:
        return {int(r[0]) for r in db.execute("SELECT id FROM message_fts_pending")}


def last_message(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT max(id) FROM message").fetchone()[0])


async def test_indexed_and_waiting_messages_are_found_across_the_revision(
    server: Server, gql: GraphQLClient, settings: Settings
) -> None:
    path = settings.sqlite_path
    if path is None:
        pytest.skip("PostgreSQL keeps its own index; the revision does nothing there")
    index = server.services.search_index
    cid = await new(gql)
    await append(gql, cid, "kiwi indexed")
    assert await found(gql, "kiwi") == {cid}
    # No batch runs from here (a search does not index either): the next message stays
    # above the mark.
    index.enabled = False
    await append(gql, cid, "lime waiting")
    assert await found(gql, "lime") == set()

    await columns_after(settings, "message", lambda config: command.downgrade(config, "0010"))
    assert waiting(path) == {last_message(path)}

    await columns_after(settings, "message", lambda config: command.upgrade(config, "head"))
    assert await found(gql, "lime") == {cid}  # the upgrade indexed what was waiting
    assert await found(gql, "kiwi") == {cid}
    index.enabled = True
    await append(gql, cid, "mango after")
    assert await found(gql, "mango") == {cid}
    assert_index_consistent(settings)
