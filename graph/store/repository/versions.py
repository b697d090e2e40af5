"""The guarded update every write to a conversation goes through.

Every write to a conversation (its fields, its transcript, a snapshot, a delegation below
it) bumps `version` in one conditional UPDATE … RETURNING (on SQLite an UPDATE, then the
row read back in the same transaction: see `_statement`). The UPDATE takes the row lock:
writers to one conversation serialise on it, and of several writers with the same expected
version exactly one wins. A lock change goes through the same statement without the bump
(locks are advisory: expectedVersion users are not disturbed by lock traffic).
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import and_, bindparam, case, or_, select, update

from graph.domain import ids
from graph.domain.conversations import lock_refusal
from graph.domain.errors import DomainError, ErrorCode, conflict, count_conflict, not_found
from graph.domain.events import EventKind
from graph.store import scope
from graph.store.repository.base import Part, alive
from graph.store.rows import Builder
from graph.store.sql import Prepared, Rows
from graph.store.tables import Conversation, UTCDateTime
from graph.store.tables import conversation as C

CONVERSATIONS = Builder(Conversation)


class Versions(Part):
    async def bump(
        self,
        conversation_id: str,
        *,
        field: str = "id",
        expected_version: int | None = None,
        expected_message_count: int | None = None,
        values: dict[str, Any] | None = None,
        add: dict[str, int] | None = None,
        ancestry: str | None = None,
    ) -> Conversation:
        """Bump the version of a writable conversation (and set `values`), atomically;
        `add` is added to counters (message_count, token_count, message_bytes, ...).
        CONFLICT unless it is at `expected_version` and holds `expected_message_count`
        messages, each when given. A caller that knows the conversation's `ancestry` passes
        it: its tree's root is then locked without reading it (event_log.lock_tree)."""
        return await self._write(
            conversation_id,
            field=field,
            ancestry=ancestry,
            expected_version=expected_version,
            expected_message_count=expected_message_count,
            values=values or {},
            add=add or {},
            require_unlocked=False,
            bump_version=True,
        )

    async def touch(self, conversation_id: str, *, ancestry: str) -> None:
        """A change to what a conversation shows, made by a write to another (a delegation
        it lists or shows): its version moves and its own stream is told (a client caching
        it by version, a stream that leaves the descendants out). Nothing when it is gone:
        expired alone, the sweep not come yet, or going in the same sweep."""
        try:
            touched = await self.bump(conversation_id, ancestry=ancestry)
        except DomainError as gone:
            if gone.code is not ErrorCode.NOT_FOUND:
                raise
            return
        self.repo.publish(EventKind.CONVERSATION_UPDATED, touched)

    async def set_lock(self, conversation_id: str, *, digest: str, until: Any) -> Conversation:
        """Take the advisory lock of a conversation nobody holds, or that `digest` holds
        already; LOCKED if another holds it, CONFLICT (`token`) if `digest` released it last
        (domain.conversations.lock_refusal)."""
        return await self._write(
            conversation_id,
            field="conversationId",
            ancestry=None,
            expected_version=None,
            expected_message_count=None,
            values={"lock_digest": digest, "locked_until": until},
            add={},
            require_unlocked=True,
            bump_version=False,
        )

    async def _write(
        self,
        conversation_id: str,
        *,
        field: str,
        ancestry: str | None,
        expected_version: int | None,
        expected_message_count: int | None,
        values: dict[str, Any],
        add: dict[str, int],
        require_unlocked: bool,
        bump_version: bool,
    ) -> Conversation:
        cid = ids.parse(conversation_id, what="conversation", field=field)
        if bump_version:  # a write with an event: its tree's root is locked first
            await self.lock_tree(cid, ancestry=ancestry)
        reach = self.reach(C, scope.Access.WRITE)
        returning = not self.sql.is_sqlite
        statement = _statement(
            tuple(sorted(values)),
            reach=reach,
            counters=tuple(sorted(add)),
            conditional=expected_version is not None,
            counted=expected_message_count is not None,
            require_unlocked=require_unlocked,
            bump_version=bump_version,
            returning=returning,
        )
        params = self.params(
            cid=cid,
            expected=expected_version,
            expected_count=expected_message_count,
            **{f"set_{name}": value for name, value in values.items()},
            **{f"add_{name}": value for name, value in add.items()},
        )
        try:
            found = await self._updated(statement, params, cid=cid, returning=returning)
        except DomainError as refused:
            if refused.code is not ErrorCode.NOT_FOUND:
                raise
            # Sealed under a destroyed key (a restored copy): as if deleted, named by the
            # caller's field.
            raise not_found("conversation", field) from None
        if found.values:
            record = CONVERSATIONS.many(found.keys, found.values)[0]
            if bump_version:
                self.repo.not_before(record.updated_at)  # the later instant (_statement)
                if not record.ancestry:
                    self.repo.positions.took(record.id, record.event_position)
            return record
        # Refused: the row as it is now says why.
        current = await self.sql.rows(
            select(C.c.version, C.c.message_count, C.c.lock_digest, C.c.locked_until).where(
                C.c.id == cid, scope.clause(C, reach), alive(C)
            ),
            self.params(),
        )
        if not current.values:
            raise not_found("conversation", field)
        version, count, held_digest, locked_until = current.values[0]
        if require_unlocked:
            raise lock_refusal(
                digest=values["lock_digest"], held_digest=held_digest, locked_until=locked_until
            )
        if expected_version is not None and version != expected_version:
            raise conflict(expected_version, version)
        if expected_message_count is not None and count != expected_message_count:
            raise count_conflict(expected_message_count, count)
        raise DomainError(ErrorCode.CONFLICT, "the conversation changed; retry", [field])

    async def _updated(
        self, statement: Prepared, params: dict[str, Any], *, cid: str, returning: bool
    ) -> Rows:
        """Run the UPDATE; the row as written, or no row when the UPDATE matched none."""
        if returning:
            return await self.sql.rows(statement, params)
        if not await self.sql.execute(statement, params):
            return Rows(tuple(C.c.keys()), [])
        # The row as this transaction just wrote it: SQLite has one writer, so nothing came
        # between. A row sealed under a destroyed key reads as none: refused, as an UPDATE's
        # RETURNING of it is.
        found = await self.sql.rows(_WRITTEN, {"cid": cid})
        if not found.values:
            raise DomainError(ErrorCode.NOT_FOUND, "the conversation cannot be read")
        return found


@functools.cache
def _statement(
    columns: tuple[str, ...],
    *,
    reach: scope.Reach,
    counters: tuple[str, ...],
    conditional: bool,
    counted: bool,
    require_unlocked: bool,
    bump_version: bool,
    returning: bool,
) -> Prepared:
    """The UPDATE (… RETURNING the row, with `returning`) of one shape of write, built and
    compiled once.

    SQLite runs an UPDATE's RETURNING through a temporary table of its own, which costs
    more than the UPDATE itself and a read of the row by its key together; PostgreSQL
    returns the row for nothing, and a second statement would be a second round trip.
    """
    now = bindparam("now", type_=UTCDateTime())
    where = [C.c.id == bindparam("cid"), scope.clause(C, reach), alive(C)]
    if conditional:
        where.append(C.c.version == bindparam("expected"))
    if counted:
        where.append(C.c.message_count == bindparam("expected_count"))
    changes: dict[str, Any] = {
        name: bindparam(f"set_{name}", type_=C.c[CONVERSATIONS.column(name)].type)
        for name in columns
    }
    if require_unlocked:
        # Run out (whoever took it last), held by the digest being set (its holder's retry or
        # renewal), or unheld. An unheld lock keeps the digest of the token that released it
        # (Conversations.release_lock): that token never takes it again.
        digest = changes["lock_digest"]
        where.append(
            or_(
                C.c.locked_until <= now,
                and_(C.c.locked_until.is_not(None), C.c.lock_digest == digest),
                and_(
                    C.c.locked_until.is_(None),
                    or_(C.c.lock_digest.is_(None), C.c.lock_digest != digest),
                ),
            )
        )
    for name in counters:
        column = C.c[CONVERSATIONS.column(name)]
        changes[name] = column + bindparam(f"add_{name}", type_=column.type)
    if bump_version:
        # A writer takes its instant before it has the row (on PostgreSQL it may then wait
        # for it): the one that gets the row after another may hold an earlier instant, and
        # its messages and event would be timed before the other's. The later of the two keeps
        # every write's time in the order of the row's versions, whatever the clock does (the
        # unit of work then writes with it: Repository.not_before). SQLite stores instants as
        # fixed-width text, which compares as the instants do.
        changes.update(version=C.c.version + 1, updated_at=after_last_write(now))
        # A root takes its event's position in the same statement (event_log.Reserved).
        changes["event_position"] = C.c.event_position + case((C.c.ancestry == "", 1), else_=0)
    written = (
        update(C).where(*where).values({CONVERSATIONS.column(k): v for k, v in changes.items()})
    )
    return Prepared(written.returning(*C.c) if returning else written)


def after_last_write(now: Any) -> Any:
    """A conversation's new `updated_at`: the writer's instant, or the row's own if later."""
    return case((C.c.updated_at > now, C.c.updated_at), else_=now)


# The row of the conversation a write has just updated (SQLite, see `_statement`).
_WRITTEN = Prepared(select(*C.c).where(C.c.id == bindparam("cid")))
