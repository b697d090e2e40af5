"""`convograph migrate` on a SQLite file a server is writing to.

A migration's transaction takes SQLite's write lock at its first statement: Alembic reads the
revision first, and a write the server committed between that read and the migration's first
change made SQLite refuse the change at once ("database is locked": a transaction that read
cannot write over what another committed since), whatever the busy timeout. The server's
writes wait for the migration instead (their own busy timeout).
"""

from __future__ import annotations

import contextlib
import sqlite3

import pytest
from sqlalchemy import text

from graph.settings import Settings
from graph.store.migrate import migration_engine


async def test_a_migration_holds_the_write_lock_from_its_first_read(settings: Settings) -> None:
    path = settings.sqlite_path
    if path is None:
        pytest.skip("SQLite's file lock: PostgreSQL migrations take an advisory lock")
    engine = migration_engine(settings.database_url)
    try:
        async with engine.connect() as migration:
            await migration.execute(text("SELECT version_num FROM alembic_version"))
            server = sqlite3.connect(path, timeout=0)  # a write beside it, not waiting
            with (
                contextlib.closing(server),
                pytest.raises(sqlite3.OperationalError, match="locked"),
            ):
                server.execute("BEGIN IMMEDIATE")
            await migration.execute(text("CREATE TABLE made_by_a_migration (x INTEGER)"))
            await migration.commit()
        with contextlib.closing(sqlite3.connect(path)) as after:
            made = "SELECT count(*) FROM sqlite_schema WHERE name = 'made_by_a_migration'"
            assert after.execute(made).fetchone() == (1,)
    finally:
        await engine.dispose()
