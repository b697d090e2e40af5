"""Delegations to sub-agents, each with its own child conversation."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, exists, not_, select, update

from ..documents import PreparedMessage, check_text, prepare_message
from ..errors import DomainError, ErrorCode, invalid, not_found
from ..jsoncodec import loads
from ..records import DelegationRecord, DelegationStatus, EventKind
from ..tables import conversation as C
from ..tables import delegation as D
from ..tables import message as M
from .base import Aggregate
from .scope import alive, owner_clause

TITLE_TASK_CHARS = 60


def _uuid(value: str | None, field: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise not_found("delegation", field) from None


class Delegations(Aggregate):
    def _visible(self, *, own: bool = False) -> ColumnElement[bool]:
        """Readable delegations (ADMIN: the workspace's) or, with `own`, the caller's own."""
        return and_(owner_clause(D, self.principal, own=own), self._parent_alive())

    def _parent_alive(self) -> ColumnElement[bool]:
        # A delegation lives as long as its parent conversation is readable.
        return exists().where(C.c.id == D.c.parent_conversation_id, alive(C, self.repo.now()))

    async def get_many(self, ids: Sequence[str]) -> dict[str, DelegationRecord]:
        wanted: dict[str, str] = {}
        for given in ids:
            try:
                wanted[str(uuid.UUID(given))] = given
            except (ValueError, AttributeError, TypeError):
                continue
        if not wanted:
            return {}
        rows = await self.conn.execute(select(D).where(D.c.id.in_(list(wanted)), self._visible()))
        return {wanted[r.id]: DelegationRecord.from_row(r) for r in rows}

    async def get(self, delegation_id: str) -> DelegationRecord | None:
        return (await self.get_many([delegation_id])).get(delegation_id)

    async def by_parent(
        self, keys: Sequence[tuple[str, DelegationStatus | None]]
    ) -> dict[tuple[str, DelegationStatus | None], list[DelegationRecord]]:
        """Delegations of many parent conversations, oldest first, in one statement."""
        parents = sorted({cid for cid, _ in keys})
        rows = await self.conn.execute(
            select(D)
            .where(D.c.parent_conversation_id.in_(parents), self._visible())
            .order_by(D.c.created_at, D.c.id)
        )
        records = [DelegationRecord.from_row(r) for r in rows]
        return {
            (cid, status): [
                d
                for d in records
                if d.parent_conversation_id == cid and (status is None or d.status is status)
            ]
            for cid, status in keys
        }

    async def by_child(self, child_ids: Sequence[str]) -> dict[str, DelegationRecord]:
        rows = await self.conn.execute(
            select(D).where(D.c.child_conversation_id.in_(list(child_ids)), self._visible())
        )
        return {r.child_conversation_id: DelegationRecord.from_row(r) for r in rows}

    async def latest(self, target_tier: str, *, own: bool = False) -> DelegationRecord | None:
        check_text(target_tier, "targetTier", max_len=200)
        row = (
            await self.conn.execute(
                select(D)
                .where(
                    self._visible(own=own),
                    D.c.target_tier == target_tier,
                    D.c.status == DelegationStatus.COMPLETED.value,
                )
                .order_by(D.c.completed_at.desc(), D.c.id.desc())
                .limit(1)
            )
        ).first()
        return DelegationRecord.from_row(row) if row else None

    async def search(self, query: str, first: int) -> list[DelegationRecord]:
        check_text(query, "query")
        # A substring match, as entropic's follow-up tool does; LIKE wildcards are escaped.
        # ILIKE, because SQLite's LIKE ignores case and PostgreSQL's does not: both backends
        # must answer the same follow-up the same way (SQLite folds ASCII letters only).
        pattern = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = await self.conn.execute(
            select(D)
            .where(
                self._visible(),
                D.c.status == DelegationStatus.COMPLETED.value,
                D.c.summary.ilike(pattern, escape="\\"),
            )
            .order_by(D.c.completed_at.desc(), D.c.id.desc())
            .limit(first)
        )
        return [DelegationRecord.from_row(r) for r in rows]

    # -- writes ------------------------------------------------------------

    async def create(
        self,
        *,
        parent_conversation_id: str,
        delegating_tier: str,
        target_tier: str,
        task: str,
        max_turns: int | None,
        resumed_from_id: str | None = None,
        seed_messages: Sequence[PreparedMessage] = (),
        idempotency_key: str | None = None,
    ) -> DelegationRecord:
        """Create the child conversation and the delegation together (one transaction)."""
        check_text(delegating_tier, "delegatingTier", required=True, max_len=200)
        check_text(target_tier, "targetTier", required=True, max_len=200)
        check_text(task, "task", required=True, max_len=1_000_000)
        check_text(idempotency_key, "idempotencyKey", max_len=200)
        if idempotency_key is not None:
            if not idempotency_key.strip():
                raise invalid(
                    "`idempotencyKey` must not be blank; omit it instead", "idempotencyKey"
                )
            first = await self._by_key(idempotency_key)
            if first is not None:
                return first
        conversations = self.repo.conversations
        # Bumping the parent proves it exists and is ours, and serialises with its writers.
        parent = await conversations.bump(parent_conversation_id, field="parentConversationId")
        if idempotency_key is not None:
            # A racing create with the key committed while this one waited for the parent.
            first = await self._by_key(idempotency_key)
            if first is not None:
                return first
        delegation_id = str(uuid.uuid4())
        child_id = str(uuid.uuid4())
        now = self.repo.now()
        values = {
            "id": delegation_id,
            "parent_conversation_id": parent.id,
            "child_conversation_id": child_id,
            "workspace_type": self.principal.workspace_type,
            "workspace_id": self.principal.workspace_id,
            "owner_type": self.principal.owner_type.value,
            "owner_digest": self.principal.owner_digest,
            "delegating_tier": delegating_tier,
            "target_tier": target_tier,
            "task": task,
            "max_turns": max_turns if max_turns is not None and max_turns > 0 else None,
            "status": DelegationStatus.RUNNING.value,
            "resumed_from_id": resumed_from_id,
            "created_at": now,
            "idempotency_key": idempotency_key,
        }
        # The child row references the delegation and the delegation the child: insert the
        # child first without its back-reference, then the delegation, then link them.
        child = await conversations.create(
            title=f"Delegation: {target_tier} — {task[:TITLE_TASK_CHARS]}",
            agent_slug=parent.agent_slug,
            metadata=None,
            context=parent.context,
            expires_at=None,
            idempotency_key=None,
            ancestry=(*parent.ancestry, parent.id),
            conversation_id=child_id,
            announce=False,  # DELEGATION_CREATED below announces the child
        )
        await self.conn.execute(D.insert().values(values))
        await self.conn.execute(
            update(C)
            .where(C.c.id == child_id)
            .values(parent_delegation_id=delegation_id, expires_at=parent.expires_at)
        )
        if seed_messages:
            await self.repo.messages.append_prepared(
                conversation_id=child.id, prepared=seed_messages, expected_version=None
            )
        record = DelegationRecord.from_row(
            (await self.conn.execute(select(D).where(D.c.id == delegation_id))).one()
        )
        conversations.publish(EventKind.DELEGATION_CREATED, parent, delegation=record)
        return record

    async def _by_key(self, key: str) -> DelegationRecord | None:
        """The caller's delegation made with idempotency key `key`, if it is still readable.

        The key of a delegation whose parent expired is released: it starts a new one.
        """
        mine = owner_clause(D, self.principal, own=True)
        await self.conn.execute(
            update(D)
            .where(mine, D.c.idempotency_key == key, not_(self._parent_alive()))
            .values(idempotency_key=None)
        )
        row = (await self.conn.execute(select(D).where(mine, D.c.idempotency_key == key))).first()
        return DelegationRecord.from_row(row) if row else None

    async def complete(
        self, *, delegation_id: str, status: DelegationStatus, summary: str | None
    ) -> DelegationRecord:
        if status not in (DelegationStatus.COMPLETED, DelegationStatus.FAILED):
            raise invalid("`status` must be COMPLETED or FAILED", "status")
        check_text(summary, "summary", max_len=1_000_000)
        did = _uuid(delegation_id, "delegationId")
        now = self.repo.now()
        mine = self._visible(own=True)
        row = (
            await self.conn.execute(
                update(D)
                .where(
                    D.c.id == did,
                    mine,
                    D.c.status.in_(
                        [DelegationStatus.PENDING.value, DelegationStatus.RUNNING.value]
                    ),
                )
                .values(status=status.value, summary=summary, completed_at=now)
                .returning(*D.c)
            )
        ).first()
        if row is None:
            current = (
                await self.conn.execute(select(D.c.status).where(D.c.id == did, mine))
            ).scalar_one_or_none()
            if current is None:
                raise not_found("delegation", "delegationId")
            raise DomainError(
                ErrorCode.INVALID_TRANSITION,
                f"the delegation is already {current}; it can be completed once",
                ["delegationId"],
            )
        record = DelegationRecord.from_row(row)
        parent = await self.repo.conversations.bump(record.parent_conversation_id)
        self.repo.conversations.publish(EventKind.DELEGATION_COMPLETED, parent, delegation=record)
        return record

    async def resume(
        self,
        *,
        delegation_id: str | None,
        target_tier: str | None,
        task: str,
        max_turns: int | None,
    ) -> DelegationRecord:
        """A new delegation whose child starts with the prior child's messages, then `task`."""
        if (delegation_id is None) == (target_tier is None):
            raise invalid(
                "give exactly one of `delegationId` and `targetTier`",
                "delegationId" if delegation_id is not None else "targetTier",
            )
        check_text(task, "task", required=True, max_len=1_000_000)
        prior = await self._prior(delegation_id, target_tier)
        return await self.create(
            parent_conversation_id=prior.parent_conversation_id,
            delegating_tier=prior.delegating_tier,
            target_tier=prior.target_tier,
            task=task,
            max_turns=max_turns,
            resumed_from_id=prior.id,
            seed_messages=await self._seed(prior, task),
        )

    async def _prior(self, delegation_id: str | None, target_tier: str | None) -> DelegationRecord:
        # Only the caller's own delegations: the new one is created under the same parent,
        # which an ADMIN reading another owner's delegation could not write to.
        if target_tier is not None:
            latest = await self.latest(target_tier, own=True)
            if latest is None:
                raise not_found("completed delegation to that tier", "targetTier")
            return latest
        did = _uuid(delegation_id, "delegationId")
        row = (
            await self.conn.execute(select(D).where(D.c.id == did, self._visible(own=True)))
        ).first()
        if row is None:
            raise not_found("delegation", "delegationId")
        return DelegationRecord.from_row(row)

    async def _seed(self, prior: DelegationRecord, task: str) -> list[PreparedMessage]:
        """The prior child's `role`/`content` messages (no empty roles), then `task`."""
        texts = (
            (
                await self.conn.execute(
                    select(M.c.data)
                    .where(M.c.conversation_id == prior.child_conversation_id)
                    .order_by(M.c.seq)
                )
            )
            .scalars()
            .all()
        )
        seed: list[Any] = []
        for data in texts:
            message = loads(data)
            role = message.get("role")
            if isinstance(role, str) and role.strip():
                seed.append({"role": role, "content": message.get("content")})
        seed.append({"role": "user", "content": task})
        max_bytes = self.repo.settings.max_message_bytes
        return [prepare_message(m, field=["task"], max_bytes=max_bytes) for m in seed]
