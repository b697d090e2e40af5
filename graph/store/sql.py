"""The one way the repositories run SQL: `Sql` over a connection.

A statement is either a `Prepared` one (built and compiled once, for the hot paths) or any
SQLAlchemy statement. A Prepared statement runs on the driver connection: on SQLite a
statement takes microseconds on the event loop (see sqlite_inline), and SQLAlchemy's
execution around it (execution context, result objects, the greenlet hop) costs several
times more; on PostgreSQL it costs more CPU than asyncpg's round trip (pg_driver.py). Its
SQL and its values are still SQLAlchemy's: compiled by the dialect, bound and read through
the columns' own processors (tests/test_prepared.py checks that both ways give the same SQL
and the same values). A Prepared statement with an IN list on PostgreSQL, and everything
else, runs through SQLAlchemy. Either way the statement listeners of
`Database.on_statement` see it, and an error comes out as SQLAlchemy's exception type for it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ClauseElement, CompoundSelect, Executable, Select, TextualSelect, Update
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from graph.store import pg_driver
from graph.store.connections import driver_connection
from graph.store.db import Database
from graph.store.encryption import Lost

Processor = Callable[[Any], Any] | None
# Ids bound to one statement at most (an IN list of them, a batch of keys): far above any
# realistic page or tree level, safely below the bound-parameter limits of asyncpg (32,767)
# and SQLite (32,766), which a huge one would otherwise hit.
IDS_PER_STATEMENT = 5_000

# A bind, in the order of the positional parameters: (key, own value, processor, expanding).
# The own value is used when the caller's values do not name the bind (the literal 1 of
# `version + 1`); an expanding bind is an IN list, rendered as one `?` per value.
_Bind = tuple[str, Any, Processor, bool]


@dataclass(frozen=True, slots=True)
class Rows:
    """Result rows as plain tuples, with the result's column keys."""

    keys: tuple[str, ...]
    values: list[tuple[Any, ...]]

    def first(self) -> tuple[Any, ...] | None:
        return self.values[0] if self.values else None

    def scalars(self) -> list[Any]:
        return [row[0] for row in self.values]


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    binds: tuple[_Bind, ...]
    keys: tuple[str, ...]
    # The result columns that have a processor at all (most come back as SQLite gives them).
    processed: tuple[tuple[int, Callable[[Any], Any]], ...]
    # Without an IN list: each bind once (`now` may be bound in several places), then the
    # positions, as indexes into those.
    distinct: tuple[tuple[str, Any, Processor], ...] | None = None
    order: tuple[int, ...] = ()

    def parameters(self, values: Mapping[str, Any]) -> tuple[str, list[Any]]:
        if self.distinct is not None:
            get = values.get
            once = [
                process(get(key, own)) if process else get(key, own)
                for key, own, process in self.distinct
            ]
            return self.sql, [once[i] for i in self.order]
        sql, out = self.sql, list[Any]()
        for key, own, process, expanding in self.binds:
            value: Any = values.get(key, own)
            if expanding:
                sql = sql.replace(_expanding_marker(key), ", ".join("?" * len(value)))
                out.extend(process(v) if process else v for v in value)
            else:
                out.append(process(value) if process else value)
        return sql, out

    def row(self, raw: Sequence[Any]) -> tuple[Any, ...]:
        if not self.processed:
            return tuple(raw)
        values = list(raw)
        for i, process in self.processed:
            values[i] = process(values[i])
        return tuple(values)


def _expanding_marker(key: str) -> str:
    # How SQLAlchemy leaves an expanding bind in compiled SQL until execution (its
    # "post-compile" step); tests/test_prepared.py fails if that changes.
    return f"__[POSTCOMPILE_{key}]"


def _compile(
    statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None
) -> _Compiled:
    compiled = statement.compile(dialect=dialect, column_keys=column_keys)
    assert isinstance(compiled, SQLCompiler) and compiled.positiontup is not None
    binds = []
    # A bind that occurs more than once (the same key and type) is processed once.
    distinct: dict[tuple[str, type], tuple[str, Any, Processor]] = {}
    order = []
    for name in compiled.positiontup:
        bind = compiled.binds[name]
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        binds.append((bind.key, bind.effective_value, process, bind.expanding))
        own = (bind.key, bind.effective_value, process)
        slot = distinct.setdefault((bind.key, type(bind.type)), own)
        order.append(list(distinct.values()).index(slot))
    columns = list(getattr(statement, "exported_columns", ()))
    results = [c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns]
    plain = not any(expanding for *_, expanding in binds)
    return _Compiled(
        sql=compiled.string,
        binds=tuple(binds),
        keys=tuple(c.key for c in columns),
        processed=tuple((i, p) for i, p in enumerate(results) if p is not None),
        distinct=tuple(distinct.values()) if plain else None,
        order=tuple(order) if plain else (),
    )


class Prepared:
    """A SQLAlchemy statement built and compiled once; run on the driver on SQLite.

    `column_keys` names the columns an INSERT's parameters fill.
    """

    def __init__(self, statement: Executable, column_keys: Sequence[str] | None = None) -> None:
        self.statement = statement
        self._column_keys = column_keys
        self._compiled: dict[str, _Compiled] = {}

    def compiled(self, dialect: Dialect) -> _Compiled:
        found = self._compiled.get(dialect.name)
        if found is None:
            found = _compile(self.statement, dialect, self._column_keys)  # type: ignore[arg-type]
            self._compiled[dialect.name] = found
        return found


Statement = Prepared | Executable


class Sql:
    """Runs statements on one connection (a repository's, for one unit of work)."""

    def __init__(self, conn: AsyncConnection, db: Database) -> None:
        self.conn = conn
        self.db = db
        self.dialect = conn.dialect
        self.is_sqlite = db.is_sqlite
        self.encryption = db.encryption
        self.compression = db.compression
        # SQLite's driver connection (sqlite_inline), found once: the unit of work's
        # connection does not change under it.
        self._inline: Any = None

    async def rows(self, statement: Statement, params: Mapping[str, Any] | None = None) -> Rows:
        found = await self._rows(statement, params)
        if self.compression is not None and found.values and "data" in found.keys:
            # Compressed messages (store/compression.py): inflated whatever the statement.
            values = self.compression.inflate_rows(found.keys, found.values)
            if values is not found.values:
                found = Rows(found.keys, values)
        if self.encryption is None or not found.values:
            return found
        # Sealed values name their key: opened here, whatever the statement read.
        plain = statement.statement if isinstance(statement, Prepared) else statement
        if isinstance(plain, Select | CompoundSelect | TextualSelect):
            lost = Lost.DROP  # a read of what was deleted (a restored copy) finds nothing
        elif isinstance(plain, Update):
            lost = Lost.REFUSE  # nor can it be written
        else:
            lost = Lost.KEEP  # a delete's or an insert's own rows, as stored
        values = await self.encryption.open_rows(found.keys, found.values, lost=lost)
        return found if values is found.values else Rows(found.keys, values)

    async def _rows(self, statement: Statement, params: Mapping[str, Any] | None) -> Rows:
        if isinstance(statement, Prepared):
            compiled = statement.compiled(self.dialect)
            if self.is_sqlite:
                sql, values = compiled.parameters(params or {})
                raw: list[tuple[Any, ...]] = self._on_sqlite(self._sqlite().rows, sql, values)
                rows = raw if not compiled.processed else [compiled.row(r) for r in raw]
                return Rows(compiled.keys, rows)
            if compiled.distinct is not None:
                sql, values = compiled.parameters(params or {})
                self._announce(sql, values)
                found = await pg_driver.fetch(self.conn, sql, values, self.db.error_listeners)
                return Rows(compiled.keys, [compiled.row(r) for r in found])
            statement = statement.statement
        result = await self.conn.execute(statement, dict(params or {}))
        if not result.returns_rows:
            return Rows((), [])
        return Rows(tuple(result.keys()), [tuple(r) for r in result.all()])

    async def execute(self, statement: Statement, params: Mapping[str, Any] | None = None) -> int:
        """Run a statement for its effect; the number of rows it matched."""
        if isinstance(statement, Prepared):
            compiled = statement.compiled(self.dialect)
            if self.is_sqlite:
                sql, values = compiled.parameters(params or {})
                count: int = self._on_sqlite(self._sqlite().effect, sql, values)
                return count
            if compiled.distinct is not None:
                sql, values = compiled.parameters(params or {})
                self._announce(sql, values)
                return await pg_driver.execute(self.conn, sql, values, self.db.error_listeners)
            statement = statement.statement
        result = await self.conn.execute(statement, dict(params or {}))
        return int(getattr(result, "rowcount", 0))

    async def execute_many(self, statement: Prepared, rows: Sequence[Mapping[str, Any]]) -> None:
        compiled = statement.compiled(self.dialect)
        if not self.is_sqlite and compiled.distinct is None:
            await self.conn.execute(statement.statement, [dict(r) for r in rows])
            return
        params = [compiled.parameters(r)[1] for r in rows]
        if self.is_sqlite:
            # Rows before a failing one may be stored: the unit of work rolls back.
            self._on_sqlite(self._sqlite().effect_many, compiled.sql, params)
            return
        self._announce(compiled.sql, params)
        await pg_driver.execute_many(self.conn, compiled.sql, params, self.db.error_listeners)

    def _sqlite(self) -> Any:
        inline = self._inline
        if inline is None:
            inline = self._inline = driver_connection(self.conn)
        return inline

    def _on_sqlite(self, call: Callable[[str, Any], Any], sql: str, params: Any) -> Any:
        """`call(sql, params)` on the inline SQLite connection, announced to the statement
        listeners, a driver error raised as SQLAlchemy raises it (and told to the error
        listeners)."""
        self._announce(sql, params)
        try:
            return call(sql, params)
        except sqlite3.Error as exc:
            raise self._translated(exc, sql, params) from exc

    def _announce(self, sql: str, params: Any) -> None:
        for listener in self.db.statement_listeners:
            listener(sql, params)

    def _translated(self, exc: sqlite3.Error, sql: str, params: Any) -> StatementError:
        """The exception SQLAlchemy raises for `exc`, told to the error listeners."""
        error = DBAPIError.instance(sql, params, exc, sqlite3.Error, dialect=self.dialect)
        for listener in self.db.error_listeners:
            listener(error, False)
        return error
