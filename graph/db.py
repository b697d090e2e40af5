"""Engines and connections for SQLite (aiosqlite) and PostgreSQL (asyncpg).

SQLite allows one writer at a time. Writes go through an engine whose pool holds
a single connection that opens its transactions with BEGIN IMMEDIATE, so
concurrent writers queue in the pool instead of failing with "database is
locked"; reads use a separate pool and see committed data through WAL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from . import sqlite_inline
from .settings import Settings


def _sqlite_engine(settings: Settings, *, writer: bool) -> AsyncEngine:
    path = settings.sqlite_path
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {}
    if settings.sqlite_inline:
        target = str(path) if path is not None else ":memory:"

        async def creator() -> Any:
            return sqlite_inline.connect(target)

        options["async_creator"] = creator
    else:
        options["connect_args"] = {"check_same_thread": False}
    engine = create_async_engine(
        settings.database_url,
        poolclass=AsyncAdaptedQueuePool,
        pool_size=1 if writer else max(1, settings.pool_size),
        max_overflow=0,
        pool_timeout=settings.pool_timeout_seconds,
        # Writes always end in COMMIT or ROLLBACK and reads never open a transaction,
        # so the rollback-on-return would be a wasted round trip.
        pool_reset_on_return=None,
        **options,
    )
    busy = settings.sqlite_busy_timeout_ms
    inline = settings.sqlite_inline

    @event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        if not inline:
            # Autocommit at the driver level: the "begin" hook below decides how a
            # transaction starts, instead of pysqlite's implicit BEGIN.
            dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(busy)}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front: a read-then-write transaction can
        # then never fail half-way on lock upgrade. Readers open no transaction: each
        # statement reads its own committed snapshot (WAL).
        if writer:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _postgres_engine(settings: Settings) -> AsyncEngine:
    return create_async_engine(
        settings.database_url,
        pool_size=settings.pool_size,
        max_overflow=settings.pool_size,
        pool_timeout=settings.pool_timeout_seconds,
        pool_pre_ping=True,
        connect_args={
            "timeout": settings.pool_timeout_seconds,
            "command_timeout": settings.statement_timeout_seconds,
            "server_settings": {
                "statement_timeout": str(int(settings.statement_timeout_seconds * 1000))
            },
        },
    )


class Database:
    """The process's engines: `write()` for a transaction, `read()` for reads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.is_sqlite = settings.is_sqlite
        if self.is_sqlite:
            self.writer = _sqlite_engine(settings, writer=True)
            self.reader = _sqlite_engine(settings, writer=False)
        else:
            self.writer = self.reader = _postgres_engine(settings)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        async with self.writer.begin() as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.reader.connect() as conn:
            yield conn

    async def ping(self) -> bool:
        try:
            async with self.read() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except Exception:
            return False

    async def dispose(self) -> None:
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()
