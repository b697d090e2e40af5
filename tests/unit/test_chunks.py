"""The blocks a write completes, and the packed format of a block's texts."""

from __future__ import annotations

import pytest

from graph.domain.chunks import SIZE, completed, joined, pack, unpack


@pytest.mark.parametrize(
    ("first", "last", "blocks"),
    [
        (1, SIZE - 1, []),
        (1, SIZE, [(1, SIZE)]),
        (SIZE, SIZE, [(1, SIZE)]),
        (SIZE + 1, 2 * SIZE - 1, []),
        (SIZE - 1, 2 * SIZE, [(1, SIZE), (SIZE + 1, 2 * SIZE)]),
        (2, 3 * SIZE + 5, [(1, SIZE), (SIZE + 1, 2 * SIZE), (2 * SIZE + 1, 3 * SIZE)]),
    ],
)
def test_the_blocks_a_write_completes(first: int, last: int, blocks: list[tuple[int, int]]) -> None:
    assert completed(first, last) == blocks


@pytest.mark.parametrize(
    "texts",
    [
        ["{}"],
        ["", "a", ""],
        ['{"content":"a,b\\nc"}', "12,3", "é🦓\udcff", "x" * 5000],
    ],
)
def test_packed_texts_unpack_to_the_same(texts: list[str]) -> None:
    assert unpack(pack(texts)) == texts


def test_a_text_with_a_newline_is_not_packed() -> None:
    # Never a stored message (compact JSON escapes it); refused rather than split wrong.
    with pytest.raises(ValueError):
        pack(["{}", "a\nb"])


def test_a_block_that_unpacks_to_another_count_is_a_gap() -> None:
    assert joined(1, [(1, 3, pack(["a", "b"]))]) is None


def _block(first: int, last: int) -> tuple[int, int, str]:
    return (first, last, pack([f"m{seq}" for seq in range(first, last + 1)]))


def _row(seq: int) -> tuple[int, int, str]:
    return (seq, seq, f"m{seq}")


def _texts(low: int, high: int) -> list[str]:
    return [f"m{seq}" for seq in range(low, high + 1)]


@pytest.mark.parametrize("low", [1, 2, SIZE, SIZE + 1, 2 * SIZE, 2 * SIZE + 3])
def test_blocks_then_rows_join_into_the_texts_from_low(low: int) -> None:
    parts = [_block(1, SIZE), _block(SIZE + 1, 2 * SIZE), _row(2 * SIZE + 1), _row(2 * SIZE + 2)]
    parts += [_row(2 * SIZE + 3)]
    assert joined(low, parts) == _texts(low, 2 * SIZE + 3)


def test_parts_before_low_are_passed_over() -> None:
    assert joined(SIZE + 2, [_block(1, SIZE), _block(SIZE + 1, 2 * SIZE)]) == _texts(
        SIZE + 2, 2 * SIZE
    )


@pytest.mark.parametrize(
    "parts",
    [
        [_block(SIZE + 1, 2 * SIZE)],  # the first block missing
        [_block(1, SIZE), _row(SIZE + 2)],  # a row missing
        [_block(1, SIZE), _block(2 * SIZE + 1, 3 * SIZE)],  # a block missing between
    ],
)
def test_a_gap_is_none(parts: list[tuple[int, int, str]]) -> None:
    assert joined(1, parts) is None


def test_nothing_from_low_is_no_text() -> None:
    assert joined(5, []) == []
