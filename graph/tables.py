"""SQLModel table classes: the storage shape. No GraphQL here.

JSON documents that must come back exactly as sent (messages, checkpoint
states, snapshots) are stored as JSON text: PostgreSQL's jsonb would reorder
keys and reject strings holding NUL.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel

_BigId = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in Python; timestamptz on PostgreSQL, sortable text on SQLite."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _ts(*, nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime(), nullable=nullable, index=index))


class ConversationRow(SQLModel, table=True):
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
    workspace_type: str
    workspace_id: str
    owner_type: str
    owner_digest: str
    title: str | None = None
    agent_slug: str = ""
    context: str = "chat"
    meta: str = Field(default="{}", sa_column=Column("metadata", Text, nullable=False))
    provider: str | None = None
    model: str | None = None
    provider_response_id: str | None = None
    version: int = 1
    message_count: int = 0
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


class MessageRow(SQLModel, table=True):
    __tablename__ = "message"
    __table_args__ = (UniqueConstraint("conversation_id", "seq", name="uq_message_seq"),)

    id: int | None = Field(default=None, sa_column=Column(_BigId, primary_key=True))
    conversation_id: str = Field(
        sa_column=Column(
            String(36), ForeignKey("conversation.id", ondelete="CASCADE"), nullable=False
        )
    )
    seq: int
    role: str
    data: str = Field(sa_column=Column(Text, nullable=False))
    digest: str
    search_text: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime = _ts()


class SnapshotRow(SQLModel, table=True):
    __tablename__ = "snapshot"
    __table_args__ = (Index("ix_snapshot_conversation", "conversation_id", "created_at", "id"),)

    id: str = Field(primary_key=True, max_length=36)
    conversation_id: str = Field(
        sa_column=Column(
            String(36), ForeignKey("conversation.id", ondelete="CASCADE"), nullable=False
        )
    )
    message_count: int
    messages: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = _ts()


class DelegationRow(SQLModel, table=True):
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
    parent_conversation_id: str = Field(
        sa_column=Column(
            String(36), ForeignKey("conversation.id", ondelete="CASCADE"), nullable=False
        )
    )
    child_conversation_id: str = Field(
        sa_column=Column(
            String(36), ForeignKey("conversation.id", ondelete="CASCADE"), nullable=False
        )
    )
    workspace_type: str
    workspace_id: str
    owner_type: str
    owner_digest: str
    delegating_tier: str
    target_tier: str
    task: str = Field(sa_column=Column(Text, nullable=False))
    max_turns: int | None = None
    status: str
    summary: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    resumed_from_id: str | None = Field(
        default=None,
        sa_column=Column(
            String(36), ForeignKey("delegation.id", ondelete="SET NULL"), nullable=True
        ),
    )
    created_at: datetime = _ts()
    completed_at: datetime | None = _ts(nullable=True)
    idempotency_key: str | None = None


class SessionStateRow(SQLModel, table=True):
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
    workspace_type: str
    workspace_id: str
    owner_type: str
    owner_digest: str
    session_id: str
    version: int
    state: str = Field(sa_column=Column(Text, nullable=False))
    outcome: str
    created_at: datetime = _ts()


class ApiTokenRow(SQLModel, table=True):
    __tablename__ = "api_token"

    id: str = Field(primary_key=True, max_length=36)
    token_digest: str = Field(unique=True)
    workspace_type: str
    workspace_id: str
    owner_type: str
    owner_digest: str
    # The owner key sealed under the server secret (see crypto.Keyring.seal).
    owner_key_sealed: str
    scopes: str
    label: str | None = None
    created_at: datetime = _ts()
    revoked_at: datetime | None = _ts(nullable=True)


class EventOutboxRow(SQLModel, table=True):
    """Event payloads too large for a PostgreSQL NOTIFY; the notification carries the id."""

    __tablename__ = "event_outbox"

    id: int | None = Field(default=None, sa_column=Column(_BigId, primary_key=True))
    payload: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = _ts(index=True)


def table(model: type[SQLModel]) -> Table:
    return model.__table__  # type: ignore[attr-defined]


conversation = table(ConversationRow)
message = table(MessageRow)
snapshot = table(SnapshotRow)
delegation = table(DelegationRow)
session_state = table(SessionStateRow)
api_token = table(ApiTokenRow)
event_outbox = table(EventOutboxRow)
metadata = SQLModel.metadata
