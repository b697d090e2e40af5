"""Keyset pages: what a repository returns for a connection, and how big one may be."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from graph.domain import cursors
from graph.domain.errors import invalid

T = TypeVar("T")


def page_size(value: int | None, *, default: int, maximum: int, field: str) -> int:
    """Requested sizes above the maximum are capped; negative sizes are an error."""
    if value is None:
        return min(default, maximum)
    if value < 0:
        raise invalid(f"`{field}` must not be negative", field)
    return min(value, maximum)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: list[T]
    cursors: list[str]
    has_next_page: bool = False
    has_previous_page: bool = False


def keyset_slice(
    items: Sequence[T],
    key: Callable[[T], tuple[datetime, str]],
    *,
    size: int,
    after: str | None,
    field: str = "after",
) -> Page[T]:
    """A page of `items`, already loaded in (created_at, id) order, after a keyset cursor."""
    start = 0
    if after is not None:
        mark = cursors.keyset(after, field)
        start = next((i for i, item in enumerate(items) if key(item) > mark), len(items))
    chosen = list(items[start : start + size])
    return Page(
        items=chosen,
        cursors=[cursors.encode_keyset(*key(item)) for item in chosen],
        has_next_page=start + size < len(items),
        has_previous_page=start > 0,
    )
