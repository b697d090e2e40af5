"""Opaque page cursors: what this server issues, and the only reader of them.

A cursor is base64url JSON of a short list. Every reader here checks the shape and the
types of what it decodes, so a cursor the server did not issue is INVALID_INPUT naming its
argument, and never reaches the database as a value of the wrong type or range.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

import orjson

from graph.domain import ids
from graph.domain.errors import invalid

NOT_OURS = "not a cursor this server issued"
# Positions (sequence numbers, versions) are 32-bit columns.
MAX_POSITION = 2**31


def encode(*parts: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(parts))).decode().rstrip("=")


def _decode(cursor: str, field: str, arity: int) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError, binascii.Error, UnicodeEncodeError):
        raise invalid(NOT_OURS, field) from None
    if not isinstance(parts, list) or len(parts) != arity:
        raise invalid(NOT_OURS, field)
    return parts


def _position(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < MAX_POSITION:
        raise invalid(NOT_OURS, field)
    return value


def position(cursor: str, field: str) -> int:
    """A position cursor: a message's `seq` or a checkpoint's `version`."""
    (value,) = _decode(cursor, field, 1)
    return _position(value, field)


def encode_position(value: int) -> str:
    return encode(value)


def keyset(cursor: str, field: str) -> tuple[datetime, str]:
    """A (created_at, id) cursor: of conversations, snapshots and delegations."""
    created, record_id = _decode(cursor, field, 2)
    at = _utc_time(created)
    if at is None or not isinstance(record_id, str):
        raise invalid(NOT_OURS, field)
    if ids.canonical(record_id) != record_id:
        raise invalid(NOT_OURS, field)
    return at, record_id


def _utc_time(value: Any) -> datetime | None:
    """An aware ISO time as UTC, or None. The store compares in UTC, so a time no UTC time
    can name (year 1 at +14:00) is refused here, not left to overflow in the query."""
    if not isinstance(value, str):
        return None
    try:
        at = datetime.fromisoformat(value)
        return at.astimezone(UTC) if at.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


def encode_keyset(created_at: datetime, record_id: str) -> str:
    return encode(created_at.isoformat(), record_id)


def event(cursor: str, field: str) -> tuple[str, int]:
    """An event stream cursor: (the root of the event's tree, its position in the log)."""
    root_id, value = _decode(cursor, field, 2)
    if not isinstance(root_id, str) or ids.canonical(root_id) != root_id:
        raise invalid(NOT_OURS, field)
    return root_id, _position(value, field)


def encode_event(root_id: str, position: int) -> str:
    return encode(root_id, position)
