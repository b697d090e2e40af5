"""Page cursors: what the server issues reads back exactly, and anything else (garbage, a
forgery, a cursor of the other kind) is INVALID_INPUT naming the cursor's argument."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph.domain import cursors
from graph.domain.errors import ErrorCode
from tests.unit.helpers import PROPERTY, raises_domain

UUID = "9d5c1d2e-6f0b-4c4e-9a51-3f2b8d1e7a60"
NOW = datetime(2024, 1, 1, 12, 30, 15, 123456, tzinfo=UTC)


def forged(*parts: Any) -> str:
    """A well-formed cursor holding what a client made up (padding stripped, as issued)."""
    return base64.urlsafe_b64encode(json.dumps(list(parts)).encode()).decode().rstrip("=")


# Every offset an ISO time can carry, to the minute.
offsets = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)
positions = st.integers(min_value=0, max_value=2**31 - 1)
aware_times = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)
)


@PROPERTY
@given(positions)
def test_a_position_cursor_reads_back_its_position(value: int) -> None:
    assert cursors.position(cursors.encode_position(value), "after") == value


@PROPERTY
@given(aware_times, st.uuids(version=4))
def test_a_keyset_cursor_reads_back_its_time_and_id(at: datetime, record: Any) -> None:
    cursor = cursors.encode_keyset(at, str(record))
    assert cursors.keyset(cursor, "after") == (at, str(record))


def test_issued_cursors_are_url_safe_and_unpadded() -> None:
    for cursor in (cursors.encode_position(2**31 - 1), cursors.encode_keyset(NOW, UUID)):
        assert cursor
        assert set(cursor) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
        )


def test_a_keyset_cursor_keeps_microseconds_and_orders_like_its_time() -> None:
    later = NOW + timedelta(microseconds=1)
    assert cursors.keyset(cursors.encode_keyset(later, UUID), "after")[0] > NOW


POSITION_FORGERIES = {
    "2**63": forged(2**63),
    "2**31 (beyond a 32-bit column)": forged(2**31),
    "a huge integer": forged(10**40),
    "negative": forged(-1),
    "true": forged(True),
    "a float": forged(1.5),
    "a float that is whole": forged(1.0),
    "a string": forged("1"),
    "null": forged(None),
    "two parts": forged(1, 2),
    "no parts": forged(),
    "a nested list": forged([1]),
    "an object": base64.urlsafe_b64encode(b'{"seq": 1}').decode(),
    "a bare number": base64.urlsafe_b64encode(b"1").decode(),
    "not base64": "not base64 !!",
    "base64 of no JSON": base64.urlsafe_b64encode(b"{not json").decode(),
    "base64 of invalid UTF-8": base64.urlsafe_b64encode(b"[\xff]").decode(),
    "empty": "",
    "non-ASCII": "é",
    "a lone surrogate": "\ud800",
    "a keyset cursor": cursors.encode_keyset(NOW, UUID),
}


@pytest.mark.parametrize("cursor", POSITION_FORGERIES.values(), ids=POSITION_FORGERIES.keys())
def test_a_position_cursor_the_server_did_not_issue_is_invalid_input(cursor: str) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "before") as info:
        cursors.position(cursor, "before")
    assert info.value.message == cursors.NOT_OURS


KEYSET_FORGERIES = {
    "one part": forged(NOW.isoformat()),
    "three parts": forged(NOW.isoformat(), UUID, 1),
    "a number for the time": forged(1, UUID),
    "null for the time": forged(None, UUID),
    "a string that is no time": forged("yesterday", UUID),
    "a time without a UTC offset": forged("2024-01-01T00:00:00", UUID),
    "a date only": forged("2024-01-01", UUID),
    "a number for the id": forged(NOW.isoformat(), 7),
    "an id that is no UUID": forged(NOW.isoformat(), "abc"),
    "an upper-case UUID": forged(NOW.isoformat(), UUID.upper()),
    "a braced UUID": forged(NOW.isoformat(), "{" + UUID + "}"),
    "a UUID without hyphens": forged(NOW.isoformat(), UUID.replace("-", "")),
    "the parts swapped": forged(UUID, NOW.isoformat()),
    "not base64": "%%%",
    "a position cursor": cursors.encode_position(3),
}


@pytest.mark.parametrize("cursor", KEYSET_FORGERIES.values(), ids=KEYSET_FORGERIES.keys())
def test_a_keyset_cursor_the_server_did_not_issue_is_invalid_input(cursor: str) -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "after") as info:
        cursors.keyset(cursor, "after")
    assert info.value.message == cursors.NOT_OURS


@PROPERTY
@given(st.text())
def test_any_text_is_a_cursor_or_invalid_input(text: str) -> None:
    # Whatever a client sends, the readers answer a value of the right type or the
    # domain's error: never another exception (which would be a masked INTERNAL).
    for read in (cursors.position, cursors.keyset):
        try:
            read(text, "after")
        except Exception as exc:
            assert getattr(exc, "code", None) is ErrorCode.INVALID_INPUT, repr(exc)


@PROPERTY
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=3),
        max_leaves=6,
    )
)
def test_any_forged_json_is_a_cursor_or_invalid_input(value: Any) -> None:
    cursor = forged(*value) if isinstance(value, list) else forged(value)
    for read in (cursors.position, cursors.keyset):
        try:
            result = read(cursor, "after")
        except Exception as exc:
            assert getattr(exc, "code", None) is ErrorCode.INVALID_INPUT, repr(exc)
        else:
            # What passes is exactly what the server could have issued.
            if isinstance(result, int):
                assert cursors.encode_position(result) == cursor
            else:
                at, record = result
                assert at.tzinfo is not None
                assert isinstance(record, str)


def test_a_keyset_cursor_with_another_utc_offset_names_the_same_instant() -> None:
    plus_two = NOW.astimezone(timezone(timedelta(hours=2)))
    at, _ = cursors.keyset(forged(plus_two.isoformat(), UUID), "after")
    assert at == NOW


@pytest.mark.parametrize(
    "created",
    ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+23:59"],
)
def test_a_keyset_time_no_utc_time_can_name_is_invalid_input(created: str) -> None:
    # Regression: such a time passed the reader, then overflowed where the store converts
    # it to UTC for the query (`conversations(after:)` answered a masked INTERNAL).
    with raises_domain(ErrorCode.INVALID_INPUT, "after"):
        cursors.keyset(forged(created, UUID), "after")


@PROPERTY
@given(st.datetimes(timezones=offsets), st.uuids(version=4))
def test_every_keyset_time_read_is_a_utc_time(at: datetime, record: Any) -> None:
    try:
        read, _ = cursors.keyset(forged(at.isoformat(), str(record)), "after")
    except Exception as exc:
        assert getattr(exc, "code", None) is ErrorCode.INVALID_INPUT, repr(exc)
    else:
        assert read == at
        assert read.utcoffset() == timedelta(0)
