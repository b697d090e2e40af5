"""Compaction snapshots: the history as it stood before compaction, kept beside the transcript."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from graph.domain import ids
from graph.domain.events import EventKind
from graph.domain.messages import PreparedMessage
from graph.store import scope
from graph.store.encryption import conversation_ref
from graph.store.repository.base import Part, alive
from graph.store.rows import Builder
from graph.store.tables import Conversation, Snapshot
from graph.store.tables import conversation as C
from graph.store.tables import snapshot as S

SNAPSHOTS = Builder(Snapshot)
# A snapshot but its messages.
_HEADS = (S.c.id, S.c.conversation_id, S.c.message_count, S.c.created_at)


class Snapshots(Part):
    async def save(self, conversation_id: str, messages: Sequence[PreparedMessage]) -> Snapshot:
        encoded = b"[" + b",".join(m.encoded for m in messages) + b"]"
        conversation = await self.repo.versions.bump(
            conversation_id, field="conversationId", add={"snapshot_bytes": len(encoded)}
        )
        self.repo.usage.add(conversation, size=len(encoded))
        values = {
            "id": ids.new_id(),
            "conversation_id": conversation.id,
            "message_count": len(messages),
            "messages": encoded.decode("utf-8"),
            "created_at": self.repo.now(),
        }
        stored = values
        if (encryption := self.sql.encryption) is not None:
            stored = dict(values)
            await encryption.seal_values(conversation_ref(conversation.id), stored, ("messages",))
        await self.sql.execute(S.insert().values(stored))
        self.repo.publish(EventKind.SNAPSHOT_SAVED, conversation)
        return SNAPSHOTS.one(SNAPSHOTS.attributes(list(values)), values.values())

    async def of_conversations(
        self, conversations: Sequence[Conversation]
    ) -> dict[str, list[Snapshot]]:
        """The snapshots of each conversation (read under the scope rules), oldest first,
        without their messages: a page and its count need none, and each snapshot holds a
        whole history (`messages_of` reads those of the snapshots a page shows)."""
        ids_ = [c.id for c in conversations]
        found = await self.sql.rows(
            select(*_HEADS)
            .where(S.c.conversation_id.in_(ids_))
            .order_by(S.c.conversation_id, S.c.created_at, S.c.id)
        )
        out: dict[str, list[Snapshot]] = {cid: [] for cid in ids_}
        for snapshot in SNAPSHOTS.many(found.keys, found.values):
            out[snapshot.conversation_id].append(snapshot)
        return out

    async def messages_of(self, snapshots: Sequence[Snapshot]) -> dict[str, str]:
        """The messages of snapshots read through their conversations, by snapshot id."""
        found = await self.sql.rows(
            select(S.c.id, S.c.messages).where(S.c.id.in_([s.id for s in snapshots]))
        )
        return {sid: messages for sid, messages in found.values}

    async def get(self, snapshot_id: str) -> Snapshot | None:
        """A snapshot of a conversation the caller may read, by id."""
        sid = ids.canonical(snapshot_id)
        if sid is None:
            return None
        readable = select(C.c.id).where(self.where(C, scope.Access.READ), alive(C))
        found = await self.sql.rows(
            select(S).where(S.c.id == sid, S.c.conversation_id.in_(readable)), self.params()
        )
        snapshots = SNAPSHOTS.many(found.keys, found.values)
        return snapshots[0] if snapshots else None
