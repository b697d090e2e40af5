"""Keyset pages and their opaque cursors."""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import orjson
from sqlalchemy.ext.asyncio import AsyncConnection

from .errors import invalid

T = TypeVar("T")


def encode_cursor(*parts: Any) -> str:
    return base64.urlsafe_b64encode(orjson.dumps(list(parts))).decode().rstrip("=")


def decode_cursor(cursor: str, field_name: str, arity: int) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = orjson.loads(base64.urlsafe_b64decode(padded.encode()))
    except (ValueError, TypeError):
        raise invalid("not a cursor this server issued", field_name) from None
    if not isinstance(parts, list) or len(parts) != arity:
        raise invalid("not a cursor this server issued", field_name)
    return parts


def page_size(value: int | None, *, default: int, maximum: int, field_name: str) -> int:
    """Requested sizes above the maximum are capped; negative sizes are an error."""
    if value is None:
        return min(default, maximum)
    if value < 0:
        raise invalid(f"`{field_name}` must not be negative", field_name)
    return min(value, maximum)


@dataclass(slots=True)
class Page(Generic[T]):
    items: list[T]
    cursors: list[str]
    has_next_page: bool = False
    has_previous_page: bool = False
    # Counts on a connection of its own: totalCount is resolved after the page's reads.
    count: Callable[[AsyncConnection], Awaitable[int]] | None = field(default=None, repr=False)
