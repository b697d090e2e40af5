"""Connections kept checked out between uses, for the next use.

A checkout from SQLAlchemy's pool and its return cost about as much as the token lookup
that every request reads with (greenlet hops and pool events, both ways; on PostgreSQL
also setting the isolation level). A connection whose last use ended cleanly, with no
transaction left open, needs nothing done before the next: so a use ends by leaving its
connection here, unless it failed or left a transaction open (that connection goes back to
the pool, its transaction rolled back first), or other uses wait for the pool (it is
theirs), or the pool's size are kept already (its overflow is closed on return, as the
pool itself does). The pool's metrics count them as idle.

SQLite keeps its readers here: none leaves a transaction open (a ReadTransaction ends its
own; the pool does no reset on return either, see db.py), and an in-process file connection
cannot drop. PostgreSQL keeps every connection of its pool here (`KeptPostgresConnections`),
in autocommit, its transactions begun and ended on the driver (db.py). Unlike a file, a
server connection can drop while kept: one kept for as long as the idle ping's interval is
pinged before use (idle_ping.py says why), and when a statement fails as a disconnect,
every connection kept then goes back to the pool, which replaces the connections it had.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy.exc import PendingRollbackError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from graph.store import pg_driver
from graph.store.connections import (
    driver_connection,
    end,
    in_driver_transaction,
    open_driver_connection,
    run,
)


class KeptConnections:
    """The connections of one engine kept between uses (SQLite's readers)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._idle: list[tuple[AsyncConnection, float]] = []  # (connection, kept since)
        self._waiting = 0  # uses waiting for a checkout from the pool
        # As many as the pool keeps open when idle: its overflow is closed on return.
        pool: Any = engine.sync_engine.pool
        self._most: int = pool.size()

    @property
    def idle(self) -> int:
        return len(self._idle)

    @asynccontextmanager
    async def lend(self) -> AsyncIterator[AsyncConnection]:
        """A connection for the statements of one block, given back when it ends (kept
        only if the block did not raise)."""
        conn = await self.take()
        clean = False
        try:
            yield conn
            clean = True
        finally:
            await self.give_back(conn, clean=clean)

    async def take(self) -> AsyncConnection:
        """A connection: the one left last, or a new checkout."""
        while self._idle:
            conn, since = self._idle.pop()
            if conn.closed or conn.invalidated:
                continue
            if await self._usable(conn, since):
                return conn
        self._waiting += 1
        try:
            conn = await self.engine.connect()
        finally:
            self._waiting -= 1
        try:
            await self._fresh(conn)
        except BaseException:
            await conn.close()
            raise
        return conn

    async def give_back(self, conn: AsyncConnection, *, clean: bool) -> None:
        """Keep `conn` for the next use if its use was `clean` (it ended without an error)
        and left no transaction open; otherwise, while other uses wait for the pool, or
        with the pool's size kept already, return it to the pool."""
        raw = open_driver_connection(conn)
        open_transaction = raw is not None and (in_driver_transaction(raw) or conn.in_transaction())
        if (
            clean
            and raw is not None
            and not open_transaction
            and not self._waiting
            and len(self._idle) < self._most
        ):
            self._idle.append((conn, time.monotonic()))
            return
        if open_transaction:
            # Ended here: the pool would hand it out still inside that transaction (it
            # resets nothing on return for SQLite, and sees no transaction of the driver's
            # on PostgreSQL). A failed rollback invalidates the connection.
            with contextlib.suppress(Exception):
                await self.end(conn, commit=False)
        await conn.close()

    async def close(self) -> None:
        """Return every kept connection to the pool (before the engine is disposed)."""
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            await conn.close()

    async def end(self, conn: AsyncConnection, *, commit: bool) -> None:
        """Commit or roll back the transaction open on `conn`."""
        await end(conn, open_driver_connection(conn), commit=commit)

    async def begin_reads(self, conn: AsyncConnection) -> None:
        """Begin a transaction for reads that share one committed state."""
        run(driver_connection(conn), "BEGIN")

    async def _fresh(self, conn: AsyncConnection) -> None:
        """Make a connection just checked out from the pool ready for use."""

    async def _usable(self, conn: AsyncConnection, since: float) -> bool:
        """Whether a connection kept since `since` may be used as it is."""
        return True


class KeptPostgresConnections(KeptConnections):
    """PostgreSQL: connections in autocommit, whose transactions db.py begins and ends on
    the driver; pinged when kept idle for `ping_after` seconds, all returned to the pool
    after a disconnect."""

    def __init__(self, engine: AsyncEngine, *, ping_after: float, listeners: Sequence[Any]) -> None:
        super().__init__(engine)
        self.ping_after = ping_after
        self.listeners = listeners  # the database's error listeners, told of failures
        self._returning: list[AsyncConnection] = []  # kept when the database went away

    def saw_error(self, _error: BaseException, disconnect: bool) -> None:
        """A statement failed; as a disconnect, the pool replaces every connection it had
        then on its next checkout, so each kept now goes back to it (on the next take)."""
        if not disconnect:
            return
        self._returning.extend(conn for conn, _ in self._idle)
        self._idle.clear()

    async def take(self) -> AsyncConnection:
        await self._return_dropped()
        return await super().take()

    async def close(self) -> None:
        await super().close()
        await self._return_dropped()

    async def _return_dropped(self) -> None:
        returning, self._returning = self._returning, []
        for conn in returning:
            await conn.close()

    async def execute(self, conn: AsyncConnection, sql: str) -> None:
        """A statement with no parameters, on the driver (errors as SQLAlchemy's)."""
        await pg_driver.execute(conn, sql, (), self.listeners)

    async def end(self, conn: AsyncConnection, *, commit: bool) -> None:
        if conn.invalidated or conn.closed:
            # Dropped, and its transaction with it (the server rolled it back).
            if commit:
                raise PendingRollbackError("the connection was lost: nothing was committed")
            return
        try:
            if in_driver_transaction(driver_connection(conn)):
                await self.execute(conn, "COMMIT" if commit else "ROLLBACK")
            if conn.in_transaction():
                # SQLAlchemy's record of the transaction its own statements began: in
                # autocommit, ending it sends nothing.
                await conn.rollback()
        except BaseException:
            await conn.invalidate()
            raise

    async def begin_reads(self, conn: AsyncConnection) -> None:
        await self.execute(conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

    async def begin_writes(self, conn: AsyncConnection) -> None:
        await self.execute(conn, "BEGIN ISOLATION LEVEL READ COMMITTED")

    async def _fresh(self, conn: AsyncConnection) -> None:
        await conn.execution_options(isolation_level="AUTOCOMMIT")

    async def _usable(self, conn: AsyncConnection, since: float) -> bool:
        if time.monotonic() - since < self.ping_after:
            return True
        try:
            await self.execute(conn, "SELECT 1")
        except Exception:
            await conn.close()  # invalidated by the failure: the pool opens another
            return False
        return True
