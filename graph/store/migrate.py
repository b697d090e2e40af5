"""Alembic migrations (shipped inside the package), applied with the URL from settings."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import os
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import event, make_url, pool, text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from graph.settings import Settings, SettingsError
from graph.store.compression import Compression
from graph.store.migration_state import REVISIONS

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# PostgreSQL's advisory lock that upgrades take, one database at a time.
_LOCK_KEY = zlib.crc32(b"convograph migrate")


def alembic_config(settings: Settings) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["database_url"] = settings.database_url
    config.attributes["settings"] = settings
    return config


def migration_engine(url: str, *, connect_timeout: float | None = None) -> AsyncEngine:
    """An engine for migrations. On SQLite its transactions are SQLite's own, DDL included
    (Python's driver begins one only before a data change: a DROP or CREATE of a view or
    trigger committed alone, and a migration interrupted halfway left the schema half
    changed at the old revision), and take the write lock at their first statement (BEGIN
    IMMEDIATE: Alembic reads the revision first, and a server's write committed between
    that read and the migration's first change failed the migration with "database is
    locked", at once, whatever the busy timeout); and its connections know
    convograph_inflate, which the search index's delete trigger calls (a migration may
    delete messages).

    On PostgreSQL, connecting waits `connect_timeout` at most (CONVOGRAPH_POOL_TIMEOUT_SECONDS,
    as the server's connections do; asyncpg's own default is a minute); its statements have
    no timeout: a migration may rewrite a large table, or wait for another one to finish."""
    backend = make_url(url).get_backend_name()
    connect_args = (
        {"timeout": connect_timeout} if backend == "postgresql" and connect_timeout else {}
    )
    engine = create_async_engine(url, poolclass=pool.NullPool, connect_args=connect_args)
    if engine.dialect.name != "sqlite":
        return engine
    reads = Compression(Path(engine.url.database), enabled=False) if engine.url.database else None

    @event.listens_for(engine.sync_engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no BEGIN of the driver's own
        if reads is not None:
            reads.register(dbapi_connection)

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


class DowngradeRefused(ValueError):
    """A downgrade whose target is no revision a release runs on."""


def downgrade_target(settings: Settings, revision: str) -> str:
    """The id of the migration script `revision` names, where a downgrade to it stops.

    Refused: Alembic's `base` (and `REV@base`), below the first revision, where the first
    migration's downgrade drops every table and every conversation with it: no release runs
    on that, and an operator who wants the data gone deletes the database knowingly. An id
    that names no script (relative steps such as `-1` included) is Alembic's CommandError."""
    script = ScriptDirectory.from_config(alembic_config(settings)).get_revision(revision)
    if script is None:
        raise DowngradeRefused(
            f"cannot downgrade to {revision!r}: below the first revision every table is "
            "dropped, with all the data; name a revision (e.g. 0016)"
        )
    return script.revision


class DatabaseAhead(SettingsError):
    """The database is at a revision this release does not know: a later one migrated it."""


def _check_not_ahead(connection: Any) -> None:
    """Refuse, in one line, to upgrade a database a later release migrated: Alembic's own
    error there is a traceback about a revision it cannot locate, and a replica of the
    previous release that migrates on start would stop on it."""
    current = MigrationContext.configure(connection).get_current_heads()
    if unknown := sorted(set(current) - REVISIONS):
        raise DatabaseAhead(
            f"CONVOGRAPH_DATABASE_URL: the database is at revision {', '.join(unknown)}, which "
            "this release does not know: a later release migrated it. Serve it with "
            "--no-migrate (CONVOGRAPH_MIGRATE_ON_START=false), or run the later release"
        )


def _run_sync(connection: Any, config: Config, revision: str, down: bool) -> None:
    config.attributes["connection"] = connection
    if down:
        command.downgrade(config, revision)
    else:
        _check_not_ahead(connection)
        command.upgrade(config, revision)


async def upgrade(settings: Settings, *, downgrade_to: str | None = None) -> str:
    """Upgrade the database to the newest revision (idempotent); or, with `downgrade_to`,
    downgrade it to that revision (to run a release before it on the data). The revision it
    went to: "head", or the id of the script `downgrade_to` names (`0016@head`: 0018)."""
    path = settings.sqlite_path
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = migration_engine(settings.database_url, connect_timeout=settings.pool_timeout_seconds)
    if downgrade_to is None:
        revision, down = "head", False
    else:
        revision, down = downgrade_target(settings, downgrade_to), True
    try:
        async with _one_at_a_time(settings, engine), engine.connect() as connection:
            await connection.run_sync(_run_sync, alembic_config(settings), revision, down)
            await connection.commit()
    finally:
        await engine.dispose()
    return revision


@contextlib.asynccontextmanager
async def _one_at_a_time(settings: Settings, engine: AsyncEngine) -> AsyncIterator[None]:
    """Upgrades of one database run one after another: replicas started together, each
    migrating on start, would otherwise both create the same tables, and one would fail.
    The second finds the database at the newest revision and does nothing. PostgreSQL: an
    advisory lock, held by a connection of its own. SQLite: a lock on the database's
    directory (not on its files: closing a descriptor of the database file would drop the
    locks SQLite holds on it in this process)."""
    if not settings.is_sqlite:
        async with engine.connect() as holder:
            await holder.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _LOCK_KEY})
            await holder.commit()
            yield  # the lock goes with the holder's session
        return
    path = settings.sqlite_path
    if path is None:  # in memory: this process's alone
        yield
        return
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        await asyncio.to_thread(fcntl.flock, directory, fcntl.LOCK_EX)
        yield
    finally:
        os.close(directory)


def upgrade_blocking(settings: Settings, *, downgrade_to: str | None = None) -> str:
    return asyncio.run(upgrade(settings, downgrade_to=downgrade_to))


@functools.cache
def head_revisions() -> frozenset[str]:
    """The head revision(s) of the migration scripts this code ships."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return frozenset(ScriptDirectory.from_config(config).get_heads())
