"""Blocks of a transcript sealed together (with encryption on): their bounds, their format,
and a transcript read back from its blocks and rows.

A transcript's messages `1..SIZE`, `SIZE+1..2*SIZE`, ... form blocks. Once a block is
complete its texts are also kept packed in one value, sealed with one AEAD call, so that
reading a transcript opens one value per block instead of one per message
(store/sealed_blocks.py). The packed text is the texts joined by newlines: a stored
message is compact JSON, which holds none (JSON escapes control characters in strings),
so that unpacking is one split. A block is a copy of its messages: the
database drops it when one of them is deleted (migration 0014's trigger, which finds a
message's block by SIZE: changing SIZE takes a migration that rewrites the blocks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SIZE = 64


def completed(first_seq: int, last_seq: int) -> list[tuple[int, int]]:
    """The (first, last) seqs of the blocks that writing messages `first_seq..last_seq`
    completes (a block is complete when its last message is written)."""
    start = -(-first_seq // SIZE) * SIZE  # the first block end at or after first_seq
    return [(end - SIZE + 1, end) for end in range(start or SIZE, last_seq + 1, SIZE)]


def pack(texts: Sequence[str]) -> str:
    """The texts of a block as one text; ValueError if one holds a newline (not a stored
    message: the block is then not kept, and its rows serve it)."""
    packed = "\n".join(texts)
    if packed.count("\n") != len(texts) - 1:
        raise ValueError("a text of the block holds a newline")
    return packed


def unpack(packed: str) -> list[str]:
    return packed.split("\n")


def joined(low: int, parts: Sequence[tuple[Any, ...]]) -> list[str] | None:
    """The texts from seq `low` of (first seq, last seq, text or packed block) parts in seq
    order; None if they leave a gap."""
    texts: list[str] = []
    for first, last, value in parts:
        if last < low:
            continue  # before `low` (a tree's transcripts are read from the lowest start)
        if first > low:
            return None
        if last > first:
            block = unpack(value)
            if len(block) != last - first + 1:
                return None  # not what this block should hold: its rows serve it
            texts.extend(block[low - first :])
        else:
            texts.append(value)
        low = last + 1
    return texts
