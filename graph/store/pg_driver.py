"""Prepared statements on asyncpg itself, inside SQLAlchemy's transaction (PostgreSQL).

SQLAlchemy's execution around a statement (execution context, parameter processing, result
objects, the greenlet hop, its asyncpg cursor adapter) costs more CPU than asyncpg's own
round trip; a write runs five statements. `Sql` runs its `Prepared` statements here with
the SQL and the values SQLAlchemy's dialect compiled and bound (sql.py). The server's
connections are in autocommit, their transactions begun and ended on the driver by db.py
(kept_connections.py); on a connection that is not, a transaction is begun here the way
SQLAlchemy's asyncpg adapter begins one, so that its COMMIT and ROLLBACK end it. Errors come
out as SQLAlchemy's exceptions, a lost connection invalidating the pool as SQLAlchemy's own
execution does.

These reach into SQLAlchemy's asyncpg adapter (`_transaction`, `_start_transaction`,
`_handle_exception`) and its pool (`_invalidate`); tests/test_pg_driver.py fails if they
change, and pyproject.toml bounds SQLAlchemy's version.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

if TYPE_CHECKING:
    from graph.store.db import ErrorListener

T = TypeVar("T")
_COUNT = re.compile(r"(?:SELECT|UPDATE|DELETE|INSERT \d+|MERGE) (\d+)")


async def fetch(
    conn: AsyncConnection, sql: str, values: Sequence[Any], listeners: Sequence[ErrorListener]
) -> list[Any]:
    """The rows of one statement (asyncpg records)."""
    return await _run(conn, sql, values, listeners, lambda raw: raw.fetch(sql, *values))


async def execute(
    conn: AsyncConnection, sql: str, values: Sequence[Any], listeners: Sequence[ErrorListener]
) -> int:
    """Run one statement for its effect; the number of rows it matched."""
    status = await _run(conn, sql, values, listeners, lambda raw: raw.execute(sql, *values))
    found = _COUNT.match(status or "")
    return int(found.group(1)) if found else 0


async def execute_many(
    conn: AsyncConnection,
    sql: str,
    rows: Sequence[Sequence[Any]],
    listeners: Sequence[ErrorListener],
) -> None:
    await _run(conn, sql, rows, listeners, lambda raw: raw.executemany(sql, rows))


async def _run(
    conn: AsyncConnection,
    sql: str,
    values: Any,
    listeners: Sequence[ErrorListener],
    call: Callable[[Any], Awaitable[T]],
) -> T:
    adapted: Any = conn.sync_connection.connection.dbapi_connection  # type: ignore[union-attr]
    try:
        if adapted._transaction is None:  # begun as the adapter does, on first use
            await adapted._start_transaction()
        return await call(adapted.driver_connection)
    except BaseException as error:
        if _interrupted(error):
            # As SQLAlchemy does when a statement is interrupted (its task cancelled, a
            # timeout): the connection's state is unknown, so it is dropped, not reused.
            conn.sync_connection.invalidate(error)  # type: ignore[union-attr]
            raise
        await _raise(conn, adapted, error, sql, values, listeners)


def _interrupted(error: BaseException) -> bool:
    return not isinstance(error, Exception) or isinstance(error, TimeoutError)


async def _raise(
    conn: AsyncConnection,
    adapted: Any,
    error: BaseException,
    sql: str,
    values: Any,
    listeners: Sequence[ErrorListener],
) -> NoReturn:
    dialect = conn.dialect
    driver_error: Any = error
    try:
        adapted._handle_exception(error)  # raises the adapter's DBAPI error for it
    except Exception as translated:
        driver_error = translated
    disconnect = dialect.is_disconnect(driver_error, adapted, None)
    wrapped = DBAPIError.instance(
        sql,
        values,
        driver_error,
        dialect.loaded_dbapi.Error,
        dialect=dialect,
        connection_invalidated=disconnect,
    )
    for listener in listeners:
        listener(wrapped, disconnect)
    if disconnect:
        # As SQLAlchemy does on a disconnect: every connection of the pool made before now is
        # replaced on its next checkout, and this one is dropped.
        fairy = conn.sync_connection.connection  # type: ignore[union-attr]
        conn.sync_engine.pool._invalidate(fairy, wrapped, _checkin=False)
        await conn.invalidate(wrapped)
    raise wrapped from error
