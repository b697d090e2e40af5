"""Prepared statements on asyncpg (store/pg_driver.py) against SQLAlchemy's own execution.

On PostgreSQL `Sql` runs its hot statements on asyncpg inside SQLAlchemy's transaction.
These tests fail if SQLAlchemy would send asyncpg other SQL or other values for the same
statement, if the rows read back differ, if the transaction the fast path begins is not the
one SQLAlchemy commits and rolls back, if errors stop arriving as SQLAlchemy's exception
types, or if the adapter internals the module uses change.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import bindparam, event, func, select, text
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import Pool

from graph.store import event_log
from graph.store.db import Database
from graph.store.repository import transcripts
from graph.store.sql import Prepared, Sql
from graph.store.tables import conversation as C
from graph.store.tables import message as M
from tests.test_prepared import BUMP, CONVERSATION_ROW, NOW, ROOT

MESSAGE_ROW: dict[str, Any] = {
    "conversation_id": ROOT,
    "seq": 3,
    "role": "user",
    "data": '{"role":"user"}',
    "digest": "ab" * 32,
    "search_text": "hi",
    "created_at": NOW,
}
CASES: dict[str, tuple[Prepared, dict[str, Any]]] = {
    "a version bump": (
        BUMP,
        {"cid": ROOT, "expected": 3, "set_title": "new", "add_message_count": 1,
         "add_token_count": 7, "now": NOW},
    ),
    "a message insert": (transcripts._INSERT, MESSAGE_ROW),
    "an event log insert that notifies": (
        event_log._INSERT_NOTIFY,
        {"root_id": ROOT, "position": 1, "conversation_id": ROOT, "ancestry": "",
         "kind": "MESSAGES_APPENDED", "version": 4, "at": NOW, "payload": None, "seq_low": 3,
         "seq_high": 4, "channel": "test_channel", "notice": "{}"},
    ),
    "ranges of messages": (transcripts._ranges(2), {"c0": ROOT, "l0": 1, "h0": 5, "c1": ROOT,
                                                      "l1": 7, "h1": 9}),
}  # fmt: skip


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[Database]:
    if database_url.startswith("sqlite"):
        pytest.skip("asyncpg's fast path: PostgreSQL only")
    from graph.settings import Settings

    database = Database(Settings(database_url=database_url, secret="t"))
    async with database.write() as conn:
        await conn.execute(C.insert(), CONVERSATION_ROW)
    yield database
    await database.dispose()


async def sent_by_sqlalchemy(
    engine: AsyncEngine, prepared: Prepared, values: dict[str, Any]
) -> tuple[str, list[Any], list[tuple[Any, ...]]]:
    seen: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    event.listen(engine.sync_engine, "before_cursor_execute", capture)
    try:
        async with engine.connect() as conn:
            result = await conn.execute(prepared.statement, values)
            rows = [tuple(r) for r in result] if result.returns_rows else []
            await conn.rollback()
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", capture)
    ((sql, parameters),) = seen
    return sql, list(parameters), rows


async def sent_by_the_fast_path(
    db: Database, prepared: Prepared, values: dict[str, Any]
) -> tuple[str, list[Any], list[tuple[Any, ...]]]:
    seen: list[tuple[str, Any]] = []
    remove = db.on_statement(lambda sql, parameters: seen.append((sql, parameters)))
    try:
        async with db.writer.connect() as conn:
            found = await Sql(conn, db).rows(prepared, values)
            await conn.rollback()
    finally:
        remove()
    ((sql, parameters),) = seen
    return sql, list(parameters), found.values


async def terminate(db: Database, conn: AsyncConnection) -> None:
    """End `conn`'s session from another connection, as a database restart would."""
    pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar()
    killer = create_async_engine(db.settings.database_url)
    async with killer.connect() as other:
        await other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    await killer.dispose()


@pytest.mark.parametrize("case", CASES)
async def test_asyncpg_gets_what_sqlalchemy_would_send(db: Database, case: str) -> None:
    prepared, values = CASES[case]
    sql, parameters, rows = await sent_by_the_fast_path(db, prepared, values)
    their_sql, their_parameters, their_rows = await sent_by_sqlalchemy(db.writer, prepared, values)
    assert (sql, parameters) == (their_sql, their_parameters)
    if their_rows:  # (an INSERT's implicit RETURNING of its key SQLAlchemy keeps to itself)
        assert rows == their_rows


async def test_the_fast_path_runs_in_sqlalchemys_transaction(db: Database) -> None:
    count = select(func.count()).select_from(M).where(M.c.conversation_id == ROOT)
    with pytest.raises(RuntimeError):
        async with db.write() as conn:
            await Sql(conn, db).execute_many(transcripts._INSERT, [MESSAGE_ROW])
            raise RuntimeError("the unit of work fails after the insert")
    async with db.read() as conn:
        assert (await conn.execute(count)).scalar() == 0  # rolled back with the rest
    async with db.write() as conn:
        await Sql(conn, db).execute_many(transcripts._INSERT, [MESSAGE_ROW])
    async with db.read() as conn:
        assert (await conn.execute(count)).scalar() == 1  # committed


async def test_errors_arrive_as_sqlalchemys_and_roll_back(db: Database) -> None:
    seen: list[tuple[BaseException, bool]] = []
    db.on_error(lambda error, disconnect: seen.append((error, disconnect)))
    with pytest.raises(IntegrityError):
        async with db.write() as conn:
            await Sql(conn, db).execute_many(transcripts._INSERT, [MESSAGE_ROW, MESSAGE_ROW])
    assert [type(e) for e, _ in seen] == [IntegrityError] and not seen[0][1]
    async with db.read() as conn:
        stored = await conn.execute(select(func.count()).select_from(M))
        assert stored.scalar() == 0


async def test_a_lost_connection_is_an_invalidated_one(db: Database) -> None:
    with pytest.raises(DBAPIError) as lost:
        async with db.write() as conn:
            sql = Sql(conn, db)
            await sql.execute_many(transcripts._INSERT, [MESSAGE_ROW])
            await terminate(db, conn)
            await sql.rows(transcripts._INSERT, {**MESSAGE_ROW, "seq": 4})
    assert lost.value.connection_invalidated
    async with db.write() as conn:  # the pool hands out a live connection again
        await Sql(conn, db).execute_many(transcripts._INSERT, [MESSAGE_ROW])


async def test_an_interrupted_statement_drops_its_connection(db: Database) -> None:
    # A resolver cancelled mid-statement (a sibling field failed, the client went away):
    # the transaction ends without an error of its own, and the pool serves on.
    # As SQLAlchemy leaves it: invalidated (asyncpg may have closed it mid-protocol, and a
    # ROLLBACK on it would fail where nothing can answer the error).
    sleep = Prepared(select(func.pg_sleep(bindparam("seconds"))))
    invalidated = False
    with pytest.raises(asyncio.CancelledError):
        async with db.write() as conn:
            statement = asyncio.create_task(Sql(conn, db).rows(sleep, {"seconds": 5}))
            await asyncio.sleep(0.2)
            statement.cancel()
            try:
                await statement
            finally:
                invalidated = conn.invalidated
    assert invalidated
    async with db.write() as conn:
        await Sql(conn, db).execute_many(transcripts._INSERT, [MESSAGE_ROW])
    async with db.read() as conn:
        assert (await conn.execute(select(func.count()).select_from(M))).scalar() == 1


async def test_a_read_transaction_whose_connection_died_still_answers(db: Database) -> None:
    async with db.read_transaction() as transaction:
        async with transaction.use() as conn:
            rows = await Sql(conn, db).rows(transcripts._ranges(1), {"c0": ROOT, "l0": 1, "h0": 5})
            await terminate(db, conn)
        assert rows.values == []
    # Its ROLLBACK failed as the block ended: the reads stand, the connection is dropped.
    async with db.read() as conn:
        assert (await conn.execute(select(func.count()).select_from(C))).scalar() == 1


def test_the_adapter_internals_the_fast_path_uses_are_there() -> None:
    adapter = AsyncAdapt_asyncpg_connection
    assert "_transaction" in adapter.__slots__
    assert inspect.iscoroutinefunction(adapter._start_transaction)
    assert "error" in inspect.signature(adapter._handle_exception).parameters
    assert "_checkin" in inspect.signature(Pool._invalidate).parameters
