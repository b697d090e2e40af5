"""SQLite's read connections, kept checked out between reads.

A checkout from SQLAlchemy's pool and its return cost about as much as the token lookup
that every request reads with it (greenlet hops and pool events, both ways). A SQLite
reader needs nothing done between two reads: none leaves a transaction open (a
ReadTransaction ends its own; the pool does no reset on return either, see db.py), and an
in-process file connection cannot drop. So a read ends by leaving its connection here for
the next one, unless it failed or left a transaction open: that connection goes back to
the pool (its transaction, if any, rolled back first). There are never more than the pool's
size, since each came from it; the pool's metrics count them as idle.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from graph.store.connections import end, open_driver_connection


class IdleReaders:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._idle: list[AsyncConnection] = []
        self._waiting = 0  # reads waiting for a checkout from the pool

    @property
    def idle(self) -> int:
        return len(self._idle)

    @asynccontextmanager
    async def lend(self) -> AsyncIterator[AsyncConnection]:
        """A connection for the reads of one block, given back when it ends (kept only if
        the block did not raise)."""
        conn = await self.take()
        clean = False
        try:
            yield conn
            clean = True
        finally:
            await self.give_back(conn, clean=clean)

    async def take(self) -> AsyncConnection:
        """A connection for reads: the one left last, or a new checkout."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and not conn.invalidated:
                return conn
        self._waiting += 1
        try:
            return await self.engine.connect()
        finally:
            self._waiting -= 1

    async def give_back(self, conn: AsyncConnection, *, clean: bool) -> None:
        """Keep `conn` for the next read if the read was `clean` (it ended without an error)
        and left no transaction open; otherwise, or while other reads wait for the pool
        (it is theirs), return it to the pool."""
        if clean and not self._waiting and _reusable(conn):
            self._idle.append(conn)
            return
        raw = open_driver_connection(conn)
        if raw is not None and raw.in_transaction:
            # Ended here: the pool resets nothing on return (db.py) and would hand it out
            # still inside that transaction. A failed rollback invalidates the connection.
            with contextlib.suppress(Exception):
                await end(conn, raw, commit=False)
        await conn.close()

    async def close(self) -> None:
        """Return every idle connection to the pool (before the engine is disposed)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()


def _reusable(conn: AsyncConnection) -> bool:
    raw = open_driver_connection(conn)
    return raw is not None and not raw.in_transaction and not conn.in_transaction()
