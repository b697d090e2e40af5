"""Transcripts (append-only rows numbered by `seq`) and compaction snapshots."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import bindparam, delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from ..documents import PreparedMessage, check_text, prepare_messages
from ..errors import invalid
from ..pagination import Page, decode_cursor, encode_cursor
from ..records import ConversationRecord, EventKind, MessageRecord, SnapshotRecord
from ..tables import message as M
from ..tables import snapshot as S
from .base import Aggregate
from .conversations import metadata_json
from .driver import Prepared

# The statements of every append and every transcript read, compiled once.
_INSERT = Prepared(
    M.insert(),
    column_keys=["conversation_id", "seq", "role", "data", "digest", "search_text", "created_at"],
)
_TRANSCRIPTS = Prepared(
    select(M.c.conversation_id, M.c.seq, M.c.data)
    .where(M.c.conversation_id.in_(bindparam("ids", expanding=True)), M.c.seq >= bindparam("low"))
    .order_by(M.c.conversation_id, M.c.seq)
)
# The stored transcript's digests, in order: what a save compares before it writes.
_DIGESTS = Prepared(
    select(M.c.digest).where(M.c.conversation_id == bindparam("id")).order_by(M.c.seq)
)
# One conversation's transcript (a dashboard opening it, or a tree of one): the stored texts
# alone, a third of the values to fetch.
_TRANSCRIPT = Prepared(
    select(M.c.data)
    .where(M.c.conversation_id == bindparam("id"), M.c.seq >= bindparam("low"))
    .order_by(M.c.seq)
)


_INDEX_WAITING = (
    text(
        "INSERT INTO message_fts(rowid, search_text) "
        "SELECT m.id, m.search_text FROM message_fts_pending p JOIN message m ON m.id = p.id"
    ),
    text("DELETE FROM message_fts_pending"),
)


async def index_waiting(conn: AsyncConnection) -> None:
    """SQLite: index the messages waiting in message_fts_pending (see graph/search_index.py)."""
    for statement in _INDEX_WAITING:
        await conn.execute(statement)


class Messages(Aggregate):
    def _prepare(self, messages: list[Any]) -> list[PreparedMessage]:
        s = self.repo.settings
        return prepare_messages(
            messages, max_count=s.max_messages_per_call, max_bytes=s.max_message_bytes
        )

    async def _insert(
        self, conversation_id: str, prepared: Sequence[PreparedMessage], first_seq: int
    ) -> tuple[MessageRecord, ...]:
        if not prepared:
            return ()
        now = self.repo.now()
        stored = [
            MessageRecord(conversation_id, first_seq + i, m.role, m.text, now)
            for i, m in enumerate(prepared)
        ]
        rows = [
            {
                "conversation_id": conversation_id,
                "seq": r.seq,
                "role": r.role,
                "data": r.data_json,
                "digest": m.digest,
                "search_text": m.search_text,
                "created_at": now,
            }
            for r, m in zip(stored, prepared, strict=True)
        ]
        await _INSERT.execute_many(self.conn, rows)
        return tuple(stored)

    async def append(
        self, *, conversation_id: str, messages: list[Any], expected_version: int | None
    ) -> tuple[ConversationRecord, tuple[MessageRecord, ...]]:
        """Store only the new messages: the cost does not grow with the transcript."""
        return await self.append_prepared(
            conversation_id=conversation_id,
            prepared=self._prepare(messages),
            expected_version=expected_version,
        )

    async def append_prepared(
        self,
        *,
        conversation_id: str,
        prepared: Sequence[PreparedMessage],
        expected_version: int | None,
    ) -> tuple[ConversationRecord, tuple[MessageRecord, ...]]:
        if not prepared:
            raise invalid("`messages` must hold at least one message", "messages")
        record = await self.repo.conversations.bump(
            conversation_id,
            expected_version=expected_version,
            field="conversationId",
            add_messages=len(prepared),
        )
        stored = await self._insert(record.id, prepared, record.message_count - len(prepared) + 1)
        self.repo.conversations.publish(EventKind.MESSAGES_APPENDED, record, messages=stored)
        return record, stored

    async def replace(
        self,
        *,
        conversation_id: str,
        messages: list[Any],
        expected_version: int | None,
        metadata: Any,
        provider: str | None,
        model: str | None,
        provider_response_id: Any,
        unset: Any,
    ) -> ConversationRecord:
        """Replace the live transcript, writing only what differs from the stored one."""
        prepared = self._prepare(messages)
        check_text(provider, "provider")
        check_text(model, "model")
        if provider_response_id is not unset:
            check_text(provider_response_id, "providerResponseId")
        values: dict[str, Any] = {"message_count": len(prepared)}
        if metadata is not unset and metadata is not None:
            values["metadata"] = metadata_json(metadata)
        # As in the WordPress store: provider and model change only when non-empty.
        if provider:
            values["provider"] = provider
        if model:
            values["model"] = model
        if provider_response_id is not unset:
            values["provider_response_id"] = provider_response_id
        record = await self.repo.conversations.bump(
            conversation_id,
            expected_version=expected_version,
            field="conversationId",
            values=values,
        )
        stored = await _DIGESTS.tuples(self.conn, {"id": record.id})
        keep = 0
        for (old,), new in zip(stored, prepared, strict=False):
            if old != new.digest:
                break
            keep += 1
        if keep < len(stored):
            await self.conn.execute(
                delete(M).where(M.c.conversation_id == record.id, M.c.seq > keep)
            )
        written = await self._insert(record.id, prepared[keep:], keep + 1)
        if written and self.repo.is_sqlite:
            # A save writes many rows at once, or one that a search soon asks for: indexing
            # them here costs less than the commit a separate batch would add.
            await index_waiting(self.conn)
        self.repo.conversations.publish(EventKind.TRANSCRIPT_REPLACED, record, messages=written)
        return record

    async def page(
        self,
        *,
        conversation_id: str,
        first: int | None,
        after: str | None,
        last: int | None,
        before: str | None,
    ) -> Page[MessageRecord]:
        where = [M.c.conversation_id == conversation_id]
        if after is not None:
            where.append(M.c.seq > _seq_cursor(after, "after"))
        if before is not None:
            where.append(M.c.seq < _seq_cursor(before, "before"))
        backward = last is not None and first is None
        limit = last if backward else first
        assert limit is not None
        order = M.c.seq.desc() if backward else M.c.seq
        rows = (
            await self.conn.execute(select(M).where(*where).order_by(order).limit(limit + 1))
        ).all()
        more = len(rows) > limit
        items = [MessageRecord.from_row(r) for r in rows[:limit]]
        if backward:
            items.reverse()

        async def count(conn: AsyncConnection) -> int:
            result = await conn.execute(
                select(func.count()).select_from(M).where(M.c.conversation_id == conversation_id)
            )
            return int(result.scalar_one())

        return Page(
            items=items,
            cursors=[encode_cursor(m.seq) for m in items],
            has_next_page=more if not backward else before is not None,
            has_previous_page=more if backward else after is not None,
            count=count,
        )

    async def transcripts(
        self, keys: Sequence[tuple[str, int]]
    ) -> dict[tuple[str, int], list[str]]:
        """JSON texts of each (conversation, fromSeq) transcript, in one statement."""
        if len(keys) == 1:
            ((cid, low),) = keys
            rows = await _TRANSCRIPT.tuples(self.conn, {"id": cid, "low": low})
            return {keys[0]: list(map(itemgetter(0), rows))}
        ids = sorted({cid for cid, _ in keys})
        low = min(seq for _, seq in keys)
        rows = await _TRANSCRIPTS.tuples(self.conn, {"ids": ids, "low": low})
        by_conversation: dict[str, list[tuple[int, str]]] = {cid: [] for cid in ids}
        for cid, seq, data in rows:
            by_conversation[cid].append((seq, data))
        return {
            (cid, start): [data for seq, data in by_conversation[cid] if seq >= start]
            for cid, start in keys
        }

    # -- snapshots ---------------------------------------------------------

    async def save_snapshot(self, *, conversation_id: str, messages: list[Any]) -> SnapshotRecord:
        s = self.repo.settings
        # A snapshot is the history before compaction: it may exceed one call's
        # message limit, but each message is still checked.
        prepared = prepare_messages(
            messages,
            max_count=max(s.max_messages_per_call * 100, 1),
            max_bytes=s.max_message_bytes,
        )
        record = await self.repo.conversations.bump(conversation_id, field="conversationId")
        now = self.repo.now()
        body = "[" + ",".join(m.text for m in prepared) + "]"
        snap = SnapshotRecord(str(uuid.uuid4()), record.id, len(prepared), body, now)
        await self.conn.execute(
            S.insert().values(
                id=snap.id,
                conversation_id=snap.conversation_id,
                message_count=snap.message_count,
                messages=body,
                created_at=now,
            )
        )
        self.repo.conversations.publish(EventKind.SNAPSHOT_SAVED, record)
        return snap

    async def snapshots(self, conversation_ids: Sequence[str]) -> dict[str, list[SnapshotRecord]]:
        rows = await self.conn.execute(
            select(S)
            .where(S.c.conversation_id.in_(list(conversation_ids)))
            .order_by(S.c.conversation_id, S.c.created_at, S.c.id)
        )
        out: dict[str, list[SnapshotRecord]] = {cid: [] for cid in conversation_ids}
        for row in rows:
            out[row.conversation_id].append(SnapshotRecord.from_row(row))
        return out

    async def snapshot(self, snapshot_id: str) -> SnapshotRecord | None:
        try:
            sid = str(uuid.UUID(snapshot_id))
        except ValueError:
            return None
        row = (await self.conn.execute(select(S).where(S.c.id == sid))).first()
        if row is None:
            return None
        # Visible only through a conversation the principal may read.
        if await self.repo.conversations.get(row.conversation_id) is None:
            return None
        return SnapshotRecord.from_row(row)


def _seq_cursor(cursor: str, field: str) -> int:
    (seq,) = decode_cursor(cursor, field, 1)
    # A forged seq beyond the column's range would fail in the driver, not as bad input.
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq < 2**31:
        raise invalid("not a cursor this server issued", field)
    return seq
