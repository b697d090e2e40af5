"""The tables, as SQLModel classes: each entity's fields are declared here, once.

The repositories return instances of these classes (built by `store.rows`), and the
GraphQL types wrap them. JSON documents that must come back exactly as sent (messages,
checkpoint states, snapshots) are stored as JSON text: PostgreSQL's jsonb would reorder keys
and reject strings holding NUL. The migrations (store/migrations) create the same shapes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel

from graph.domain.checkpoints import ReflectOutcome
from graph.domain.conversations import is_interactive, is_pending, root_of
from graph.domain.delegations import DelegationStatus
from graph.domain.events import EventKind
from graph.domain.principal import OwnerType

_BigId = BigInteger().with_variant(Integer(), "sqlite")
E = TypeVar("E", bound=enum.Enum)


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in Python; timestamptz on PostgreSQL, sortable text on SQLite."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        instant = _as_utc(value)
        return instant.replace(tzinfo=None) if dialect.name == "sqlite" else instant

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return None if value is None else _as_utc(value)

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        """On SQLite, the text SQLAlchemy's DATETIME would store, in one call to datetime's
        own C formatting instead of two Python steps (every write binds a few timestamps);
        tests/unit/test_utc_datetime.py holds the two to the same characters."""
        if dialect.name == "sqlite":
            return _sqlite_text
        return super().bind_processor(dialect)

    def result_processor(self, dialect: Dialect, coltype: object) -> Callable[[Any], Any] | None:
        """On SQLite, the aware instant of a stored text in one parse (every row read holds a
        few timestamps); the same value as DATETIME's parse then `process_result_value`."""
        if dialect.name == "sqlite":
            return _sqlite_instant
        return super().result_processor(dialect, coltype)


# A stored text is naive UTC: `datetime.replace` and aware `isoformat` cost several times
# what the parse and the formatting themselves do, so the offset is added to (or cut from)
# the text instead.
_UTC_SUFFIX = "+00:00"


# The last instant written and its text. A write binds its unit of work's one `now` in
# several rows (the conversation's bump, the messages, the event) and reads it back from the
# bump's RETURNING: formatted once, and that text parsed back to the same instant.
_last: tuple[datetime, str] = (datetime(1970, 1, 1, tzinfo=UTC), "1970-01-01 00:00:00.000000")


def _sqlite_text(value: datetime | None) -> str | None:
    global _last
    if value is None:
        return None
    last = _last
    if value is last[0]:
        return last[1]
    if value.tzinfo is None:
        return value.isoformat(" ", "microseconds")
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    text = value.isoformat(" ", "microseconds")[: -len(_UTC_SUFFIX)]
    _last = (value, text)
    return text


def _sqlite_instant(value: str | None) -> datetime | None:
    if value is None:
        return None
    last = _last
    if value == last[1]:
        return last[0]
    try:
        instant = datetime.fromisoformat(value + _UTC_SUFFIX)
        if instant.tzinfo is UTC:  # (a date alone parses, but without the offset)
            return instant
    except (TypeError, ValueError):  # a text with an offset of its own (not one we wrote)
        pass
    return _as_utc(datetime.fromisoformat(value))


def _as_utc(value: datetime) -> datetime:
    """`value` as an aware UTC datetime; a naive one is UTC already."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class EnumText(TypeDecorator[E], Generic[E]):
    """A domain enum, stored as its value's text (a plain string column)."""

    impl = String()
    cache_ok = True

    def __init__(self, enum_type: type[E]) -> None:
        super().__init__()
        self.enum_type = enum_type
        self._by_value = {member.value: member for member in enum_type}

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return str(value.value) if isinstance(value, enum.Enum) else value

    def process_result_value(self, value: Any, dialect: Dialect) -> E | None:
        return None if value is None else self._by_value[value]


def _ts(*, nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime(), nullable=nullable, index=index))


def _text(*, nullable: bool = False) -> Any:
    return Field(default=None, sa_column=Column(Text, nullable=nullable))


def _reference(target: str, *, ondelete: str = "CASCADE", nullable: bool = False) -> Any:
    return Field(
        default=None,
        sa_column=Column(String(36), ForeignKey(target, ondelete=ondelete), nullable=nullable),
    )


class Owned(SQLModel):
    """Who a row belongs to: its workspace and its owner (the owner key only as a keyed
    digest). store/scope.py reads and stamps these columns; nothing else does."""

    workspace_type: str
    workspace_id: str
    owner_type: OwnerType = Field(sa_type=EnumText(OwnerType))
    owner_digest: str


class Conversation(Owned, table=True):
    __tablename__ = "conversation"
    __table_args__ = (
        Index(
            "ix_conversation_owner_created",
            "workspace_type",
            "workspace_id",
            "owner_type",
            "owner_digest",
            "created_at",
            "id",
        ),
        Index(
            "ix_conversation_workspace_created",
            "workspace_type",
            "workspace_id",
            "created_at",
            "id",
        ),
        Index("ix_conversation_expires", "expires_at"),
        UniqueConstraint(
            "workspace_type",
            "workspace_id",
            "owner_type",
            "owner_digest",
            "idempotency_key",
            name="uq_conversation_idempotency",
        ),
    )

    id: str = Field(primary_key=True, max_length=36)
    title: str | None = None
    agent_slug: str = ""
    context: str = "chat"
    # `metadata` is SQLAlchemy's name for the table registry: the attribute is `meta`.
    meta: str = Field(default="{}", sa_column=Column("metadata", Text, nullable=False))
    provider: str | None = None
    model: str | None = None
    provider_response_id: str | None = None
    version: int = 1
    message_count: int = 0
    # The sum of the live transcript's `token_count`s (domain.messages.token_count), kept
    # with every transcript write as message_count is: workspace figures add these up
    # instead of reading every message.
    token_count: int = Field(
        default=0, sa_column=Column(BigInteger, nullable=False, server_default="0")
    )
    # The UTF-8 bytes of the live transcript's JSON and of the snapshots' JSON, kept with
    # every write as message_count is: workspace quotas add these up (store/quotas.py).
    message_bytes: int = Field(
        default=0, sa_column=Column(BigInteger, nullable=False, server_default="0")
    )
    snapshot_bytes: int = Field(
        default=0, sa_column=Column(BigInteger, nullable=False, server_default="0")
    )
    parent_delegation_id: str | None = Field(
        default=None,
        sa_column=Column(
            String(36),
            ForeignKey(
                "delegation.id",
                ondelete="CASCADE",
                use_alter=True,
                name="fk_conversation_parent_delegation",
            ),
            index=True,
        ),
    )
    # Space-separated ids of the ancestors, root first: lets an event reach the
    # subscribers of every conversation above it without a query.
    ancestry: str = ""
    created_at: datetime = _ts()
    updated_at: datetime = _ts()
    last_read_at: datetime | None = _ts(nullable=True)
    expires_at: datetime | None = _ts(nullable=True)
    lock_digest: str | None = None
    locked_until: datetime | None = _ts(nullable=True)
    idempotency_key: str | None = None
    # Of a root: how many events its tree has logged (see store/event_log.py).
    event_position: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, default=0, server_default="0")
    )

    @property
    def ancestors(self) -> tuple[str, ...]:
        return tuple(self.ancestry.split())

    @property
    def root_id(self) -> str:
        """The root of this conversation's tree (itself for a root)."""
        return root_of(self.id, self.ancestry)

    @property
    def interactive(self) -> bool:
        return is_interactive(self.context)

    def pending(self, now: datetime) -> bool:
        return is_pending(message_count=self.message_count, locked_until=self.locked_until, now=now)


class Message(SQLModel, table=True):
    __tablename__ = "message"
    __table_args__ = (UniqueConstraint("conversation_id", "seq", name="uq_message_seq"),)

    id: int | None = Field(default=None, sa_column=Column(_BigId, primary_key=True))
    conversation_id: str = _reference("conversation.id")
    seq: int
    role: str
    data: str = _text()
    digest: str
    search_text: str | None = _text(nullable=True)
    created_at: datetime = _ts()


class MessageChunk(SQLModel, table=True):
    """With encryption on: a complete block of a transcript's texts, packed and sealed as one
    value (domain/chunks.py), beside the message rows that hold them one by one. A copy for
    reading whole transcripts (store/sealed_blocks.py): dropped by the database when any of
    its messages is deleted (migration 0014's trigger), and with its conversation."""

    __tablename__ = "message_chunk"

    conversation_id: str = Field(
        sa_column=Column(
            String(36), ForeignKey("conversation.id", ondelete="CASCADE"), primary_key=True
        )
    )
    first_seq: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    last_seq: int
    data: str = _text()


class MessageDictionary(SQLModel, table=True):
    """SQLite: a zstd dictionary that message rows are compressed with (store/compression.py),
    named by the frames that use it. Never changed nor deleted while a frame may name it."""

    __tablename__ = "message_dictionary"

    id: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = _ts()


class Snapshot(SQLModel, table=True):
    __tablename__ = "snapshot"
    __table_args__ = (Index("ix_snapshot_conversation", "conversation_id", "created_at", "id"),)

    id: str = Field(primary_key=True, max_length=36)
    conversation_id: str = _reference("conversation.id")
    message_count: int
    messages: str = _text()
    created_at: datetime = _ts()


class Delegation(Owned, table=True):
    __tablename__ = "delegation"
    __table_args__ = (
        Index("ix_delegation_parent", "parent_conversation_id", "created_at", "id"),
        Index("ix_delegation_child", "child_conversation_id"),
        Index(
            "ix_delegation_owner_tier",
            "workspace_type",
            "workspace_id",
            "owner_type",
            "owner_digest",
            "target_tier",
            "status",
            "completed_at",
        ),
        # A retried createDelegation with the same key returns the first delegation.
        Index(
            "uq_delegation_idempotency",
            "workspace_type",
            "workspace_id",
            "owner_type",
            "owner_digest",
            "idempotency_key",
            unique=True,
        ),
    )

    id: str = Field(primary_key=True, max_length=36)
    parent_conversation_id: str = _reference("conversation.id")
    child_conversation_id: str = _reference("conversation.id")
    delegating_tier: str
    target_tier: str
    task: str = _text()
    max_turns: int | None = None
    status: DelegationStatus = Field(sa_type=EnumText(DelegationStatus))
    summary: str | None = _text(nullable=True)
    resumed_from_id: str | None = _reference("delegation.id", ondelete="SET NULL", nullable=True)
    created_at: datetime = _ts()
    completed_at: datetime | None = _ts(nullable=True)
    idempotency_key: str | None = None


class SessionState(Owned, table=True):
    """One version of a session's checkpoint; every version is kept."""

    __tablename__ = "session_state"
    __table_args__ = (
        UniqueConstraint(
            "workspace_type",
            "workspace_id",
            "owner_type",
            "owner_digest",
            "session_id",
            "version",
            name="uq_session_state_version",
        ),
    )

    id: int | None = Field(default=None, sa_column=Column(_BigId, primary_key=True))
    session_id: str
    version: int
    state: str = _text()
    outcome: ReflectOutcome = Field(sa_type=EnumText(ReflectOutcome))
    created_at: datetime = _ts()


class SessionVersionFloor(Owned, table=True):
    """The last version of a deleted session, by a keyed digest of its id: the session's
    next checkpoint numbers on from it, so that a write conditioned on a version from before
    the delete is refused, never taken for one of the versions written after it."""

    __tablename__ = "session_version_floor"
    __table_args__ = (
        PrimaryKeyConstraint(
            "workspace_type", "workspace_id", "owner_type", "owner_digest", "session_digest"
        ),
    )

    session_digest: str
    version: int


class ApiToken(Owned, table=True):
    __tablename__ = "api_token"

    id: str = Field(primary_key=True, max_length=36)
    token_digest: str = Field(unique=True)
    # The owner key sealed under the server secret (see keyring.Keyring.seal).
    owner_key_sealed: str
    scopes: str
    label: str | None = None
    created_at: datetime = _ts()
    revoked_at: datetime | None = _ts(nullable=True)
    # NULL: never expires. Past it, the token is refused like a revoked one.
    expires_at: datetime | None = _ts(nullable=True)
    # The token `token rotate` made of this one (NULL: not rotated); it is not rotated again.
    successor_id: str | None = Field(default=None, max_length=36)


class EventOutbox(SQLModel, table=True):
    """Event payloads too large for a PostgreSQL NOTIFY; the notification carries the id."""

    __tablename__ = "event_outbox"

    id: int | None = Field(default=None, sa_column=Column(_BigId, primary_key=True))
    payload: str = _text()
    created_at: datetime = _ts(index=True)


class EventLog(SQLModel, table=True):
    """Every committed event of a tree (a root conversation and the transcripts below it),
    numbered by `position` in the order the tree's transactions committed; see
    store/event_log.py. Deleted with the root; pruned by the sweep after the retention."""

    __tablename__ = "event_log"
    # The sweep's index, on PostgreSQL only: SQLite prunes by rowid (migration 0010).
    __table_args__ = (Index("ix_event_log_at", "at").ddl_if(dialect="postgresql"),)

    root_id: str = Field(
        sa_column=Column(
            String(36), ForeignKey("conversation.id", ondelete="CASCADE"), primary_key=True
        )
    )
    position: int = Field(sa_column=Column(Integer, primary_key=True, autoincrement=False))
    # No foreign key: the events of a deleted child transcript stay in its tree's log.
    conversation_id: str = Field(max_length=36)
    ancestry: str = ""
    kind: EventKind = Field(sa_type=EnumText(EventKind))
    version: int
    at: datetime = _ts()
    # What the event carries besides its columns, as JSON: its delegation, or its messages
    # when they are copied (see store/event_log.py).
    payload: str | None = _text(nullable=True)
    # The event's messages by reference: its conversation's message rows of these seqs.
    seq_low: int | None = None
    seq_high: int | None = None


class PendingShred(SQLModel, table=True):
    """A data key a committed delete has yet to destroy in the key store (apart from the
    data, so outside the delete's transaction): written by the delete, removed once the key
    is gone (store/pending_shreds.py)."""

    __tablename__ = "pending_shred"

    ref: str = Field(primary_key=True)
    created_at: datetime = _ts()


class WorkspaceUsage(SQLModel, table=True):
    """What a workspace stores, counted while workspace quotas are on (store/quotas.py): the
    sums of its conversations' message_count and message_bytes + snapshot_bytes."""

    __tablename__ = "workspace_usage"

    workspace_type: str = Field(primary_key=True)
    workspace_id: str = Field(primary_key=True)
    messages: int = Field(sa_column=Column(BigInteger, nullable=False))
    bytes: int = Field(sa_column=Column(BigInteger, nullable=False))


def table(model: type[SQLModel]) -> Table:
    return model.__table__  # type: ignore[attr-defined,no-any-return]


conversation = table(Conversation)
message = table(Message)
message_chunk = table(MessageChunk)
message_dictionary = table(MessageDictionary)
snapshot = table(Snapshot)
delegation = table(Delegation)
session_state = table(SessionState)
session_version_floor = table(SessionVersionFloor)
api_token = table(ApiToken)
event_outbox = table(EventOutbox)
event_log = table(EventLog)
workspace_usage = table(WorkspaceUsage)
pending_shred = table(PendingShred)
metadata = SQLModel.metadata
