"""Delegations to sub-agents, each with its own child conversation."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from sqlalchemy import (
    ColumnElement,
    and_,
    exists,
    func,
    not_,
    select,
    tuple_,
    update,
)

from graph.domain import ids
from graph.domain.conversations import new_conversation
from graph.domain.delegations import (
    FINAL,
    FINAL_SIGMA,
    OPEN,
    SIGMA,
    DelegationStatus,
    NewDelegation,
    already_final,
    check_completion,
    check_resume,
    check_tier,
    lowered,
    new_delegation,
    resumed_transcript,
    search_pattern,
)
from graph.domain.errors import DomainError, ErrorCode, not_found
from graph.domain.events import EventKind
from graph.domain.messages import PreparedMessage
from graph.store import event_log, scope
from graph.store.encryption import conversation_ref
from graph.store.repository.base import Part, alive
from graph.store.rows import Builder
from graph.store.tables import Delegation
from graph.store.tables import conversation as C
from graph.store.tables import delegation as D

DELEGATIONS = Builder(Delegation)
IDEMPOTENCY_KEY = [
    "workspace_type",
    "workspace_id",
    "owner_type",
    "owner_digest",
    "idempotency_key",
]


class Delegations(Part):
    def _visible(self, access: scope.Access) -> ColumnElement[bool]:
        return and_(self.where(D, access), _parent_alive())

    async def _select(self, *where: ColumnElement[bool]) -> list[Delegation]:
        found = await self.sql.rows(select(D).where(*where), self.params())
        return DELEGATIONS.many(found.keys, found.values)

    # -- reads -------------------------------------------------------------

    async def get_many(self, given: Sequence[str]) -> dict[str, Delegation]:
        wanted = ids.spellings(given)
        if not wanted:
            return {}
        found = await self._select(D.c.id.in_(list(wanted)), self._visible(scope.Access.READ))
        return {spelled: d for d in found for spelled in wanted[d.id]}

    async def get(self, delegation_id: str) -> Delegation | None:
        return (await self.get_many([delegation_id])).get(delegation_id)

    async def by_parent(
        self, keys: Sequence[tuple[str, DelegationStatus | None]]
    ) -> dict[tuple[str, DelegationStatus | None], list[Delegation]]:
        """Delegations of many parent conversations, oldest first, in one statement."""
        parents = sorted({cid for cid, _ in keys})
        found = await self.sql.rows(
            select(D)
            .where(D.c.parent_conversation_id.in_(parents), self._visible(scope.Access.READ))
            .order_by(D.c.created_at, D.c.id),
            self.params(),
        )
        records = DELEGATIONS.many(found.keys, found.values)
        return {
            (cid, status): [
                d
                for d in records
                if d.parent_conversation_id == cid and (status is None or d.status is status)
            ]
            for cid, status in keys
        }

    async def by_child(self, child_ids: Sequence[str]) -> dict[str, Delegation]:
        found = await self._select(
            D.c.child_conversation_id.in_(list(child_ids)), self._visible(scope.Access.READ)
        )
        return {d.child_conversation_id: d for d in found}

    async def latest(
        self, target_tier: str, *, access: scope.Access = scope.Access.READ
    ) -> Delegation | None:
        """The most recent COMPLETED delegation to `target_tier`."""
        check_tier(target_tier)
        found = await self.sql.rows(
            select(D)
            .where(
                self._visible(access),
                D.c.target_tier == target_tier,
                D.c.status == DelegationStatus.COMPLETED,
            )
            .order_by(D.c.completed_at.desc(), D.c.id.desc())
            .limit(1),
            self.params(),
        )
        latest = DELEGATIONS.many(found.keys, found.values)
        return latest[0] if latest else None

    async def search(self, query: str, first: int) -> list[Delegation]:
        """COMPLETED delegations whose summary holds `query`, newest completion first."""
        if self.sql.encryption is not None:
            return await self._search_sealed(query, first)
        # Both backends must answer the same follow-up the same way: both sides lowered
        # letter by letter (domain.delegations.lowered; SQLite's LIKE and lower() fold ASCII
        # letters only, so the SQLite connections have UNICODE_LOWER, see db.py; PostgreSQL's
        # lower() folds every letter in a UTF-8 database).
        folded = (
            func.unicode_lower(D.c.summary)
            if self.sql.is_sqlite
            else func.translate(func.lower(D.c.summary), FINAL_SIGMA, SIGMA)
        )
        found = await self.sql.rows(
            select(D)
            .where(
                self._visible(scope.Access.READ),
                D.c.status == DelegationStatus.COMPLETED,
                folded.like(lowered(search_pattern(query)), escape="\\"),
            )
            .order_by(D.c.completed_at.desc(), D.c.id.desc())
            .limit(first),
            self.params(),
        )
        return DELEGATIONS.many(found.keys, found.values)

    async def _search_sealed(self, query: str, first: int) -> list[Delegation]:
        """`search` over sealed summaries: no index can match inside them, so the completed
        delegations are read newest first, opened, and matched here (lowered, as `search`
        matches)."""
        search_pattern(query)  # the same checks of the query
        needle = lowered(query)
        matched: list[Delegation] = []
        mark: tuple[object, str] | None = None
        while len(matched) < first:
            statement = select(D).where(
                self._visible(scope.Access.READ), D.c.status == DelegationStatus.COMPLETED
            )
            if mark is not None:
                statement = statement.where(tuple_(D.c.completed_at, D.c.id) < tuple_(*mark))
            found = await self.sql.rows(
                statement.order_by(D.c.completed_at.desc(), D.c.id.desc()).limit(500),
                self.params(),
            )
            batch = DELEGATIONS.many(found.keys, found.values)
            matched += [d for d in batch if d.summary is not None and needle in lowered(d.summary)]
            if len(found.values) < 500:
                break
            last = DELEGATIONS.many(found.keys, found.values[-1:])[0]
            mark = (last.completed_at, last.id)
        return matched[:first]

    # -- writes ------------------------------------------------------------

    async def create(
        self,
        parent_conversation_id: str,
        new: NewDelegation,
        *,
        resumed_from_id: str | None = None,
        seed: Sequence[PreparedMessage] = (),
    ) -> Delegation:
        """Create the child conversation and the delegation together (one transaction).

        A retry with the idempotency key of a delegation made under the same parent returns
        that one; a key the tree's owner used under another parent is CONFLICT.
        """
        field = "parentConversationId"
        parent_id = ids.parse(parent_conversation_id, what="conversation", field=field)
        key = new.idempotency_key
        if key is not None:
            if (first := await self._by_key(key, parent_id)) is not None:
                return first
            # A racing create with the key: locked out until it has committed (and is found
            # below), before this one bumps the parent for nothing.
            await self.lock_tree(parent_id)
            if not self.sql.is_sqlite:  # SQLite: the write transaction holds the database
                writable = self.reach(C, scope.Access.WRITE)
                await self.sql.rows(event_log.row_lock(writable), self.params(id=parent_id))
            if (first := await self._by_key(key, parent_id)) is not None:
                return first
        # Bumping the parent proves it exists and is writable, and serialises with its writers.
        parent = await self.repo.versions.bump(parent_id, field=field)
        now = self.repo.now()
        delegation_id = ids.new_id()
        child = await self.repo.conversations.create(
            new_conversation(
                now=now,
                title=new.child_title,
                agent_slug=parent.agent_slug,
                context=parent.context,
            ),
            conversation_id=ids.new_id(),
            below=parent,
            announce=False,  # DELEGATION_CREATED below announces the child
        )
        values = {
            "id": delegation_id,
            "parent_conversation_id": parent.id,
            "child_conversation_id": child.id,
            **scope.inherited_owner(parent),
            "delegating_tier": new.delegating_tier,
            "target_tier": new.target_tier,
            "task": new.task,
            "max_turns": new.max_turns,
            "status": DelegationStatus.RUNNING,
            "resumed_from_id": resumed_from_id,
            "created_at": now,
            "idempotency_key": new.idempotency_key,
        }
        if (encryption := self.sql.encryption) is not None:
            # Under the child's key: the delegation goes with its child, whichever is deleted.
            await encryption.seal_values(conversation_ref(child.id), values, ("task",))
        # The child row references the delegation and the delegation the child: the child
        # is inserted first without its back-reference, then the delegation, then the link.
        statement = self.insert(D).values(values)
        if key is not None:
            statement = statement.on_conflict_do_nothing(index_elements=IDEMPOTENCY_KEY)
        found = await self.sql.rows(statement.returning(*D.c))
        if not found.values:
            raise DomainError(
                ErrorCode.CONFLICT,
                "this `idempotencyKey` was used for a delegation under another conversation",
                ["idempotencyKey"],
            )
        await self.sql.execute(
            update(C)
            .where(C.c.id == child.id)
            .values(parent_delegation_id=delegation_id, expires_at=parent.expires_at)
        )
        record = DELEGATIONS.many(found.keys, found.values)[0]
        self.repo.publish(EventKind.DELEGATION_CREATED, parent, delegation=record)
        if seed:
            # After the event that announces the child: a stream is told of a conversation
            # before it is told of the messages in it.
            await self.repo.transcripts.append(child.id, seed, expected_version=None)
        return record

    async def _by_key(self, key: str, parent_id: str) -> Delegation | None:
        """The delegation made under `parent_id` with idempotency key `key`, if still readable.

        The key of a delegation whose parent expired is released: it starts a new one.
        """
        with_key = and_(self.where(D, scope.Access.WRITE), D.c.idempotency_key == key)
        await self.sql.execute(
            update(D).where(with_key, not_(_parent_alive())).values(idempotency_key=None),
            self.params(),
        )
        found = await self._select(with_key, D.c.parent_conversation_id == parent_id)
        return found[0] if found else None

    async def complete(
        self, delegation_id: str, *, status: DelegationStatus, summary: str | None
    ) -> Delegation:
        check_completion(status, summary)
        did = ids.parse(delegation_id, what="delegation", field="delegationId")
        mine = self._visible(scope.Access.WRITE)
        if not self.sql.is_sqlite:  # the tree's root is locked before this row
            # Of a delegation the caller may write: another tenant's locks nothing.
            above = await self.sql.rows(
                select(D.c.parent_conversation_id).where(D.c.id == did, mine), self.params()
            )
            if above.values:
                await self.lock_tree(above.values[0][0])
        stored: str | bytes | None = summary
        if summary is not None and (encryption := self.sql.encryption) is not None:
            # Only a delegation the caller may write: sealing makes its child's data key
            # where it has none yet (a tree written before encryption was on).
            child = await self.sql.rows(
                select(D.c.child_conversation_id).where(D.c.id == did, mine), self.params()
            )
            if child.values:
                stored = await encryption.seal(conversation_ref(child.values[0][0]), summary)
        found = await self.sql.rows(
            update(D)
            .where(D.c.id == did, mine, D.c.status.in_(OPEN))
            .values(status=status, summary=stored, completed_at=self.repo.now())
            .returning(*D.c),
            self.params(),
        )
        if not found.values:
            current = await self._select(D.c.id == did, mine)
            if not current:
                raise not_found("delegation", "delegationId")
            raise already_final(current[0].status)
        record = DELEGATIONS.many(found.keys, found.values)[0]
        assert record.status in FINAL
        parent = await self.repo.versions.bump(record.parent_conversation_id)
        if record.completed_at is not None and parent.updated_at > record.completed_at:
            # A writer of the parent got its row between this one's instant and its bump (a
            # root is locked by the bump itself): completed when the parent moved, not before.
            found = await self.sql.rows(
                update(D)
                .where(D.c.id == did)
                .values(completed_at=parent.updated_at)
                .returning(*D.c)
            )
            record = DELEGATIONS.many(found.keys, found.values)[0]
        self.repo.publish(EventKind.DELEGATION_COMPLETED, parent, delegation=record)
        # The child transcript shows its delegation (`parentDelegation`), whose status and
        # summary changed: its version moves too, and its own stream, which the parent's
        # event does not reach, is told.
        await self.repo.versions.touch(
            record.child_conversation_id, ancestry=" ".join((*parent.ancestors, parent.id))
        )
        return record

    async def resume(
        self,
        *,
        delegation_id: str | None,
        target_tier: str | None,
        task: str,
        max_turns: int | None,
    ) -> Delegation:
        """A new delegation whose child starts with the prior child's messages, then `task`.

        Only a delegation the caller may write can be resumed: the new one is created under
        the same parent (an ADMIN reads other owners' delegations but resumes only its own).
        """
        check_resume(delegation_id, target_tier, task)
        prior = await self._prior(delegation_id, target_tier)
        seed = resumed_transcript(
            await self.repo.transcripts.child_texts(prior),
            task,
            max_bytes=self.repo.settings.max_message_bytes,
        )
        new = new_delegation(
            delegating_tier=prior.delegating_tier,
            target_tier=prior.target_tier,
            task=task,
            max_turns=max_turns,
        )
        return await self.create(
            prior.parent_conversation_id, new, resumed_from_id=prior.id, seed=seed
        )

    async def _prior(self, delegation_id: str | None, target_tier: str | None) -> Delegation:
        if target_tier is not None:
            latest = await self.latest(target_tier, access=scope.Access.WRITE)
            if latest is None:
                raise not_found("completed delegation to that tier", "targetTier")
            return latest
        did = ids.parse(delegation_id, what="delegation", field="delegationId")
        found = await self._select(D.c.id == did, self._visible(scope.Access.WRITE))
        if not found:
            raise not_found("delegation", "delegationId")
        return found[0]


@functools.cache
def _parent_alive() -> ColumnElement[bool]:
    # A delegation lives as long as its parent conversation is readable.
    return exists().where(C.c.id == D.c.parent_conversation_id, alive(C))
