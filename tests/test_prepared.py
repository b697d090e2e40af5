"""The prepared-statement path (store/sql.py) against SQLAlchemy's own execution, on SQLite.

On SQLite, `Sql` runs a `Prepared` statement on the driver with SQL it compiled once and
values it bound itself: these tests fail if SQLAlchemy would send the driver other SQL or
other values for the same statement, if the marker it leaves for an IN list changes, or if
rows read back differ. The statements are the store's own hot ones. The store models built
without a Session (store/rows.py) are checked against the models SQLAlchemy builds.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, bindparam, create_engine, event, select
from sqlalchemy.dialects.sqlite.aiosqlite import SQLiteDialect_aiosqlite

from graph.domain.principal import OwnerType
from graph.store import event_log, scope
from graph.store.repository import transcripts, versions
from graph.store.rows import Builder
from graph.store.sql import Prepared, _expanding_marker
from graph.store.tables import Conversation, metadata
from graph.store.tables import conversation as C

NOW = datetime(2026, 12, 1, 12, 30, 15, 123456, tzinfo=UTC)
ROOT = "0b8f2d5e-1c2a-4e7b-9d3f-5a6b7c8d9e0f"
CONVERSATION_ROW: dict[str, Any] = {
    "id": ROOT,
    "workspace_type": "site",
    "workspace_id": "1",
    "owner_type": OwnerType.USER,
    "owner_digest": "d" * 64,
    "title": "t",
    "metadata": "{}",
    "version": 3,
    "message_count": 2,
    "created_at": NOW,
    "updated_at": NOW,
}


@pytest.fixture
def engine() -> Iterator[Engine]:
    engine = create_engine("sqlite://")
    metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(C.insert(), CONVERSATION_ROW)
    yield engine
    engine.dispose()


def sent_by_sqlalchemy(engine: Engine, prepared: Prepared, values: dict[str, Any]) -> Any:
    """The (SQL, parameters) SQLAlchemy hands the driver for `prepared`, and its rows."""
    seen: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        with engine.connect() as conn:
            result = conn.execute(prepared.statement, values)
            rows = [tuple(r) for r in result] if result.returns_rows else []
            conn.rollback()
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    ((sql, parameters),) = seen
    return sql, list(parameters), rows


def run_prepared(engine: Engine, prepared: Prepared, values: dict[str, Any]) -> Any:
    """What store/sql.py sends the driver for `prepared`, and the rows it makes of it."""
    compiled = prepared.compiled(SQLiteDialect_aiosqlite())
    sql, parameters = compiled.parameters(values)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute(sql, parameters)
        rows = [compiled.row(r) for r in cursor.fetchall()] if cursor.description else []
        raw.rollback()
    finally:
        raw.close()
    return sql, parameters, rows


# PostgreSQL's bump returns the row; SQLite's reads it back after the UPDATE (versions.py).
BUMP, BUMP_ALONE = (
    versions._statement(
        ("title",),
        reach=scope.Reach.EVERYTHING,
        counters=("message_count", "token_count"),
        conditional=True,
        counted=False,
        require_unlocked=False,
        bump_version=True,
        returning=returning,
    )
    for returning in (True, False)
)
CASES: dict[str, tuple[Prepared, dict[str, Any]]] = {
    # `now` is bound twice (the expiry check and updated_at): processed once, sent twice.
    "a version bump": (
        BUMP,
        {"cid": ROOT, "expected": 3, "set_title": "new", "add_message_count": 1,
         "add_token_count": 7, "now": NOW},
    ),
    "a version bump without RETURNING": (
        BUMP_ALONE,
        {"cid": ROOT, "expected": 3, "set_title": "new", "add_message_count": 1,
         "add_token_count": 7, "now": NOW},
    ),
    "the row a bump wrote": (versions._WRITTEN, {"cid": ROOT}),
    "a message insert": (
        transcripts._INSERT,
        {"conversation_id": ROOT, "seq": 3, "role": "user", "data": '{"role":"user"}',
         "digest": "ab" * 32, "search_text": "hi", "created_at": NOW},
    ),
    "an event log insert": (
        event_log._INSERT,
        {"root_id": ROOT, "position": 1, "conversation_id": ROOT, "ancestry": "",
         "kind": "MESSAGES_APPENDED", "version": 4, "at": NOW, "payload": None, "seq_low": 3,
         "seq_high": 4},
    ),
    # An IN list: SQLAlchemy expands it at execution; the prepared path replaces the marker.
    "an IN list": (
        Prepared(
            select(C.c.id, C.c.created_at, C.c.owner_type)
            .where(C.c.id.in_(bindparam("ids", expanding=True)))
            .order_by(C.c.id)
        ),
        {"ids": [ROOT, "missing", "other"]},
    ),
    "ranges of messages": (transcripts._ranges(2), {"c0": ROOT, "l0": 1, "h0": 5, "c1": ROOT,
                                                      "l1": 7, "h1": 9}),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_the_driver_gets_what_sqlalchemy_would_send(engine: Engine, case: str) -> None:
    prepared, values = CASES[case]
    assert run_prepared(engine, prepared, values) == sent_by_sqlalchemy(engine, prepared, values)


def test_rows_read_back_as_sqlalchemy_reads_them(engine: Engine) -> None:
    prepared, values = CASES["an IN list"]
    _, _, ours = run_prepared(engine, prepared, values)
    _, _, theirs = sent_by_sqlalchemy(engine, prepared, values)
    assert ours == theirs == [(ROOT, NOW, OwnerType.USER)]


def test_an_in_list_is_left_as_the_marker_the_prepared_path_replaces() -> None:
    prepared, _ = CASES["an IN list"]
    compiled = prepared.compiled(SQLiteDialect_aiosqlite())
    assert _expanding_marker("ids") in compiled.sql


def test_store_models_built_from_rows_read_as_sqlalchemys(engine: Engine) -> None:
    with engine.connect() as conn:
        result = conn.execute(select(C).where(C.c.id == ROOT))
        keys, (row,) = tuple(result.keys()), result.all()
    built = Builder(Conversation).many(keys, [tuple(row)])[0]
    made = Conversation(**{**CONVERSATION_ROW, "meta": "{}"})
    for attribute in Conversation.model_fields:
        assert getattr(built, attribute) == getattr(made, attribute), attribute
    assert built.ancestors == () and built.owner_type is OwnerType.USER
