"""Engines and connections for SQLite (aiosqlite) and PostgreSQL (asyncpg).

SQLite allows one writer at a time. Writes take an asyncio.Lock, then the writer
pool's single connection, in transactions opened with BEGIN IMMEDIATE on the
driver, so concurrent writers queue on the lock instead of failing with
"database is locked" (and skip SQLAlchemy's transaction machinery); reads use a
separate pool and see committed data through WAL. A query's reads share one Snapshot.
"""

from __future__ import annotations

import asyncio
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

        in_thread = settings.sqlite_commit_in_thread

        async def creator() -> Any:
            return sqlite_inline.connect(target, commit_in_thread=in_thread)

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
            # Autocommit at the driver level: SQLiteWriter decides how a transaction
            # starts, instead of pysqlite's implicit BEGIN.
            dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={int(busy)}")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    # No BEGIN from SQLAlchemy (the dialect's do_begin is a no-op): the writer's
    # transactions are opened by SQLiteWriter, and a reader opens one only for a query's
    # Snapshot: other reads see the latest commit at each statement (WAL).
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


class SQLiteWriter:
    """The single SQLite writer: one transaction at a time, on one long-lived connection.

    The connection stays checked out between transactions: a pool checkout and return per
    write cost about 6% of an append's CPU. It is replaced after a failure left its state
    unknown (see _end).
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._lock = asyncio.Lock()
        self._conn: AsyncConnection | None = None

    @property
    def in_use(self) -> int:
        return 1 if self._lock.locked() else 0

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        async with self._lock:
            conn = await self._connection()
            raw = driver_connection(conn)
            # IMMEDIATE takes the write lock up front: a read-then-write transaction can
            # then never fail half-way on lock upgrade.
            await (await raw.execute("BEGIN IMMEDIATE")).close()
            try:
                yield conn
            except BaseException:
                await _end(conn, raw, commit=False)
                raise
            await _end(conn, raw, commit=True)

    async def _connection(self) -> AsyncConnection:
        conn = self._conn
        if conn is not None and not conn.invalidated:
            return conn
        self._conn = None
        if conn is not None:
            await conn.close()  # hands the invalidated connection's pool slot back
        self._conn = await self.engine.connect()
        return self._conn

    async def close(self) -> None:
        async with self._lock:
            if self._conn is not None:
                await self._conn.close()
                self._conn = None


async def _end(conn: AsyncConnection, raw: Any, *, commit: bool) -> None:
    # Statements run through SQLAlchemy made it track a transaction (on our BEGIN): ending
    # it there ends both; the repository's raw statements (repository/driver.py) leave none.
    try:
        if conn.in_transaction():
            await (conn.commit() if commit else conn.rollback())
        else:
            await (raw.commit() if commit else raw.rollback())
    except BaseException:
        # A connection whose transaction state is unknown is not reused: closing the driver
        # connection rolls back whatever is left, and the pool opens a new one.
        await conn.invalidate()
        raise


class Snapshot:
    """One connection in one read transaction for all the reads of a query, opened on first use.

    The query's loader batches and resolvers then read one committed state, as a single
    SELECT would (SQLite: one WAL snapshot; PostgreSQL: REPEATABLE READ, read only), and pay
    one pool checkout instead of one each. Where a statement can yield the event loop
    (asyncpg, aiosqlite's thread) the connection is used by one resolver at a time; inline
    SQLite statements (sqlite_inline) never yield, so there they cannot interleave.
    """

    def __init__(self, engine: AsyncEngine, *, sqlite: bool, exclusive: bool) -> None:
        self._engine = engine
        self._sqlite = sqlite
        self._conn: AsyncConnection | None = None
        self._opening = asyncio.Lock()
        self._in_use = asyncio.Lock() if exclusive else None

    @asynccontextmanager
    async def use(self) -> AsyncIterator[AsyncConnection]:
        conn = self._conn or await self._open()
        if self._in_use is None:
            yield conn
            return
        async with self._in_use:
            yield conn

    async def _open(self) -> AsyncConnection:
        async with self._opening:
            if self._conn is None:
                conn = await self._engine.connect()
                try:
                    if self._sqlite:
                        await (await driver_connection(conn).execute("BEGIN")).close()
                    else:
                        await conn.execution_options(
                            isolation_level="REPEATABLE READ", postgresql_readonly=True
                        )
                        await conn.begin()
                except BaseException:
                    await conn.close()
                    raise
                self._conn = conn
        return self._conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await _end(conn, driver_connection(conn), commit=False)
            finally:
                await conn.close()


def driver_connection(conn: AsyncConnection) -> Any:
    """The connection's driver connection (sqlite_inline's, aiosqlite's or asyncpg's)."""
    return conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]


class Database:
    """The process's engines: `write()` for a transaction, `read()` for reads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.is_sqlite = settings.is_sqlite
        self._sqlite_writer: SQLiteWriter | None = None
        if self.is_sqlite:
            self.writer = _sqlite_engine(settings, writer=True)
            self.reader = _sqlite_engine(settings, writer=False)
            self._sqlite_writer = SQLiteWriter(self.writer)
        else:
            self.writer = self.reader = _postgres_engine(settings)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction: committed when the block ends, rolled back if it raises."""
        if self._sqlite_writer is not None:
            async with self._sqlite_writer.transaction() as conn:
                yield conn
            return
        async with self.writer.begin() as conn:
            yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        async with self.reader.connect() as conn:
            yield conn

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Snapshot]:
        """One read transaction for a query's reads (see Snapshot), ended when the block ends."""
        inline = self.is_sqlite and self.settings.sqlite_inline
        snapshot = Snapshot(self.reader, sqlite=self.is_sqlite, exclusive=not inline)
        try:
            yield snapshot
        finally:
            await snapshot.close()

    async def ping(self) -> bool:
        try:
            async with self.read() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except Exception:
            return False

    def writer_in_use(self) -> int | None:
        """Connections inside a write transaction (SQLite's writer keeps its one open)."""
        return self._sqlite_writer.in_use if self._sqlite_writer is not None else None

    async def dispose(self) -> None:
        if self._sqlite_writer is not None:
            await self._sqlite_writer.close()
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()
