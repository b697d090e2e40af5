"""Alembic environment: async engine, URL from convograph's settings, batch mode on SQLite."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from graph.settings import Settings
from graph.store.migrate import migration_engine
from graph.store.tables import metadata

config = context.config
settings: Settings | None = config.attributes.get("settings")
url = config.attributes.get("database_url") or (settings or Settings.from_env()).database_url


def _include_object(obj: object, name: str | None, type_: str, *_: object) -> bool:
    # The full-text structures are created by hand in the migrations, per dialect.
    return not (name or "").startswith(("message_fts", "ix_message_search"))


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        include_object=_include_object,
        render_as_batch=connection.dialect.name == "sqlite",
        transaction_per_migration=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    timeout = settings.pool_timeout_seconds if settings is not None else None
    engine = migration_engine(url, connect_timeout=timeout)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
    else:
        asyncio.run(_run_async())
