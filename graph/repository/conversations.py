"""Conversations: create, read, list, update, delete, locks and the pending-session lookup."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    JSON,
    ColumnElement,
    Integer,
    String,
    and_,
    bindparam,
    cast,
    column,
    delete,
    false,
    func,
    not_,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from ..crypto import new_lock_token
from ..documents import check_text, encode_document
from ..errors import DomainError, ErrorCode, conflict, invalid, not_found
from ..pagination import Page, decode_cursor, encode_cursor
from ..principal import OwnerType
from ..records import ConversationRecord, Event, EventKind
from ..tables import UTCDateTime
from ..tables import conversation as C
from ..tables import message as M
from .base import Aggregate
from .driver import Prepared
from .scope import (
    alive,
    alive_bound,
    own_clause_bound,
    own_params,
    owner_clause,
    workspace_clause_bound,
)

MAX_LOCK_TTL = 24 * 3600


@dataclass(frozen=True, slots=True)
class ConversationFilter:
    agent_slug: str | None = None
    context: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    root_only: bool = False
    search: str | None = None
    owner: tuple[OwnerType, str] | None = None  # (type, key): ADMIN only


def parse_uuid(value: str, field: str) -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise not_found("conversation", field) from None


def metadata_json(value: Any, field: str = "metadata") -> str:
    if value is None:
        return "{}"
    if not isinstance(value, dict):
        raise invalid("`metadata` must be a JSON object", field)
    return encode_document(value, field)


class Conversations(Aggregate):
    # -- reads -------------------------------------------------------------

    def _visible(self, now: datetime) -> ColumnElement[bool]:
        return and_(owner_clause(C, self.principal), alive(C, now))

    async def get(self, conversation_id: str) -> ConversationRecord | None:
        found = await self.get_many([conversation_id])
        return found.get(conversation_id)

    async def get_many(self, ids: Sequence[str]) -> dict[str, ConversationRecord]:
        """Visible conversations by id; keys are the ids as given."""
        wanted = {normal: given for given in ids if (normal := _normal_uuid(given))}
        if not wanted:
            return {}
        # The same scope as owner_clause, as a statement compiled once (a hot read).
        statement = _GET_IN_WORKSPACE if self.principal.is_admin else _GET_OWN
        rows = await statement.rows(
            self.conn, {"ids": list(wanted), "now": self.repo.now(), **own_params(self.principal)}
        )
        return {wanted[r._mapping["id"]]: ConversationRecord.from_row(r) for r in rows}

    async def find(
        self, *, where: ConversationFilter, first: int, after: str | None
    ) -> Page[ConversationRecord]:
        clauses = [self._visible(self.repo.now()), *self._filter_clauses(where)]
        query = select(C).where(*clauses)
        if after is not None:
            query = query.where(tuple_(C.c.created_at, C.c.id) < tuple_(*_keyset(after, "after")))
        rows = (
            await self.conn.execute(
                query.order_by(C.c.created_at.desc(), C.c.id.desc()).limit(first + 1)
            )
        ).all()
        items = [ConversationRecord.from_row(r) for r in rows[:first]]

        async def count(conn: AsyncConnection) -> int:
            result = await conn.execute(select(func.count()).select_from(C).where(*clauses))
            return int(result.scalar_one())

        return Page(
            items=items,
            cursors=[encode_cursor(c.created_at.isoformat(), c.id) for c in items],
            has_next_page=len(rows) > first,
            has_previous_page=after is not None,
            count=count,
        )

    def _filter_clauses(self, where: ConversationFilter) -> list[ColumnElement[bool]]:
        clauses: list[ColumnElement[bool]] = []
        if where.owner is not None and self.principal.is_admin:
            owner_type, key = where.owner
            clauses.append(
                owner_clause(
                    C, self.principal, owner=(owner_type, self.repo.keyring.owner_digest(key))
                )
            )
        if where.agent_slug is not None:
            clauses.append(_equals(C.c.agent_slug, where.agent_slug))
        if where.context is not None:
            clauses.append(_equals(C.c.context, where.context))
        if where.created_after is not None:
            clauses.append(C.c.created_at > where.created_after)
        if where.created_before is not None:
            clauses.append(C.c.created_at < where.created_before)
        if where.root_only:
            clauses.append(C.c.parent_delegation_id.is_(None))
        # A search without a single word (blank, or NUL only) does not filter.
        words = (where.search or "").replace("\x00", " ").split()
        if words:
            clauses.append(C.c.id.in_(self._search(words)))
        return clauses

    def _search(self, words: list[str]) -> Any:
        if self.repo.is_sqlite:
            # Every word as a quoted phrase: user text never reaches FTS5's query syntax.
            match = " ".join('"' + w.replace('"', '""') + '"' for w in words)
            hits = (
                text("SELECT rowid FROM message_fts WHERE message_fts MATCH :q")
                .bindparams(q=match)
                .columns(column("rowid", Integer))
            )
            return select(M.c.conversation_id).where(M.c.id.in_(hits))
        return select(M.c.conversation_id).where(
            func.to_tsvector("simple", func.coalesce(M.c.search_text, "")).op("@@")(
                func.plainto_tsquery("simple", " ".join(words))
            )
        )

    async def recent_pending(
        self, *, within_seconds: int, context: str, token_id: str | None
    ) -> ConversationRecord | None:
        if within_seconds < 1:
            raise invalid("`withinSeconds` must be at least 1", "withinSeconds")
        now = self.repo.now()
        query = select(C).where(
            owner_clause(C, self.principal, own=True),
            alive(C, now),
            _equals(C.c.context, context),
            C.c.created_at >= now - timedelta(seconds=within_seconds),
            # A delegation's child transcript is not a session a client could be retrying.
            C.c.parent_delegation_id.is_(None),
        )
        if token_id is not None:
            query = query.where(_equals(self._metadata_text("token_id"), token_id))
        row = (
            await self.conn.execute(query.order_by(C.c.created_at.desc(), C.c.id.desc()).limit(1))
        ).first()
        # Only the newest one counts: an older pending session is not a retry of this request.
        record = ConversationRecord.from_row(row) if row is not None else None
        return record if record is not None and record.is_pending(now) else None

    def _metadata_text(self, key: str) -> ColumnElement[str]:
        """A top-level metadata value as text (numbers too), in the dialect's JSON functions."""
        if self.repo.is_sqlite:
            return cast(func.json_extract(C.c.metadata, f"$.{key}"), String)
        # json, not jsonb: the stored text may hold \u0000, which jsonb refuses.
        return cast(C.c.metadata, JSON)[key].as_string()

    # -- writes ------------------------------------------------------------

    async def create(
        self,
        *,
        title: str | None,
        agent_slug: str,
        metadata: Any,
        context: str,
        expires_at: datetime | None,
        idempotency_key: str | None,
        parent_delegation_id: str | None = None,
        ancestry: tuple[str, ...] = (),
        conversation_id: str | None = None,
        announce: bool = True,
    ) -> ConversationRecord:
        check_text(title, "title")
        check_text(agent_slug, "agentSlug", max_len=200)
        check_text(context, "context", required=True, max_len=200)
        check_text(idempotency_key, "idempotencyKey", max_len=200)
        if idempotency_key is not None and not idempotency_key.strip():
            # A client sending "" every time would collapse all its creates into one.
            raise invalid("`idempotencyKey` must not be blank; omit it instead", "idempotencyKey")
        meta = metadata_json(metadata)
        now = self.repo.now()
        if expires_at is not None and expires_at <= now:
            raise invalid("`expiresAt` must be in the future", "expiresAt")
        p = self.principal
        values = {
            "id": conversation_id or str(uuid.uuid4()),
            "workspace_type": p.workspace_type,
            "workspace_id": p.workspace_id,
            "owner_type": p.owner_type.value,
            "owner_digest": p.owner_digest,
            "title": title,
            "agent_slug": agent_slug,
            "context": context,
            "metadata": meta,
            "version": 1,
            "message_count": 0,
            "parent_delegation_id": parent_delegation_id,
            "ancestry": " ".join(ancestry),
            "created_at": now,
            "updated_at": now,
            "expires_at": expires_at,
            "idempotency_key": idempotency_key,
        }
        if idempotency_key is None:
            row = (await self.conn.execute(C.insert().values(values).returning(*C.c))).one()
            record = ConversationRecord.from_row(row)
        else:
            holder = and_(owner_clause(C, p, own=True), C.c.idempotency_key == idempotency_key)
            # An expired holder of the key is gone for every read: the key starts a new one.
            await self.conn.execute(delete(C).where(holder, not_(alive(C, now))))
            # A retry with the same key returns the first conversation, even when two
            # replicas race: the unique constraint decides, the loser reads the winner.
            stmt = (
                self.insert(C)
                .values(values)
                .on_conflict_do_nothing(
                    index_elements=[
                        "workspace_type",
                        "workspace_id",
                        "owner_type",
                        "owner_digest",
                        "idempotency_key",
                    ]
                )
                .returning(*C.c)
            )
            inserted = (await self.conn.execute(stmt)).first()
            if inserted is None:
                existing = (await self.conn.execute(select(C).where(holder))).one()
                return ConversationRecord.from_row(existing)
            record = ConversationRecord.from_row(inserted)
        if announce:
            self.publish(EventKind.CONVERSATION_UPDATED, record)
        return record

    async def bump(
        self,
        conversation_id: str,
        *,
        expected_version: int | None = None,
        field: str = "id",
        values: dict[str, Any] | None = None,
        add_messages: int = 0,
        require_unlocked: bool = False,
        bump_version: bool = True,
    ) -> ConversationRecord:
        """Bump the version of a writable conversation (and set `values`), atomically.

        The conditional UPDATE takes the row lock: writers to one conversation
        serialise on it, and exactly one of several with the same expected version wins.
        """
        cid = parse_uuid(conversation_id, field)
        now = self.repo.now()
        values = values or {}
        stmt = _bump_statement(
            tuple(sorted(values)),
            add_messages=bool(add_messages),
            conditional=expected_version is not None,
            require_unlocked=require_unlocked,
            bump_version=bump_version,
        )
        params: dict[str, Any] = {
            "cid": cid,
            "now": now,
            "expected": expected_version,
            "add_messages": add_messages,
            **own_params(self.principal),
            **{f"set_{name}": value for name, value in values.items()},
        }
        rows = await stmt.rows(self.conn, params)
        if rows:
            return ConversationRecord.from_row(rows[0])
        current = (
            await self.conn.execute(
                select(C.c.version).where(
                    C.c.id == cid, owner_clause(C, self.principal, own=True), alive(C, now)
                )
            )
        ).scalar_one_or_none()
        if current is None:
            raise not_found("conversation", field)
        if expected_version is not None and current != expected_version:
            raise conflict(expected_version, current)
        raise DomainError(ErrorCode.CONFLICT, "the conversation changed; retry", [field])

    async def update(
        self,
        *,
        conversation_id: str,
        title: Any,
        metadata: Any,
        provider: Any,
        model: Any,
        provider_response_id: Any,
        expires_at: Any,
        mark_read: bool,
        expected_version: int | None,
        unset: Any,
    ) -> ConversationRecord:
        values: dict[str, Any] = {}
        for name, key, value in (
            ("title", "title", title),
            ("provider", "provider", provider),
            ("model", "model", model),
            ("providerResponseId", "provider_response_id", provider_response_id),
        ):
            if value is not unset:
                check_text(value, name)
                values[key] = value
        if metadata is not unset:
            values["metadata"] = metadata_json(metadata)
        now = self.repo.now()
        if expires_at is not unset:
            if expires_at is not None and expires_at <= now:
                raise invalid("`expiresAt` must be in the future", "expiresAt")
            values["expires_at"] = expires_at
        if mark_read:
            values["last_read_at"] = now
        record = await self.bump(conversation_id, expected_version=expected_version, values=values)
        if "expires_at" in values:
            await self._expire_descendants(record, values["expires_at"])
        self.publish(EventKind.CONVERSATION_UPDATED, record)
        return record

    async def _expire_descendants(self, record: ConversationRecord, at: datetime | None) -> None:
        # Child transcripts live and die with the conversation above them.
        marker = f"% {record.id} %"
        await self.conn.execute(
            update(C)
            .where(
                C.c.workspace_type == record.workspace_type,
                C.c.workspace_id == record.workspace_id,
                (" " + C.c.ancestry + " ").like(marker),
            )
            .values(expires_at=at)
        )

    async def delete(self, conversation_id: str) -> bool:
        conversation_id = _normal_uuid(conversation_id) or ""
        if not conversation_id:
            return False
        now = self.repo.now()
        row = (
            await self.conn.execute(
                delete(C)
                .where(
                    C.c.id == conversation_id,
                    owner_clause(C, self.principal, own=True),
                    alive(C, now),
                )
                .returning(*C.c)
            )
        ).first()
        if row is None:
            return False
        self.publish(EventKind.CONVERSATION_DELETED, ConversationRecord.from_row(row))
        return True

    async def acquire_lock(self, *, conversation_id: str, ttl_seconds: int) -> tuple[str, datetime]:
        if not 1 <= ttl_seconds <= MAX_LOCK_TTL:
            raise invalid(f"`ttlSeconds` must be between 1 and {MAX_LOCK_TTL}", "ttlSeconds")
        token = new_lock_token()
        now = self.repo.now()
        until = now + timedelta(seconds=ttl_seconds)
        try:
            # A lock is advisory: it leaves `version` alone so expectedVersion users
            # are not disturbed by lock traffic.
            await self.bump(
                conversation_id,
                field="conversationId",
                require_unlocked=True,
                bump_version=False,
                values={
                    "lock_digest": self.repo.keyring.digest("lock", token),
                    "locked_until": until,
                },
            )
        except DomainError as exc:
            if exc.code is ErrorCode.CONFLICT:
                raise DomainError(
                    ErrorCode.LOCKED, "another holder has an unexpired lock", ["conversationId"]
                ) from None
            raise
        return token, until

    async def release_lock(self, *, conversation_id: str, token: str) -> bool:
        conversation_id = parse_uuid(conversation_id, "conversationId")
        digest = self.repo.keyring.digest("lock", token)
        now = self.repo.now()
        where = [
            C.c.id == conversation_id,
            owner_clause(C, self.principal, own=True),
            alive(C, now),
        ]
        result = await self.conn.execute(
            update(C)
            .where(*where, C.c.lock_digest == digest)
            .values(lock_digest=None, locked_until=None)
        )
        if result.rowcount:
            return True
        exists = (await self.conn.execute(select(C.c.id).where(*where))).first()
        if exists is None:
            raise not_found("conversation", "conversationId")
        return False  # a stale token: someone else holds (or held) the lock since

    # -- events ------------------------------------------------------------

    def publish(self, kind: EventKind, record: ConversationRecord, **extra: Any) -> None:
        self.repo.events.append(Event.of(kind, record, **extra))


def _normal_uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        return None


def _keyset(cursor: str, field: str) -> tuple[datetime, str]:
    """(created_at, id) of a conversation cursor; anything this server did not issue is refused."""
    created, cid = decode_cursor(cursor, field, 2)
    try:
        at = datetime.fromisoformat(created)
    except (TypeError, ValueError):
        at = None
    # The id reaches the database as a bound string: it must be one of our UUIDs.
    if at is None or not isinstance(cid, str) or _normal_uuid(cid) != cid:
        raise invalid("not a cursor this server issued", field)
    return at, cid


def _equals(column: ColumnElement[str], value: str) -> ColumnElement[bool]:
    # Stored strings never hold NUL (check_text refuses it) and PostgreSQL cannot bind one.
    return column == value if "\x00" not in value else false()


@functools.cache
def _bump_statement(
    columns: tuple[str, ...],
    *,
    add_messages: bool,
    conditional: bool,
    require_unlocked: bool,
    bump_version: bool,
) -> Prepared:
    """The UPDATE … RETURNING of `bump`, built and compiled once per shape."""
    now = bindparam("now", type_=UTCDateTime())
    where = [C.c.id == bindparam("cid"), own_clause_bound(C), alive_bound(C)]
    if conditional:
        where.append(C.c.version == bindparam("expected"))
    if require_unlocked:
        where.append(or_(C.c.locked_until.is_(None), C.c.locked_until <= now))
    changes: dict[str, Any] = {
        name: bindparam(f"set_{name}", type_=C.c[name].type) for name in columns
    }
    if add_messages:
        changes["message_count"] = C.c.message_count + bindparam("add_messages")
    if bump_version:
        changes.update(version=C.c.version + 1, updated_at=now)
    return Prepared(update(C).where(*where).values(**changes).returning(*C.c))


_BY_IDS = C.c.id.in_(bindparam("ids", expanding=True))
_GET_OWN = Prepared(select(C).where(_BY_IDS, own_clause_bound(C), alive_bound(C)))
_GET_IN_WORKSPACE = Prepared(select(C).where(_BY_IDS, workspace_clause_bound(C), alive_bound(C)))
