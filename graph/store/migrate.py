"""Alembic migrations (shipped inside the package), applied with the URL from settings."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import pool
from sqlalchemy.ext.asyncio import create_async_engine

from graph.settings import Settings

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(settings: Settings) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = settings.database_url
    config.attributes["settings"] = settings
    return config


def _upgrade_sync(connection: object, config: Config) -> None:
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


async def upgrade(settings: Settings) -> None:
    """Upgrade the database to the newest revision (idempotent)."""
    path = settings.sqlite_path
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(settings.database_url, poolclass=pool.NullPool)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_upgrade_sync, alembic_config(settings))
            await connection.commit()
    finally:
        await engine.dispose()


def upgrade_blocking(settings: Settings) -> None:
    asyncio.run(upgrade(settings))


@functools.cache
def head_revisions() -> frozenset[str]:
    """The head revision(s) of the migration scripts this code ships."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return frozenset(ScriptDirectory.from_config(config).get_heads())
