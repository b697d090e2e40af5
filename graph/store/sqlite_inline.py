"""An aiosqlite-shaped connection that runs sqlite3 calls inline, on the event loop.

aiosqlite hands every call (cursor, execute, fetch, close, commit) to a worker thread and
back: about 20 thread hops for one authenticated append, which cost more CPU than the
statements themselves (bench/ measures it). SQLite statements here take microseconds, so
running them inline is cheaper than the hand-offs. The commit waits for fsync: inline by
default (on an SSD a thread hop costs more than the fsync), or in a worker thread
(`CONVOGRAPH_SQLITE_COMMIT_IN_THREAD`) where fsync is slow enough that other requests
should go on meanwhile. A statement whose work grows with what is stored (a delete that
cascades to a conversation's messages) runs in a worker thread instead (`off_loop`), with
its transaction's COMMIT. The writer never waits inside SQLite for another process's lock:
db.py sets its busy_timeout to 0 and retries BEGIN IMMEDIATE with asyncio sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


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


class ThreadCursor(InlineCursor):
    """A cursor whose statements run in a worker thread (`InlineConnection.off_loop`)."""

    __slots__ = ("_owner",)

    def __init__(self, cursor: sqlite3.Cursor, owner: InlineConnection) -> None:
        super().__init__(cursor)
        self._owner = owner

    async def execute(self, sql: str, parameters: Any = ()) -> InlineCursor:
        await self._owner.in_thread(self._cursor.execute, sql, parameters, heavy=True)
        return self

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> InlineCursor:
        await self._owner.in_thread(self._cursor.executemany, sql, parameters, heavy=True)
        return self

    async def fetchall(self) -> list[Any]:
        rows: list[Any] = await self._owner.in_thread(self._cursor.fetchall)
        return rows


class InlineConnection:
    """What SQLAlchemy's aiosqlite adapter uses of an aiosqlite.Connection."""

    def __init__(self, connection: sqlite3.Connection, *, commit_in_thread: bool) -> None:
        self._connection = connection
        self._commit_in_thread = commit_in_thread
        self._off_loop = False
        # A worker thread holds the connection: nothing may ask it anything meanwhile.
        self.busy = False
        # The open transaction ran a statement in a worker thread: its COMMIT, which writes
        # what that statement changed, goes there too.
        self._heavy = False

    @contextlib.contextmanager
    def off_loop(self) -> Iterator[None]:
        """The statements run meanwhile go to a worker thread, and the transaction's COMMIT
        after them: for work that grows with what is stored, which on the event loop would
        hold every other request of the process for all of it."""
        self._off_loop = True
        try:
            yield
        finally:
            self._off_loop = False

    async def in_thread(self, call: Callable[..., T], *args: Any, heavy: bool = False) -> T:
        """`call(*args)` in a worker thread. Cancelled meanwhile, it waits for the call to
        end all the same: SQLite's work goes on in the thread, and the connection is the
        thread's until then (a rollback would wait for it on the event loop)."""
        self.busy = True
        self._heavy = self._heavy or heavy
        work = asyncio.ensure_future(asyncio.to_thread(call, *args))
        work.add_done_callback(self._idle)
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            await asyncio.wait([work])
            raise

    def _idle(self, _: object) -> None:
        self.busy = False

    @property
    def isolation_level(self) -> str | None:
        return self._connection.isolation_level

    @property
    def in_transaction(self) -> bool:
        return self._connection.in_transaction

    def cursor(self) -> InlineCursor:
        if self._off_loop:
            return ThreadCursor(self._connection.cursor(), self)
        return InlineCursor(self._connection.cursor())

    async def execute(self, sql: str, parameters: Any = ()) -> InlineCursor:
        return await self.cursor().execute(sql, parameters)

    async def executemany(self, sql: str, parameters: Iterable[Any]) -> InlineCursor:
        return await self.cursor().executemany(sql, parameters)

    async def commit(self) -> None:
        if self._commit_in_thread or self._heavy:
            self._heavy = False
            await self.in_thread(self._connection.commit)
        else:
            self._connection.commit()

    async def rollback(self) -> None:
        self._heavy = False
        self._connection.rollback()

    async def close(self) -> None:
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
