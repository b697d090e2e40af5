"""Transcripts: append-only message rows numbered by `seq`, reached through their conversation."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from operator import itemgetter

from sqlalchemy import and_, bindparam, delete, or_, select

from graph.domain.errors import invalid
from graph.domain.events import EventKind
from graph.domain.messages import PreparedMessage, kept_prefix
from graph.domain.paging import SeqWindow
from graph.store import event_log, sealed_blocks, search_index
from graph.store.compression import Compression, inflated
from graph.store.encryption import opened_size, sealed_changes
from graph.store.quotas import byte_length
from graph.store.repository.base import Part
from graph.store.rows import Builder
from graph.store.search_index import index_chunk, stored_search_text
from graph.store.sql import Prepared
from graph.store.tables import Conversation, Delegation, Message
from graph.store.tables import message as M
from graph.store.tables import message_dictionary as D

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


_DICTIONARY = Prepared(select(D.c.id).where(D.c.id == bindparam("id")))

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
        expected_message_count: int | None = None,
    ) -> tuple[Conversation, tuple[Message, ...]]:
        """Store only the new messages: the cost does not grow with the transcript."""
        if not messages:
            raise invalid("`messages` must hold at least one message", "messages")
        if expected_message_count is not None and expected_message_count < 0:
            raise invalid("`expectedMessageCount` must be 0 or more", "expectedMessageCount")
        size = sum(len(m.encoded) for m in messages)
        conversation = await self.repo.versions.bump(
            conversation_id,
            field="conversationId",
            expected_version=expected_version,
            expected_message_count=expected_message_count,
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
            # Counted in SQL (a compressed message inflated there), unless sealed: a sealed
            # text is longer than the one counted, and is read back opened.
            text = M.c.data if self.sql.compression is None else inflated(M.c.data)
            gone = await self.sql.rows(
                delete(M)
                .where(M.c.conversation_id == conversation.id, M.c.seq > keep)
                .returning(
                    byte_length(text, is_sqlite=self.sql.is_sqlite)
                    if encryption is None
                    else M.c.data
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
            # them here costs less than the commit a separate batch would add. As many as it
            # wrote (a chunk at least): a backlog waiting before them (a bulk load) is the
            # batches', which let the process's other requests in between.
            await index_chunk(self.sql, max(search_index.CHUNK, len(written)))
        self.repo.publish(
            EventKind.TRANSCRIPT_REPLACED,
            conversation,
            messages=written,
            count_without_messages=None if written else conversation.message_count,
        )
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
        compression = self.sql.compression
        if encryption is not None:
            rows_stored = await encryption.sealed_messages(conversation.id, rows)
            await self.sql.execute_many(_INSERT, rows_stored)
            await sealed_blocks.seal_completed(
                self.sql, conversation.id, [m.text for m in messages], first_seq
            )
        elif compression is not None and compression.compressing and await self._held(compression):
            stored = compression.stored
            await self.sql.execute_many(
                _INSERT,
                [
                    {**row, "data": stored(m.text, m.encoded)}
                    for row, m in zip(rows, messages, strict=True)
                ],
            )
        else:
            if compression is not None:
                compression.texts_stored += len(rows)  # they wait for a dictionary
            await self.sql.execute_many(_INSERT, rows)
        return tuple(
            MESSAGES.one(_INSERTED_ATTRIBUTES, [row[k] for k in _INSERTED]) for row in rows
        )

    async def _held(self, compression: Compression) -> bool:
        """Whether the database still holds the dictionary new messages are compressed with,
        read in this write transaction: `keys encrypt-existing` drops the dictionaries no
        message uses, and a server left running without the key must not write frames that
        name one it dropped (SQLite runs one write transaction at a time: the drop either
        came before this read, or sees this transaction's frames and keeps the dictionary)."""
        if (await self.sql.rows(_DICTIONARY, {"id": compression.newest})).values:
            return True
        compression.dropped(compression.newest)
        return False

    async def pages(
        self, wanted: Sequence[tuple[Conversation, SeqWindow]]
    ) -> dict[tuple[str, SeqWindow], list[Message]]:
        """The messages of each (conversation read under the scope rules, seq window), for
        a list of conversations in one statement: each window is a range of the unique
        (conversation_id, seq) index."""
        ranges = sorted({(c.id, w.low, w.high) for c, w in wanted if w.low <= w.high})
        # By seq: one conversation's ranges may fall in two statements (a list asking for
        # its pages more than once) and overlap, so a message may be read twice.
        by_conversation: dict[str, dict[int, Message]] = {}
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
                by_conversation.setdefault(message.conversation_id, {})[message.seq] = message
        in_order = {
            cid: [read[seq] for seq in sorted(read)] for cid, read in by_conversation.items()
        }
        by_range = {
            (cid, low, high): [m for m in in_order.get(cid, ()) if low <= m.seq <= high]
            for cid, low, high in ranges
        }
        return {(c.id, w): by_range.get((c.id, w.low, w.high), []) for c, w in wanted}

    async def texts(
        self, wanted: Sequence[tuple[Conversation, int]]
    ) -> dict[tuple[str, int], list[str]]:
        """The stored JSON texts of each (conversation, from seq), in one statement (with
        encryption on: their sealed blocks and the rows after them, see sealed_blocks.py)."""
        if len(wanted) == 1:
            ((conversation, low),) = wanted
            return {(conversation.id, low): await self._texts_of_one(conversation.id, low)}
        low = min(seq for _, seq in wanted)
        out: dict[tuple[str, int], list[str]] = {}
        if self.sql.encryption is not None:
            out = await sealed_blocks.texts_of_many(
                self.sql, [(c.id, start) for c, start in wanted], low
            )
            # Where a block is missing: those transcripts' rows alone.
            wanted = [(c, start) for c, start in wanted if (c.id, start) not in out]
            if not wanted:
                return out
        ids = sorted({c.id for c, _ in wanted})
        found = await self.sql.rows(_TEXTS_OF_MANY, {"ids": ids, "low": low})
        by_conversation: dict[str, list[tuple[int, str]]] = {cid: [] for cid in ids}
        for cid, seq, data in found.values:
            by_conversation[cid].append((seq, data))
        for c, start in wanted:
            out[c.id, start] = [data for seq, data in by_conversation[c.id] if seq >= start]
        return out

    async def _texts_of_one(self, conversation_id: str, low: int) -> list[str]:
        if self.sql.encryption is not None:
            texts = await sealed_blocks.texts_of_one(self.sql, conversation_id, low)
            if texts is not None:
                return texts
            # A block missing before the last (sealed before blocks were kept, or not
            # readable then): the rows alone, as without encryption.
        found = await self.sql.rows(_TEXTS_OF_ONE, {"id": conversation_id, "low": low})
        return list(map(itemgetter(0), found.values))

    async def child_texts(self, delegation: Delegation) -> list[str]:
        """Every stored text of the child transcript of `delegation` (read under the scope
        rules: a resume's prior delegation)."""
        found = await self.sql.rows(_ALL_TEXTS, {"id": delegation.child_conversation_id})
        return found.scalars()
