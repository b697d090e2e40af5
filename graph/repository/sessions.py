"""Durable agent-session checkpoints (Manglekit's DurableStateManager), every version kept."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from ..documents import check_text, encode_document
from ..errors import DomainError, ErrorCode, conflict, invalid
from ..pagination import Page, decode_cursor, encode_cursor
from ..records import ReflectOutcome, SessionStateRecord
from ..tables import session_state as SS
from .base import Aggregate
from .scope import owner_clause


def validate_state(session_id: str, state: Any) -> None:
    """The document Manglekit's Checkpoint accepts: a session id and an active envelope id."""
    if not isinstance(state, dict):
        raise invalid("`state` must be a JSON object", "state")
    if state.get("session_id") != session_id:
        raise invalid("`state.session_id` must equal `sessionId`", "state", "session_id")
    envelope = state.get("active_envelope")
    if (
        not isinstance(envelope, dict)
        or not isinstance(envelope.get("id"), str)
        or not (envelope["id"].strip())
    ):
        raise invalid(
            "`state.active_envelope.id` must be a non-empty string",
            "state",
            "active_envelope",
            "id",
        )
    for key in ("logical_facts",):
        value = state.get(key)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            raise invalid(f"`state.{key}` must be a list of strings", "state", key)


SESSION_ID_MAX = 500
# Each lost race means another writer committed a version, so a few passes always suffice
# in practice; the bound only stops a pathological stream of writers from spinning forever.
MAX_VERSION_ATTEMPTS = 20


def _check_session_id(session_id: str, *, required: bool = False) -> None:
    # Reads check too: a NUL would reach PostgreSQL, which refuses it in text.
    check_text(session_id, "sessionId", required=required, max_len=SESSION_ID_MAX)


class Sessions(Aggregate):
    async def checkpoint(
        self,
        *,
        session_id: str,
        state: Any,
        outcome: ReflectOutcome,
        expected_version: int | None,
    ) -> SessionStateRecord:
        _check_session_id(session_id, required=True)
        if outcome is not ReflectOutcome.PROCEED:
            # The loop persists only what Reflect approved: a poisoned state is never stored.
            raise DomainError(
                ErrorCode.POISONED_STATE,
                f"only a PROCEED outcome may be checkpointed (got {outcome.value})",
                ["outcome"],
            )
        validate_state(session_id, state)
        text = encode_document(state, "state")
        for _ in range(MAX_VERSION_ATTEMPTS):
            current = await self._current_version(session_id)
            if expected_version is not None and expected_version != current:
                raise conflict(expected_version, current)
            record = SessionStateRecord(session_id, current + 1, text, outcome, self.repo.now())
            if await self._insert_version(record):
                return record
            # Another writer stored that version first (the unique constraint decided).
            # A conditional write has lost and says so on the next pass; an unconditional
            # one, Manglekit's last-write-wins, takes the next version.
        raise DomainError(ErrorCode.CONFLICT, "too many concurrent checkpoints; retry", ["state"])

    async def _current_version(self, session_id: str) -> int:
        mine = owner_clause(SS, self.principal, own=True)
        current = await self.conn.execute(
            select(func.max(SS.c.version)).where(mine, SS.c.session_id == session_id)
        )
        return current.scalar_one_or_none() or 0

    async def _insert_version(self, record: SessionStateRecord) -> bool:
        """Store one version; False when a concurrent writer already stored that version."""
        p = self.principal
        stmt = (
            self.insert(SS)
            .values(
                workspace_type=p.workspace_type,
                workspace_id=p.workspace_id,
                owner_type=p.owner_type.value,
                owner_digest=p.owner_digest,
                session_id=record.session_id,
                version=record.version,
                state=record.state_json,
                outcome=record.outcome.value,
                created_at=record.created_at,
            )
            .on_conflict_do_nothing()
            .returning(SS.c.id)
        )
        return (await self.conn.execute(stmt)).first() is not None

    async def latest(self, session_id: str) -> SessionStateRecord | None:
        _check_session_id(session_id)
        row = (
            await self.conn.execute(
                select(SS)
                .where(owner_clause(SS, self.principal, own=True), SS.c.session_id == session_id)
                .order_by(SS.c.version.desc())
                .limit(1)
            )
        ).first()
        return SessionStateRecord.from_row(row) if row else None

    async def history(
        self, *, session_id: str, first: int, after: str | None
    ) -> Page[SessionStateRecord]:
        _check_session_id(session_id)
        where = [owner_clause(SS, self.principal, own=True), SS.c.session_id == session_id]
        query = select(SS).where(*where)
        if after is not None:
            (version,) = decode_cursor(after, "after", 1)
            if not isinstance(version, int):
                raise invalid("not a cursor this server issued", "after")
            query = query.where(SS.c.version < version)
        rows = (await self.conn.execute(query.order_by(SS.c.version.desc()).limit(first + 1))).all()
        items = [SessionStateRecord.from_row(r) for r in rows[:first]]

        async def count(conn: AsyncConnection) -> int:
            result = await conn.execute(select(func.count()).select_from(SS).where(*where))
            return int(result.scalar_one())

        return Page(
            items=items,
            cursors=[encode_cursor(s.version) for s in items],
            has_next_page=len(rows) > first,
            has_previous_page=after is not None,
            count=count,
        )

    async def delete(self, session_id: str) -> bool:
        _check_session_id(session_id)
        result = await self.conn.execute(
            delete(SS).where(
                owner_clause(SS, self.principal, own=True), SS.c.session_id == session_id
            )
        )
        return bool(result.rowcount)
