"""Keyset pages: a size within bounds, and walking a connection page by page with the
cursors it hands out yields every item once, in order."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph.domain import cursors, ids, paging
from graph.domain.errors import ErrorCode
from tests.unit.helpers import PROPERTY, raises_domain

T0 = datetime(2024, 1, 1, tzinfo=UTC)
Item = tuple[datetime, str]


def key(item: Item) -> Item:
    return item


def items(count: int, *, same_time: bool = False) -> list[Item]:
    made = [(T0 if same_time else T0 + timedelta(seconds=i), ids.new_id()) for i in range(count)]
    return sorted(made)


@pytest.mark.parametrize(
    ("value", "default", "maximum", "size"),
    [
        (None, 20, 100, 20),
        (None, 200, 100, 100),  # a default above the maximum is capped too
        (0, 20, 100, 0),
        (7, 20, 100, 7),
        (100, 20, 100, 100),
        (101, 20, 100, 100),
        (10**9, 20, 100, 100),
    ],
)
def test_a_page_size_is_capped_at_the_maximum(
    value: int | None, default: int, maximum: int, size: int
) -> None:
    assert paging.page_size(value, default=default, maximum=maximum, field="first") == size


def test_a_negative_page_size_is_invalid_naming_its_argument() -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "last"):
        paging.page_size(-1, default=20, maximum=100, field="last")


def test_the_first_page() -> None:
    all_items = items(5)
    page = paging.keyset_slice(all_items, key, size=2, after=None)
    assert page.items == all_items[:2]
    assert page.has_next_page
    assert not page.has_previous_page
    assert [cursors.keyset(c, "after") for c in page.cursors] == all_items[:2]


def test_the_page_after_a_cursor_starts_after_its_item() -> None:
    all_items = items(5)
    after = cursors.encode_keyset(*all_items[1])
    page = paging.keyset_slice(all_items, key, size=2, after=after)
    assert page.items == all_items[2:4]
    assert page.has_next_page
    assert page.has_previous_page


def test_the_last_page_has_no_next_page() -> None:
    all_items = items(3)
    page = paging.keyset_slice(all_items, key, size=5, after=cursors.encode_keyset(*all_items[0]))
    assert page.items == all_items[1:]
    assert not page.has_next_page
    empty = paging.keyset_slice(all_items, key, size=5, after=cursors.encode_keyset(*all_items[2]))
    assert empty.items == []
    assert empty.cursors == []
    assert not empty.has_next_page


def test_a_cursor_of_a_deleted_item_still_resumes_in_place() -> None:
    all_items = items(4)
    gone = all_items.pop(1)
    page = paging.keyset_slice(all_items, key, size=10, after=cursors.encode_keyset(*gone))
    assert page.items == all_items[1:]


def test_a_page_of_size_zero_is_empty_but_knows_what_follows() -> None:
    page = paging.keyset_slice(items(2), key, size=0, after=None)
    assert page.items == []
    assert page.has_next_page


def test_a_forged_after_cursor_is_invalid_input_naming_its_argument() -> None:
    with raises_domain(ErrorCode.INVALID_INPUT, "snapshotsAfter"):
        paging.keyset_slice(items(2), key, size=1, after="junk", field="snapshotsAfter")
    with raises_domain(ErrorCode.INVALID_INPUT, "after"):
        paging.keyset_slice(items(2), key, size=1, after=cursors.encode_position(1))


@PROPERTY
@given(st.integers(min_value=0, max_value=25), st.integers(min_value=1, max_value=7), st.booleans())
def test_walking_every_page_yields_every_item_once_in_order(
    count: int, size: int, same_time: bool
) -> None:
    all_items = items(count, same_time=same_time)
    seen: list[Item] = []
    after = None
    for _ in range(count + 2):
        page = paging.keyset_slice(all_items, key, size=size, after=after)
        assert len(page.items) <= size
        assert page.has_previous_page is (after is not None and bool(seen))
        seen += page.items
        if not page.has_next_page:
            break
        after = page.cursors[-1]
    assert seen == all_items


def _reference_page(
    count: int, *, first: int | None, after: int | None, last: int | None, before: int | None
) -> tuple[list[int], bool, bool]:
    """A transcript page the way the Relay connection spec reads it: the rows between the
    cursors, the first `first` of them, then the last `last` of those."""
    everything = range(1, count + 1)
    rows = [s for s in everything if (after is None or s > after)]
    rows = [s for s in rows if before is None or s < before]
    items = rows if first is None else rows[:first]
    if last is not None:
        items = items[len(items) - last :] if last < len(items) else items
    return (
        items,
        len(rows) > first
        if first is not None
        else any(before is not None and s >= before for s in everything),
        len(rows) > last
        if last is not None
        else any(after is not None and s <= after for s in everything),
    )


@pytest.mark.parametrize("count", [0, 1, 2, 5])
def test_a_seq_window_selects_what_a_keyset_query_would(count: int) -> None:
    sizes = [None, 0, 1, 2, 7]
    marks = [None, -3, 0, 1, 2, count, count + 1, count + 4]
    for first, last, after, before in itertools.product(sizes, sizes, marks, marks):
        if first is None and last is None:
            continue
        window = paging.seq_window(count, first=first, after=after, last=last, before=before)
        got = (
            list(range(window.low, window.high + 1)),
            window.has_next_page,
            window.has_previous_page,
        )
        want = _reference_page(count, first=first, after=after, last=last, before=before)
        assert got == want, (count, first, after, last, before)


@pytest.mark.parametrize("count", [0, 1, 5, 12])
def test_a_seq_window_without_first_or_last_is_the_servers_page(count: int) -> None:
    """Neither `first` nor `last`: the first `cap` messages between the cursors, and
    hasNextPage also says whether a message is past `before` (it said whether more than
    the cap were between the cursors only: false before the last page of a transcript)."""
    marks = [None, 0, 1, 3, count, count + 1]
    for after, before in itertools.product(marks, marks):
        for cap in (2, 100):
            window = paging.seq_window(
                count, first=None, after=after, last=None, before=before, cap=cap
            )
            rows, more, previous = _reference_page(
                count, first=cap, after=after, last=None, before=before
            )
            past_before = before is not None and any(s >= before for s in range(1, count + 1))
            assert list(range(window.low, window.high + 1)) == rows, (count, after, before, cap)
            assert window.has_next_page is (more or past_before), (count, after, before, cap)
            assert window.has_previous_page is previous, (count, after, before, cap)
