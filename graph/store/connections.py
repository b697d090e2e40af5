"""A SQLAlchemy connection's driver connection, and ending its transaction on whichever of
the two holds it. db.py (the writer, the read blocks) and kept_connections.py (connections
kept between uses) both need them; neither imports the other's internals for it."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection


def driver_connection(conn: AsyncConnection) -> Any:
    """The connection's driver connection (sqlite_inline's or asyncpg's)."""
    return conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]


def open_driver_connection(conn: AsyncConnection) -> Any | None:
    """The driver connection, or None when `conn` is closed or invalidated."""
    if conn.closed or conn.invalidated or conn.sync_connection is None:
        return None
    return driver_connection(conn)


def in_driver_transaction(raw: Any) -> bool:
    """Whether the driver connection `raw` is inside a transaction (sqlite_inline's or
    asyncpg's)."""
    state = getattr(raw, "in_transaction", None)
    return bool(raw.is_in_transaction() if state is None else state)


def run(raw: Any, sql: str) -> None:
    """Run `sql`, which returns no rows, on the SQLite driver connection `raw` (inline:
    there is nothing to wait on)."""
    raw.effect(sql, ())


async def end(conn: AsyncConnection, raw: Any, *, commit: bool) -> None:
    """Commit or roll back the transaction of `conn`; `raw` is its driver connection.

    Statements run through SQLAlchemy made it track a transaction (on our BEGIN): ending
    it there ends both; statements run on the driver (sql.py) leave none. A connection whose
    transaction state is unknown after a failure is invalidated, not reused: closing the
    driver connection rolls back whatever is left, and the pool opens a new one.
    """
    try:
        if conn.in_transaction():
            await (conn.commit() if commit else conn.rollback())
        else:
            await (raw.commit() if commit else raw.rollback())
    except BaseException:
        await conn.invalidate()
        raise
