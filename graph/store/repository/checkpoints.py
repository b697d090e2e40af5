"""Durable agent-session checkpoints (Manglekit's DurableStateManager), every version kept."""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, bindparam, delete, func, select

from graph.domain import cursors
from graph.domain.checkpoints import (
    MAX_VERSION_ATTEMPTS,
    ReflectOutcome,
    check_session_id,
    checkpoint_document,
)
from graph.domain.errors import DomainError, ErrorCode, conflict
from graph.domain.paging import Page
from graph.store import scope
from graph.store.repository.base import Part
from graph.store.rows import Builder
from graph.store.tables import SessionState
from graph.store.tables import session_state as SS
from graph.store.tables import session_version_floor as F

CHECKPOINTS = Builder(SessionState)


class Checkpoints(Part):
    async def save(
        self,
        *,
        session_id: str,
        state: object,
        outcome: ReflectOutcome,
        expected_version: int | None,
    ) -> SessionState:
        """Store the next version of a session's state (PROCEED only; see domain.checkpoints)."""
        document = checkpoint_document(session_id, state, outcome)
        digest = self._digest(session_id)
        await self._serialize(digest)
        for _ in range(MAX_VERSION_ATTEMPTS):
            current, floor = await self._versions(session_id, digest)
            if expected_version is not None and expected_version != current:
                raise conflict(expected_version, current)
            stored = await self._insert_version(
                session_id, max(current, floor) + 1, document, outcome, generation=floor
            )
            if stored is not None:
                return stored
            # Another writer stored that version first (the unique constraint decided).
            # A conditional write has lost and says so on the next pass; an unconditional
            # one, Manglekit's last-write-wins, takes the next version.
        raise DomainError(ErrorCode.CONFLICT, "too many concurrent checkpoints; retry", ["state"])

    async def _serialize(self, digest: str) -> None:
        """PostgreSQL: wait for the session's other writers (checkpoints, deletes) to commit,
        so that the next version is free and of the current generation. Without it,
        concurrent last-write-wins checkpoints raced for each version (INSERT … ON CONFLICT
        DO NOTHING) and with a pool's worth of writers some lost every pass. SQLite has one
        writer at a time: nothing to wait for."""
        if self.sql.is_sqlite:
            return
        key = "checkpoint " + " ".join(
            (*map(str, scope.owner_values(self.principal).values()), digest)
        )
        await self.sql.rows(select(func.pg_advisory_xact_lock(func.hashtextextended(key, 0))))

    async def _versions(self, session_id: str, digest: str) -> tuple[int, int]:
        """The session's current version (0: none stored) and the last version it had when
        it was deleted (0: never deleted), which the next version must pass. `digest`: the
        session id's (`_digest`)."""
        current = (
            select(func.max(SS.c.version))
            .where(self.where(SS, scope.Access.WRITE), SS.c.session_id == session_id)
            .scalar_subquery()
        )
        floor = (
            select(F.c.version)
            .where(self.where(F, scope.Access.WRITE), F.c.session_digest == bindparam("digest"))
            .scalar_subquery()
        )
        found = await self.sql.rows(select(current, floor), self.params(digest=digest))
        top, deleted = found.values[0]
        return int(top or 0), int(deleted or 0)

    def _digest(self, session_id: str) -> str:
        return self.repo.keyring.digest("session", session_id)

    async def _insert_version(
        self,
        session_id: str,
        version: int,
        document: str,
        outcome: ReflectOutcome,
        *,
        generation: int,
    ) -> SessionState | None:
        """Store one version; None when a concurrent writer already stored that version."""
        values = {
            **scope.owner_values(self.principal),
            "session_id": session_id,
            "version": version,
            "state": document,
            "outcome": outcome,
            "created_at": self.repo.now(),
        }
        if (encryption := self.sql.encryption) is not None:
            index = await encryption.ready()
            ref = index.session_ref(values, session_id, generation)
            await encryption.seal_values(ref, values, ("state",))
        found = await self.sql.rows(
            self.insert(SS).values(values).on_conflict_do_nothing().returning(*SS.c)
        )
        stored = CHECKPOINTS.many(found.keys, found.values)
        return stored[0] if stored else None

    async def latest(self, session_id: str) -> SessionState | None:
        check_session_id(session_id)
        found = await self.sql.rows(
            select(SS)
            .where(self.where(SS, scope.Access.READ), SS.c.session_id == session_id)
            .order_by(SS.c.version.desc())
            .limit(1),
            self.params(),
        )
        latest = CHECKPOINTS.many(found.keys, found.values)
        return latest[0] if latest else None

    async def history(
        self, session_id: str, *, first: int, after: str | None
    ) -> Page[SessionState]:
        """The stored versions, newest first."""
        check_session_id(session_id)
        statement = select(SS).where(self._of(session_id))
        mark = None if after is None else cursors.position(after, "after")
        if mark is not None:
            statement = statement.where(SS.c.version < mark)
        found = await self.sql.rows(
            statement.order_by(SS.c.version.desc()).limit(first + 1), self.params()
        )
        items = CHECKPOINTS.many(found.keys, found.values[:first])
        return Page(
            items=items,
            cursors=[cursors.encode_position(s.version) for s in items],
            has_next_page=len(found.values) > first,
            # A version at or past the cursor: one read before the session was deleted may
            # have none left.
            has_previous_page=mark is not None and await self._any_from(session_id, mark),
        )

    async def _any_from(self, session_id: str, version: int) -> bool:
        statement = select(SS.c.version).where(self._of(session_id), SS.c.version >= version)
        return bool((await self.sql.rows(statement.limit(1), self.params())).values)

    async def count(self, session_id: str) -> int:
        statement = select(func.count()).select_from(SS).where(self._of(session_id))
        return int((await self.sql.rows(statement, self.params())).scalars()[0])

    def _of(self, session_id: str) -> ColumnElement[bool]:
        return and_(self.where(SS, scope.Access.READ), SS.c.session_id == session_id)

    async def delete(self, session_id: str) -> bool:
        """Delete every version of a session; False when it had none (deletes are idempotent)."""
        check_session_id(session_id)
        # After the checkpoints under way: one that read the generation this delete ends
        # would otherwise commit after it, sealed with the key it destroys.
        digest = self._digest(session_id)
        await self._serialize(digest)
        _, generation = await self._versions(session_id, digest)
        gone = await self.sql.rows(
            delete(SS)
            .where(self.where(SS, scope.Access.WRITE), SS.c.session_id == session_id)
            .returning(SS.c.version),
            self.params(),
        )
        deleted = bool(gone.values)
        if deleted:
            # Its next checkpoint numbers on from here (the rows deleted were all above
            # any floor kept before: each was written after it).
            floor = self.insert(F).values(
                **scope.owner_values(self.principal),
                session_digest=digest,
                version=max(gone.scalars()),
            )
            await self.sql.execute(
                floor.on_conflict_do_update(
                    index_elements=list(F.primary_key.columns.keys()),
                    set_={"version": floor.excluded.version},
                )
            )
        if deleted and (encryption := self.sql.encryption) is not None:
            index = await encryption.ready()
            owner = scope.owner_values(self.principal)
            # The key of the generation this delete ends; and generation 0's, which the
            # checkpoints written after an earlier delete by a release before generations
            # were sealed with.
            self.repo.shredded.extend(
                {index.session_ref(owner, session_id, g) for g in (generation, 0)}
            )
        return deleted
