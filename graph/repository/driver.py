"""Hot statements on SQLite, run on the driver connection instead of through SQLAlchemy.

On SQLite a statement runs in microseconds on the event loop (see sqlite_inline), and
SQLAlchemy's execution around it (execution context, result objects, the greenlet hop)
costs several times more. A `Prepared` statement is still built and compiled by SQLAlchemy,
once, and its values go through the statement's own bind and result processors, so the SQL
and the values are exactly those of the SQLAlchemy path. PostgreSQL executes it through
SQLAlchemy as any other statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ClauseElement
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from ..db import driver_connection

Processor = Callable[[Any], Any] | None


class Row:
    """The part of SQLAlchemy's Row the records read: `_mapping`."""

    __slots__ = ("_mapping",)

    def __init__(self, mapping: dict[str, Any]) -> None:
        self._mapping = mapping


# A bind, in the order of the positional parameters: (key, own value, processor, expanding).
# The own value is used when the caller's values do not name the bind (the literal 1 of
# `version + 1`); an expanding bind is an IN list, rendered as one `?` per value.
_Bind = tuple[str, Any, Processor, bool]


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    binds: tuple[_Bind, ...]
    keys: tuple[str, ...]
    # The result columns that have a processor at all (most come back as SQLite gives them).
    processed: tuple[tuple[int, Callable[[Any], Any]], ...]

    def parameters(self, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
        sql, out = self.sql, list[Any]()
        for key, own, process, expanding in self.binds:
            value: Any = values.get(key, own)
            if expanding:
                sql = sql.replace(f"__[POSTCOMPILE_{key}]", ",".join("?" * len(value)))
                out.extend(process(v) if process else v for v in value)
            else:
                out.append(process(value) if process else value)
        return sql, out

    def row(self, raw: Sequence[Any]) -> tuple[Any, ...]:
        if len(raw) != len(self.keys):
            raise ValueError(f"expected {len(self.keys)} columns, got {len(raw)}")
        if not self.processed:
            return tuple(raw)
        values = list(raw)
        for i, process in self.processed:
            values[i] = process(values[i])
        return tuple(values)


def _compile(
    statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None
) -> _Compiled:
    compiled = statement.compile(dialect=dialect, column_keys=column_keys)
    assert isinstance(compiled, SQLCompiler) and compiled.positiontup is not None
    binds = []
    for name in compiled.positiontup:
        bind = compiled.binds[name]
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        binds.append((bind.key, bind.effective_value, process, bind.expanding))
    columns = compiled._result_columns
    results = [c[3].dialect_impl(dialect).result_processor(dialect, None) for c in columns]
    return _Compiled(
        sql=compiled.string,
        binds=tuple(binds),
        keys=tuple(c[0] for c in columns),
        processed=tuple((i, p) for i, p in enumerate(results) if p is not None),
    )


class Prepared:
    """A SQLAlchemy statement compiled once, executed raw on SQLite.

    `column_keys` names the columns an INSERT's parameters fill.
    """

    def __init__(self, statement: ClauseElement, column_keys: Sequence[str] | None = None) -> None:
        self.statement = statement
        self._column_keys = column_keys
        self._compiled: _Compiled | None = None

    def _for(self, dialect: Dialect) -> _Compiled:
        if self._compiled is None:
            self._compiled = _compile(self.statement, dialect, self._column_keys)
        return self._compiled

    async def _through_sqlalchemy(self, conn: AsyncConnection, values: Any) -> list[Any]:
        result = await conn.execute(self.statement, values)  # type: ignore[call-overload]
        return list(result.all()) if result.returns_rows else []

    async def tuples(self, conn: AsyncConnection, values: Mapping[str, Any]) -> list[Any]:
        """The result rows as plain tuples (on PostgreSQL, SQLAlchemy's Rows)."""
        if conn.dialect.name != "sqlite":
            return await self._through_sqlalchemy(conn, dict(values))
        compiled = self._for(conn.dialect)
        sql, params = compiled.parameters(values)
        try:
            rows = await _run(conn, sql, params)
        except sqlite3.Error:
            # Errors are SQLAlchemy's to raise (its exception types, the handle_error hooks
            # that metrics count): the failed statement changed nothing, so run it again
            # its way.
            return await self._through_sqlalchemy(conn, dict(values))
        if compiled.processed:
            return [compiled.row(r) for r in rows]
        return rows

    async def rows(self, conn: AsyncConnection, values: Mapping[str, Any]) -> list[Any]:
        """The result rows, each with `_mapping` as records read them."""
        found = await self.tuples(conn, values)
        if conn.dialect.name != "sqlite" or not found or hasattr(found[0], "_mapping"):
            return found
        keys = self._for(conn.dialect).keys
        return [Row(dict(zip(keys, r, strict=True))) for r in found]

    async def execute_many(self, conn: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> None:
        many = [dict(r) for r in rows]
        if conn.dialect.name != "sqlite":
            await self._through_sqlalchemy(conn, many)
            return
        compiled = self._for(conn.dialect)
        params = [compiled.parameters(r)[1] for r in rows]
        _announce(conn, compiled.sql, params, many=True)
        try:
            cursor = await driver_connection(conn).executemany(compiled.sql, params)
        except sqlite3.Error:
            # As in `tuples`. Rows before the failing one may be stored: the rerun fails all
            # the same (at the latest on a unique key such as message's (conversation, seq))
            # and the unit of work rolls the whole transaction back.
            await self._through_sqlalchemy(conn, many)
            return
        await cursor.close()


def _announce(conn: AsyncConnection, sql: str, params: Any, *, many: bool) -> None:
    # Statement observers (tests and bench/tree count statements) see these too.
    sync = conn.sync_connection
    assert sync is not None
    if sync._has_events or sync.engine._has_events:
        for listener in sync.dispatch.before_cursor_execute:
            listener(sync, None, sql, params, None, many)


async def _run(conn: AsyncConnection, sql: str, params: list[Any]) -> list[Any]:
    _announce(conn, sql, params, many=False)
    cursor = await driver_connection(conn).execute(sql, params)
    try:
        rows = await cursor.fetchall()
        return rows if isinstance(rows, list) else list(rows)
    finally:
        await cursor.close()
