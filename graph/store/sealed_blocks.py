"""The sealed blocks of transcripts, with encryption on (domain/chunks.py).

The write that completes a block of 64 messages also stores them packed and sealed as one
value in `message_chunk` (`seal_completed`); `keys encrypt-existing` seals the blocks of
transcripts written before (`seal_missing`). A transcript is read, in one statement (one
committed state, whatever the caller's transaction), as its blocks then the rows after the
last block; the caller reads the rows alone when the blocks leave a gap (None). Blocks are
copies: the database drops one when any of its messages is deleted (migration 0014).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, select, union_all

from graph.domain import chunks
from graph.store import event_log
from graph.store.encryption import conversation_ref
from graph.store.sql import Prepared, Sql
from graph.store.tables import conversation as C
from graph.store.tables import message as M
from graph.store.tables import message_chunk as K

_TEXTS_BETWEEN = Prepared(
    select(M.c.data)
    .where(
        M.c.conversation_id == bindparam("id"), M.c.seq.between(bindparam("low"), bindparam("high"))
    )
    .order_by(M.c.seq)
)
_INSERT = Prepared(K.insert(), column_keys=["conversation_id", "first_seq", "last_seq", "data"])


def _blocks_then_rows(*, many: bool) -> Prepared:
    """A transcript from seq `low` (of conversation `id`, or of each of `ids` with `many`,
    the conversation's id first in each row): its blocks, then the rows after its last
    block, one per row (first_seq = last_seq = seq). Each conversation's last block is found
    once, not once per row: for one conversation a subquery of its own, for several their
    last blocks grouped and joined."""

    def wanted(column: Any) -> Any:
        return column.in_(bindparam("ids", expanding=True)) if many else column == bindparam("id")

    upto = select(func.max(K.c.last_seq).label("upto")).where(wanted(K.c.conversation_id))
    rows: Any = M
    after: Any
    if many:
        last = upto.add_columns(K.c.conversation_id).group_by(K.c.conversation_id).subquery()
        rows = M.outerjoin(last, last.c.conversation_id == M.c.conversation_id)
        after = last.c.upto
    else:
        after = upto.scalar_subquery()
    return Prepared(
        union_all(
            select(
                *([K.c.conversation_id] if many else []), K.c.first_seq, K.c.last_seq, K.c.data
            ).where(wanted(K.c.conversation_id), K.c.last_seq >= bindparam("low")),
            select(
                *([M.c.conversation_id] if many else []),
                M.c.seq.label("first_seq"),
                M.c.seq.label("last_seq"),
                M.c.data,
            )
            .select_from(rows)
            .where(
                wanted(M.c.conversation_id),
                M.c.seq >= bindparam("low"),
                M.c.seq > func.coalesce(after, 0),
            ),
        ).order_by(*(["conversation_id"] if many else []), "first_seq")
    )


_BLOCKS_AND_TAIL = _blocks_then_rows(many=False)
_BLOCKS_AND_TAILS = _blocks_then_rows(many=True)  # a tree's transcripts in one statement
_LOCKED_COUNT = Prepared(
    select(C.c.message_count).where(C.c.id == bindparam("id")).with_for_update()
)
_BLOCK_STARTS = Prepared(select(K.c.first_seq).where(K.c.conversation_id == bindparam("id")))


async def seal_completed(
    sql: Sql, conversation_id: str, texts: Sequence[str], first_seq: int
) -> None:
    """Seal each block that writing `texts` (messages `first_seq` on) completed."""
    blocks = chunks.completed(first_seq, first_seq + len(texts) - 1)
    if not blocks:
        return
    low = blocks[0][0]
    if low < first_seq:  # the first block began before this write: its stored texts
        stored = await _stored_texts(sql, conversation_id, low, first_seq - 1)
        if stored is None:
            blocks = blocks[1:]  # not all readable: the rows alone serve that block
        else:
            texts, first_seq = [*stored, *texts], low
    await _insert(sql, conversation_id, blocks, texts, first_seq)


async def seal_missing(sql: Sql, conversation_id: str) -> int:
    """Seal the complete blocks of a transcript that have no sealed value (its messages
    written before blocks were kept, or with encryption off); how many. Its tree's root and
    then its row are locked first, as a write to its transcript locks them: no write can
    change the messages between their read and their block's insert."""
    await event_log.lock_tree(sql, conversation_id)
    found = await sql.rows(_LOCKED_COUNT, {"id": conversation_id})
    if not found.values:
        return 0
    have = set((await sql.rows(_BLOCK_STARTS, {"id": conversation_id})).scalars())
    complete = chunks.completed(1, int(found.values[0][0]))
    missing = [(first, last) for first, last in complete if first not in have]
    if not missing:
        return 0
    # The texts from the first missing block on: those of blocks kept already are not read.
    low = missing[0][0]
    texts = await _stored_texts(sql, conversation_id, low, missing[-1][1])
    if texts is None:
        return 0
    return await _insert(sql, conversation_id, missing, texts, low)


async def texts_of_one(sql: Sql, conversation_id: str, low: int) -> list[str] | None:
    """The texts of a transcript from seq `low`; None if its blocks leave a gap."""
    found = await sql.rows(_BLOCKS_AND_TAIL, {"id": conversation_id, "low": low})
    return chunks.joined(low, found.values)


async def texts_of_many(
    sql: Sql, wanted: Sequence[tuple[str, int]], low: int
) -> dict[tuple[str, int], list[str]]:
    """The texts of each (conversation, from seq) of `wanted`, all from seq `low` or later,
    in one statement; those whose blocks leave a gap are left out."""
    ids = sorted({cid for cid, _ in wanted})
    found = await sql.rows(_BLOCKS_AND_TAILS, {"ids": ids, "low": low})
    parts: dict[str, list[tuple[Any, ...]]] = {cid: [] for cid in ids}
    for row in found.values:
        parts[row[0]].append(row[1:])
    out = {}
    for cid, start in wanted:
        texts = chunks.joined(start, parts[cid])
        if texts is not None:
            out[cid, start] = texts
    return out


async def _stored_texts(sql: Sql, conversation_id: str, low: int, high: int) -> list[str] | None:
    """The opened texts of messages `low..high`; None unless every one could be opened."""
    found = await sql.rows(_TEXTS_BETWEEN, {"id": conversation_id, "low": low, "high": high})
    return found.scalars() if len(found.values) == high - low + 1 else None


async def _insert(
    sql: Sql,
    conversation_id: str,
    blocks: Sequence[tuple[int, int]],
    texts: Sequence[str],
    first_seq: int,
) -> int:
    """Store `blocks` (first, last seqs) of `texts` (the texts from `first_seq` on), each
    packed and sealed as one value."""
    encryption = sql.encryption
    assert encryption is not None
    ref = conversation_ref(conversation_id)
    rows = []
    for first, last in blocks:
        try:
            packed = chunks.pack(texts[first - first_seq : last - first_seq + 1])
        except ValueError:
            continue  # not stored messages as this code writes them: the rows serve it
        sealed = await encryption.seal(ref, packed)
        rows.append(
            {
                "conversation_id": conversation_id,
                "first_seq": first,
                "last_seq": last,
                "data": sealed,
            }
        )
    if rows:
        await sql.execute_many(_INSERT, rows)
    return len(rows)
