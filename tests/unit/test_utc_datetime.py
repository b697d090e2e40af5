"""UTCDateTime on SQLite: its fast bind processor writes exactly the text SQLAlchemy's own
DATETIME would (the stored timestamps sort and compare as text), and reads back the instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import DateTime
from sqlalchemy.dialects import postgresql, sqlite

from graph.store.tables import UTCDateTime

SQLITE = sqlite.dialect()
INSTANTS = [
    datetime(2026, 12, 2, 18, 43, 32, 540831, tzinfo=UTC),
    datetime(2026, 12, 2, 18, 43, 32, tzinfo=UTC),  # no microseconds: still six digits
    datetime(999, 1, 2, 3, 4, 5, 6, tzinfo=UTC),  # a year below 1000: four digits
    datetime(2026, 1, 1, 0, 30, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2026, 6, 30, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-8))),
]


def sqlalchemys_text(value: datetime) -> str:
    process = DateTime().dialect_impl(SQLITE).bind_processor(SQLITE)
    assert process is not None
    return str(process(value.astimezone(UTC).replace(tzinfo=None)))


@pytest.mark.parametrize("value", INSTANTS, ids=str)
def test_the_stored_text_is_sqlalchemys(value: datetime) -> None:
    process = UTCDateTime().dialect_impl(SQLITE).bind_processor(SQLITE)
    assert process is not None
    text = process(value)
    assert text == sqlalchemys_text(value)
    read = UTCDateTime().dialect_impl(SQLITE).result_processor(SQLITE, None)
    assert read is not None and read(text) == value


def test_a_naive_value_counts_as_utc() -> None:
    process = UTCDateTime().dialect_impl(SQLITE).bind_processor(SQLITE)
    assert process is not None
    naive = datetime(2026, 3, 4, 5, 6, 7, 8)
    aware = naive.replace(tzinfo=UTC)
    assert process(naive) == process(aware) == sqlalchemys_text(aware)
    assert process(None) is None


def test_other_dialects_keep_an_aware_utc_value() -> None:
    dialect = postgresql.dialect()
    process = UTCDateTime().dialect_impl(dialect).bind_processor(dialect)
    value = INSTANTS[3]
    bound = process(value) if process is not None else value
    assert bound == value and bound.tzinfo == UTC


def sqlalchemys_instant(text: str) -> datetime | None:
    parse = DateTime().dialect_impl(SQLITE).result_processor(SQLITE, None)
    assert parse is not None
    return UTCDateTime().process_result_value(parse(text), SQLITE)


@pytest.mark.parametrize(
    "text",
    [
        "2026-12-02 18:43:32.540831",
        "2026-12-02 18:43:32.000000",
        "2026-12-02 18:43:32",  # written by hand, without microseconds
        "0999-01-02 03:04:05.000006",
        "2026-12-02T18:43:32.540831",
        "2026-12-02",
        "2026-01-01 00:30:00+05:30",  # an offset of its own: converted, not doubled
        "2026-01-01 00:30:00Z",
    ],
)
def test_a_stored_text_reads_as_sqlalchemys_instant_in_utc(text: str) -> None:
    read = UTCDateTime().dialect_impl(SQLITE).result_processor(SQLITE, None)
    assert read is not None
    value = read(text)
    assert value is not None and value == sqlalchemys_instant(text)
    assert value.tzinfo is UTC
    assert read(None) is None


def test_a_text_that_is_no_timestamp_is_refused_as_before() -> None:
    read = UTCDateTime().dialect_impl(SQLITE).result_processor(SQLITE, None)
    assert read is not None
    for text in ("", "yesterday", "2026-13-01 00:00:00"):
        with pytest.raises(ValueError):
            sqlalchemys_instant(text)
        with pytest.raises(ValueError):
            read(text)


def test_texts_read_right_after_writing_any_instant_are_their_own_instants() -> None:
    # The last instant written is remembered with its text: a text read back must still be
    # its own instant, in UTC, whichever was written last.
    write = UTCDateTime().dialect_impl(SQLITE).bind_processor(SQLITE)
    read = UTCDateTime().dialect_impl(SQLITE).result_processor(SQLITE, None)
    assert write is not None and read is not None
    texts = [write(value) for value in INSTANTS]
    for value, text in zip(INSTANTS, texts, strict=True):
        for last in INSTANTS:
            write(last)
            instant = read(text)
            assert instant == value and instant.tzinfo is UTC
            assert read(write(value)) == value
    write(INSTANTS[0])
    with pytest.raises(ValueError):
        read("")
