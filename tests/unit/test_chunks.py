"""The blocks a write completes, and the packed format of a block's texts."""

from __future__ import annotations

import pytest

from graph.domain.chunks import SIZE, completed, pack, unpack


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
        ['{"content":"a,b\\nc"}', "\n\n", "12,3\n", "é🦓\udcff", "x" * 5000],
    ],
)
def test_packed_texts_unpack_to_the_same(texts: list[str]) -> None:
    assert unpack(pack(texts)) == texts


def test_a_text_that_is_not_a_packed_block_is_refused() -> None:
    with pytest.raises(ValueError):
        unpack("3,4\nabcdef")
