"""Alembic commands run on a test's database, for the tests of one migration."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from alembic.config import Config
from sqlalchemy import inspect

from graph.settings import Settings
from graph.store.migrate import alembic_config, migration_engine


def before_encryption(settings: Settings) -> Settings:
    """`settings` with encryption at rest off, for a migration older than it: no database
    written with encryption on was ever at that revision, and the migration's SQL reads the
    message JSON as it is stored (even under CONVOGRAPH_TEST_ENCRYPTION=1)."""
    return settings.replace(encryption_key=None)


async def columns_after(settings: Settings, table: str, run: Callable[[Config], Any]) -> list[str]:
    """Run an Alembic command (`run(config)`) on the database; `table`'s columns after it.

    On the engine `convograph migrate` uses: on a plain aiosqlite engine each DDL statement
    commits alone, and a server running beside the migration (its search index's batch) could
    read the schema half changed."""
    engine = migration_engine(settings.database_url)
    config = alembic_config(settings)

    def sync(connection: Any) -> list[str]:
        config.attributes["connection"] = connection
        run(config)
        return [c["name"] for c in inspect(connection).get_columns(table)]

    try:
        async with engine.connect() as connection:
            columns: list[str] = await connection.run_sync(sync)
            await connection.commit()
    finally:
        await engine.dispose()
    return columns
