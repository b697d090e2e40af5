"""Transcripts: append-only message rows numbered by `seq`, reached through their conversation."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, or_, select, union_all

from graph.domain import chunks
from graph.domain.errors import invalid
from graph.domain.events import EventKind
from graph.domain.messages import PreparedMessage, kept_prefix
from graph.domain.paging import SeqWindow
from graph.store import event_log
from graph.store.encryption import conversation_ref, opened_size, sealed_changes
from graph.store.quotas import byte_length
from graph.store.repository.base import Part
from graph.store.rows import Builder
from graph.store.search_index import index_waiting, stored_search_text
from graph.store.sql import Prepared, Sql
from graph.store.tables import Conversation, Delegation, Message
from graph.store.tables import conversation as C
from graph.store.tables import message as M
from graph.store.tables import message_chunk as K

MESSAGES = Builder(Message)
_INSERTED = ("conversation_id", "seq", "role", "data", "created_at")
_INSERTED_ATTRIBUTES = MESSAGES.attributes(_INSERTED)

# The statements of every append and every transcript read, compiled once.
_INSERT = Prepared(M.insert(), column_keys=[*_INSERTED, "digest", "search_text"])
_TEXTS_OF_MANY = Prepared(
    select(M.c.conversation_id, M.c.seq, M.c.data)
    .where(M.c.conversation_id.in_(bindparam("ids", expanding=True)), M.c.seq >= bindparam("low"))
    .order_by(M.c.conversation_id, M.c.seq)
)
# One conversation's transcript (a dashboard opening it, or a tree of one): the stored texts
# alone, a third of the values to fetch.
_TEXTS_OF_ONE = Prepared(
    select(M.c.data)
    .where(M.c.conversation_id == bindparam("id"), M.c.seq >= bindparam("low"))
    .order_by(M.c.seq)
)
# The stored transcript's digests, in order: what a save compares before it writes.
_DIGESTS = Prepared(
    select(M.c.digest).where(M.c.conversation_id == bindparam("id")).order_by(M.c.seq)
)
_ALL_TEXTS = Prepared(
    select(M.c.data).where(M.c.conversation_id == bindparam("id")).order_by(M.c.seq)
)
_TEXTS_BETWEEN = Prepared(
    select(M.c.data)
    .where(
        M.c.conversation_id == bindparam("id"), M.c.seq.between(bindparam("low"), bindparam("high"))
    )
    .order_by(M.c.seq)
)
# With encryption on, a transcript from seq `low` in one statement (one committed state,
# whatever the caller's transaction): its sealed blocks (domain/chunks.py), then the rows
# after the last block, one per row (first_seq = last_seq = seq).
_LAST_BLOCKED = (
    select(func.coalesce(func.max(K.c.last_seq), 0))
    .where(K.c.conversation_id == bindparam("id"))
    .scalar_subquery()
)
_BLOCKS_AND_TAIL = Prepared(
    union_all(
        select(K.c.first_seq, K.c.last_seq, K.c.data).where(
            K.c.conversation_id == bindparam("id"), K.c.last_seq >= bindparam("low")
        ),
        select(M.c.seq.label("first_seq"), M.c.seq.label("last_seq"), M.c.data).where(
            M.c.conversation_id == bindparam("id"),
            M.c.seq >= bindparam("low"),
            M.c.seq > _LAST_BLOCKED,
        ),
    ).order_by("first_seq")
)
_INSERT_CHUNK = Prepared(
    K.insert(), column_keys=["conversation_id", "first_seq", "last_seq", "data"]
)
# The same for several transcripts (a tree's), in one statement.
_BLOCKS_AND_TAILS = Prepared(
    union_all(
        select(K.c.conversation_id, K.c.first_seq, K.c.last_seq, K.c.data).where(
            K.c.conversation_id.in_(bindparam("ids", expanding=True)),
            K.c.last_seq >= bindparam("low"),
        ),
        select(
            M.c.conversation_id, M.c.seq.label("first_seq"), M.c.seq.label("last_seq"), M.c.data
        ).where(
            M.c.conversation_id.in_(bindparam("ids", expanding=True)),
            M.c.seq >= bindparam("low"),
            M.c.seq
            > select(func.coalesce(func.max(K.c.last_seq), 0))
            .where(K.c.conversation_id == M.c.conversation_id)
            .scalar_subquery(),
        ),
    ).order_by("conversation_id", "first_seq")
)
_LOCKED_COUNT = Prepared(
    select(C.c.message_count).where(C.c.id == bindparam("id")).with_for_update()
)
_BLOCK_STARTS = Prepared(select(K.c.first_seq).where(K.c.conversation_id == bindparam("id")))


# Ranges per statement of `pages`; its statements are compiled for powers of two up to it.
_MOST_RANGES = 128


def _slots(ranges: int) -> int:
    return 1 << max(ranges - 1, 0).bit_length()


@functools.cache
def _ranges(slots: int) -> Prepared:
    """The messages of `slots` (conversation, lowest seq, highest seq) ranges."""
    return Prepared(
        select(M)
        .where(
            or_(
                *(
                    and_(
                        M.c.conversation_id == bindparam(f"c{i}"),
                        M.c.seq.between(bindparam(f"l{i}"), bindparam(f"h{i}")),
                    )
                    for i in range(slots)
                )
            )
        )
        .order_by(M.c.conversation_id, M.c.seq)
    )


class Transcripts(Part):
    async def append(
        self,
        conversation_id: str,
        messages: Sequence[PreparedMessage],
        *,
        expected_version: int | None,
    ) -> tuple[Conversation, tuple[Message, ...]]:
        """Store only the new messages: the cost does not grow with the transcript."""
        if not messages:
            raise invalid("`messages` must hold at least one message", "messages")
        size = sum(len(m.encoded) for m in messages)
        conversation = await self.repo.versions.bump(
            conversation_id,
            field="conversationId",
            expected_version=expected_version,
            add={
                "message_count": len(messages),
                "token_count": sum(m.token_count for m in messages),
                "message_bytes": size,
            },
        )
        self.repo.usage.add(conversation, messages=len(messages), size=size)
        stored = await self._insert(
            conversation, messages, conversation.message_count - len(messages) + 1
        )
        self.repo.publish(EventKind.MESSAGES_APPENDED, conversation, messages=stored)
        return conversation, stored

    async def replace(
        self,
        conversation_id: str,
        messages: Sequence[PreparedMessage],
        *,
        changes: dict[str, object],
        expected_version: int | None,
    ) -> Conversation:
        """Replace the live transcript, writing only what differs from the stored one."""
        sizes = [len(m.encoded) for m in messages]
        encryption = self.sql.encryption
        if encryption is not None and changes:
            changes = await sealed_changes(encryption, conversation_id, changes)
        conversation = await self.repo.versions.bump(
            conversation_id,
            field="conversationId",
            expected_version=expected_version,
            values={
                **changes,
                "message_count": len(messages),
                "token_count": sum(m.token_count for m in messages),
                "message_bytes": sum(sizes),
            },
        )
        stored = (await self.sql.rows(_DIGESTS, {"id": conversation.id})).scalars()
        digests = [m.digest for m in messages[: len(stored)]]  # only these can be kept
        if encryption is not None:
            keyed = (await encryption.ready()).content_digest
            digests = [keyed(d) for d in digests]
        keep = kept_prefix(stored, digests)
        removed = 0
        if keep < len(stored):
            # The log rows of appends that referenced them get their copy first.
            await event_log.keep_messages(
                self.sql, conversation.root_id, conversation.id, above=keep
            )
            gone = await self.sql.rows(
                delete(M)
                .where(M.c.conversation_id == conversation.id, M.c.seq > keep)
                .returning(
                    byte_length(M.c.data, is_sqlite=self.sql.is_sqlite)
                    if encryption is None
                    else M.c.data  # the sealed text is longer than the one counted
                )
            )
            removed = sum(gone.scalars()) if encryption is None else opened_size(gone.scalars())
        # The kept messages are the same texts (same digests): only the rest changes.
        self.repo.usage.add(
            conversation, messages=len(messages) - len(stored), size=sum(sizes[keep:]) - removed
        )
        written = await self._insert(conversation, messages[keep:], keep + 1)
        if written and self.sql.is_sqlite:
            # A save writes many rows at once, or one that a search soon asks for: indexing
            # them here costs less than the commit a separate batch would add.
            await index_waiting(self.sql)
        self.repo.publish(EventKind.TRANSCRIPT_REPLACED, conversation, messages=written)
        return conversation

    async def _insert(
        self, conversation: Conversation, messages: Sequence[PreparedMessage], first_seq: int
    ) -> tuple[Message, ...]:
        if not messages:
            return ()
        now = self.repo.now()
        rows = [
            {
                "conversation_id": conversation.id,
                "seq": first_seq + i,
                "role": m.role,
                "data": m.text,
                "digest": m.digest,
                "search_text": stored_search_text(self.sql, m),
                "created_at": now,
            }
            for i, m in enumerate(messages)
        ]
        encryption = self.sql.encryption
        if encryption is not None:
            rows_stored = await encryption.sealed_messages(conversation.id, rows)
            await self.sql.execute_many(_INSERT, rows_stored)
            await self._seal_blocks(conversation.id, messages, first_seq)
        else:
            await self.sql.execute_many(_INSERT, rows)
        return tuple(
            MESSAGES.one(_INSERTED_ATTRIBUTES, [row[k] for k in _INSERTED]) for row in rows
        )

    async def _seal_blocks(
        self, conversation_id: str, messages: Sequence[PreparedMessage], first_seq: int
    ) -> None:
        """Seal each block of the transcript that writing `messages` from `first_seq` on
        completed, as one value (encryption on; see domain/chunks.py)."""
        blocks = chunks.completed(first_seq, first_seq + len(messages) - 1)
        if not blocks:
            return
        texts = [m.text for m in messages]
        low = blocks[0][0]
        if low < first_seq:  # the first block began before this write: its stored texts
            stored = await _stored_texts(self.sql, conversation_id, low, first_seq - 1)
            if stored is None:
                blocks = blocks[1:]  # not all readable: the rows alone serve that block
            else:
                texts, first_seq = [*stored, *texts], low
        await _insert_blocks(self.sql, conversation_id, blocks, texts, first_seq)

    async def pages(
        self, wanted: Sequence[tuple[Conversation, SeqWindow]]
    ) -> dict[tuple[str, SeqWindow], list[Message]]:
        """The messages of each (conversation read under the scope rules, seq window), for
        a list of conversations in one statement: each window is a range of the unique
        (conversation_id, seq) index."""
        ranges = sorted({(c.id, w.low, w.high) for c, w in wanted if w.low <= w.high})
        by_conversation: dict[str, list[Message]] = {}
        for start in range(0, len(ranges), _MOST_RANGES):
            chunk = ranges[start : start + _MOST_RANGES]
            slots = _slots(len(chunk))
            params: dict[str, object] = {}
            for i in range(slots):
                # Unused slots repeat the first range: the same rows, read once.
                cid, low, high = chunk[i] if i < len(chunk) else chunk[0]
                params.update({f"c{i}": cid, f"l{i}": low, f"h{i}": high})
            found = await self.sql.rows(_ranges(slots), params)
            for message in MESSAGES.many(found.keys, found.values):
                by_conversation.setdefault(message.conversation_id, []).append(message)
        by_range = {
            (cid, low, high): [m for m in by_conversation.get(cid, ()) if low <= m.seq <= high]
            for cid, low, high in ranges
        }
        return {(c.id, w): by_range.get((c.id, w.low, w.high), []) for c, w in wanted}

    async def texts(
        self, wanted: Sequence[tuple[Conversation, int]]
    ) -> dict[tuple[str, int], list[str]]:
        """The stored JSON texts of each (conversation, from seq), in one statement (with
        encryption on: their sealed blocks and the rows after them; see _texts_of_one)."""
        if len(wanted) == 1:
            ((conversation, low),) = wanted
            return {(conversation.id, low): await self._texts_of_one(conversation.id, low)}
        ids = sorted({c.id for c, _ in wanted})
        low = min(seq for _, seq in wanted)
        out: dict[tuple[str, int], list[str]] = {}
        if self.sql.encryption is not None:
            found = await self.sql.rows(_BLOCKS_AND_TAILS, {"ids": ids, "low": low})
            parts: dict[str, list[tuple[Any, ...]]] = {cid: [] for cid in ids}
            for row in found.values:
                parts[row[0]].append(row[1:])
            for c, start in wanted:
                texts = _joined(start, parts[c.id])
                if texts is not None:
                    out[c.id, start] = texts
            wanted = [(c, start) for c, start in wanted if (c.id, start) not in out]
            if not wanted:
                return out
            ids = sorted({c.id for c, _ in wanted})  # a block missing: their rows alone
        found = await self.sql.rows(_TEXTS_OF_MANY, {"ids": ids, "low": low})
        by_conversation: dict[str, list[tuple[int, str]]] = {cid: [] for cid in ids}
        for cid, seq, data in found.values:
            by_conversation[cid].append((seq, data))
        for c, start in wanted:
            out[c.id, start] = [data for seq, data in by_conversation[c.id] if seq >= start]
        return out

    async def _texts_of_one(self, conversation_id: str, low: int) -> list[str]:
        params = {"id": conversation_id, "low": low}
        if self.sql.encryption is not None:
            texts = _joined(low, (await self.sql.rows(_BLOCKS_AND_TAIL, params)).values)
            if texts is not None:
                return texts
            # A block missing before the last (sealed before blocks were kept, or not
            # readable then): the rows alone, as without encryption.
        found = await self.sql.rows(_TEXTS_OF_ONE, params)
        return list(map(itemgetter(0), found.values))

    async def child_texts(self, delegation: Delegation) -> list[str]:
        """Every stored text of the child transcript of `delegation` (read under the scope
        rules: a resume's prior delegation)."""
        found = await self.sql.rows(_ALL_TEXTS, {"id": delegation.child_conversation_id})
        return found.scalars()


async def seal_missing_blocks(sql: Sql, conversation_id: str) -> int:
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
    if all(first in have for first, _ in complete):
        return 0
    texts = await _stored_texts(sql, conversation_id, 1, complete[-1][1])
    if texts is None:
        return 0
    missing = [(first, last) for first, last in complete if first not in have]
    return await _insert_blocks(sql, conversation_id, missing, texts, 1)


async def _stored_texts(sql: Sql, conversation_id: str, low: int, high: int) -> list[str] | None:
    """The opened texts of messages `low..high`; None unless every one could be opened."""
    found = await sql.rows(_TEXTS_BETWEEN, {"id": conversation_id, "low": low, "high": high})
    return found.scalars() if len(found.values) == high - low + 1 else None


async def _insert_blocks(
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
    rows = [
        {
            "conversation_id": conversation_id,
            "first_seq": first,
            "last_seq": last,
            "data": await encryption.seal(
                ref, chunks.pack(texts[first - first_seq : last - first_seq + 1])
            ),
        }
        for first, last in blocks
    ]
    if rows:
        await sql.execute_many(_INSERT_CHUNK, rows)
    return len(rows)


def _joined(low: int, parts: Sequence[tuple[Any, ...]]) -> list[str] | None:
    """The texts from seq `low` of (first seq, last seq, text or packed block) parts in seq
    order; None if they leave a gap."""
    texts: list[str] = []
    for first, last, value in parts:
        if last < low:
            continue  # before `low` (a tree's transcripts are read from the lowest start)
        if first > low:
            return None
        if last > first:
            texts.extend(chunks.unpack(value)[low - first :])
        else:
            texts.append(value)
        low = last + 1
    return texts
