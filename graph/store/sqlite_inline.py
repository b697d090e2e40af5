"""An aiosqlite-shaped connection that runs sqlite3 calls inline, on the event loop.

aiosqlite hands every call (cursor, execute, fetch, close, commit) to a worker thread and
back: about 20 thread hops for one authenticated append, which cost more CPU than the
statements themselves (bench/ measures it). SQLite statements here take microseconds, so
running them inline is cheaper than the hand-offs. The commit waits for fsync: inline by
default (on an SSD a thread hop costs more than the fsync), or in a worker thread
(`CONVOGRAPH_SQLITE_COMMIT_IN_THREAD`) where fsync is slow enough that other requests
should go on meanwhile. The writer never waits inside SQLite for another process's lock:
db.py sets its busy_timeout to 0 and retries BEGIN IMMEDIATE with asyncio sleeps.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable
from typing import Any


class InlineCursor:
    __slots__ = ("_cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *_: object) -> None:
        self._cursor.close()

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def execute(self, sql: str, parameters: Any = ()) -> InlineCursor:
        self._cursor.execute(sql, parameters)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> InlineCursor:
        self._cursor.executemany(sql, parameters)
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(self._cursor.arraysize if size is None else size)

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()


class InlineConnection:
    """What SQLAlchemy's aiosqlite adapter uses of an aiosqlite.Connection."""

    def __init__(self, connection: sqlite3.Connection, *, commit_in_thread: bool) -> None:
        self._connection = connection
        self._commit_in_thread = commit_in_thread

    @property
    def isolation_level(self) -> str | None:
        return self._connection.isolation_level

    @property
    def in_transaction(self) -> bool:
        return self._connection.in_transaction

    def cursor(self) -> InlineCursor:
        return InlineCursor(self._connection.cursor())

    # The statements of store/sql.py, called as plain functions: an awaitable per call (the
    # cursor's execute, fetch and close) would be a coroutine each, for nothing to wait on.
    def rows(self, sql: str, parameters: Any) -> list[Any]:
        """Run `sql`; the rows it returns."""
        cursor = self._connection.execute(sql, parameters)
        try:
            return cursor.fetchall()
        finally:
            cursor.close()

    def effect(self, sql: str, parameters: Any) -> int:
        """Run `sql` for its effect; the number of rows it changed."""
        cursor = self._connection.execute(sql, parameters)
        count = cursor.rowcount
        cursor.close()
        return count

    def effect_many(self, sql: str, parameters: Iterable[Any]) -> None:
        """Run `sql` once per parameter set."""
        self._connection.executemany(sql, parameters).close()

    async def execute(self, sql: str, parameters: Any = ()) -> InlineCursor:
        return await self.cursor().execute(sql, parameters)

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> InlineCursor:
        return await self.cursor().executemany(sql, parameters)

    async def commit(self) -> None:
        if self._commit_in_thread:
            await asyncio.to_thread(self._connection.commit)
        else:
            self._connection.commit()

    async def rollback(self) -> None:
        self._connection.rollback()

    async def close(self) -> None:
        self._connection.close()

    def stop(self) -> None:
        """Close at once: SQLAlchemy's aiosqlite adapter calls this (aiosqlite's way to end
        its thread) to terminate a connection whose close was cancelled, as a Ctrl-C while
        a command waits for the write lock cancels it; without it, a traceback."""
        self._connection.close()

    def data_version(self) -> int:
        """SQLite's `PRAGMA data_version` of this connection: it moves when another
        connection commits to the file, never on this one's own commits."""
        row = self._connection.execute("PRAGMA data_version").fetchone()
        return int(row[0])

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._connection.create_function(*args, **kwargs)


def connect(path: str, *, commit_in_thread: bool = False) -> InlineConnection:
    # isolation_level=None: db.py issues BEGIN IMMEDIATE itself.
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    return InlineConnection(connection, commit_in_thread=commit_in_thread)
