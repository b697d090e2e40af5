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


@dataclass(frozen=True, slots=True)
class SeqWindow:
    """The messages of one transcript page, as a range of `seq` (low > high: none)."""

    low: int
    high: int
    has_next_page: bool
    has_previous_page: bool


def seq_window(
    count: int,
    *,
    first: int | None,
    after: int | None,
    last: int | None,
    before: int | None,
    cap: int | None = None,
) -> SeqWindow:
    """The page of a transcript of `count` messages that first/after/last/before select.

    A transcript's seq runs 1…count without a gap (appends number on, a replace rewrites
    the tail), so a page is a range computed from the count: a list of conversations can
    read the pages of all of them in one statement. As the Relay connection spec has it:
    the messages between the cursors, the first `first` of them, then the last `last` of
    those (with `last` alone, the page is taken from the end); hasNextPage is whether more
    than `first` were between the cursors, hasPreviousPage whether more than `last` were.
    Beyond the cursor on the other side of the page (`after` without `last`, `before`
    without `first`), they say whether a message is there, as keyset_slice does.

    With neither `first` nor `last`, the page is the first `cap` messages between the
    cursors (the server's page, not the client's `first`): hasNextPage says whether more
    were between them, or a message is past `before`.
    """
    capped = first is None and last is None and cap is not None
    if capped:
        first = cap
    lowest = max(after or 0, 0) + 1
    highest = min(before if before is not None else count + 1, count + 1) - 1
    available = max(highest - lowest + 1, 0)
    low, high = lowest, highest
    if first is not None:
        high = min(high, low + first - 1)
    if last is not None:
        low = max(low, high - last + 1)
    if low > high:
        low, high = lowest, lowest - 1
    # Past the cursor on the other side, the transcript as it is now: a cursor read before a
    # replace shrank or emptied it may name a seq beyond its last message.
    after_before = before is not None and max(before, 1) <= count
    before_after = after is not None and min(after, count) >= 1
    more = available > first if first is not None else after_before
    return SeqWindow(
        low=low,
        high=high,
        has_next_page=more or (capped and after_before),
        has_previous_page=available > last if last is not None else before_after,
    )
