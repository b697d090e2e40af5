"""Apply Alembic migrations with the URL from settings."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import pool
from sqlalchemy.ext.asyncio import create_async_engine

from .settings import Settings

# A checkout (and an editable install) has migrations/ beside the package; an image
# that installs the package elsewhere says where they are.
MIGRATIONS_DIR = Path(
    os.environ.get("CONVOGRAPH_MIGRATIONS_DIR")
    or Path(__file__).resolve().parent.parent / "migrations"
)


def alembic_config(settings: Settings) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = settings.database_url
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
