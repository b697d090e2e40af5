"""Revision 0010 drops SQLite's index on the event log's `at` (the sweep prunes by rowid
there) and keeps PostgreSQL's: the index is back after its downgrade, gone after it again,
and then the server logs events and the sweep prunes them. (This code needs the newest
schema: it no longer runs at the revision before 0010.)"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, inspect

from graph.settings import Settings
from graph.store.retention import sweep
from graph.store.tables import event_log as L
from tests.conftest import GraphQLClient, Server
from tests.migrations import columns_after
from tests.operations import append, create
from tests.test_event_resume import aged, logged


async def indexes(server: Server) -> set[str]:
    async with server.services.db.write() as conn:

        def names(sync: Connection) -> set[str]:
            return {str(i["name"]) for i in inspect(sync).get_indexes("event_log")}

        return await conn.run_sync(names)


async def test_the_sweep_prunes_the_log_before_the_revision_and_after_it(
    server: Server, gql: GraphQLClient, settings: Settings
) -> None:
    sqlite = server.services.db.is_sqlite
    assert ("ix_event_log_at" in await indexes(server)) is not sqlite
    for target in ("0009", "head"):

        def migrate(config: Config, target: str = target) -> None:
            (command.downgrade if target == "0009" else command.upgrade)(config, target)

        await columns_after(settings, "event_log", migrate)
        expected = target == "0009" or not sqlite
        assert ("ix_event_log_at" in await indexes(server)) is expected
        if target == "0009":
            continue
        root = await create(gql)
        for text in ("one", "two", "three"):
            await append(gql, root, text)
        positions = await logged(server, root)
        now = await aged(server, L.c.root_id == root, L.c.position < positions[-1])
        await sweep(server.services.uow, now=now)
        assert await logged(server, root) == positions[-1:]
