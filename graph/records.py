"""Plain records the repository returns: built from rows, free of SQL and of GraphQL."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .principal import OwnerType

INTERACTIVE_CONTEXTS = frozenset({"chat", "interactive", "rest"})


class DelegationStatus(enum.Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class ReflectOutcome(enum.Enum):
    PROCEED = "PROCEED"
    HALT = "HALT"
    RETRY = "RETRY"
    ROUTE = "ROUTE"


class EventKind(enum.Enum):
    CONVERSATION_UPDATED = "CONVERSATION_UPDATED"
    MESSAGES_APPENDED = "MESSAGES_APPENDED"
    TRANSCRIPT_REPLACED = "TRANSCRIPT_REPLACED"
    SNAPSHOT_SAVED = "SNAPSHOT_SAVED"
    DELEGATION_CREATED = "DELEGATION_CREATED"
    DELEGATION_COMPLETED = "DELEGATION_COMPLETED"
    CONVERSATION_DELETED = "CONVERSATION_DELETED"


@dataclass(frozen=True, slots=True)
class ConversationRecord:
    id: str
    workspace_type: str
    workspace_id: str
    owner_type: OwnerType
    title: str | None
    agent_slug: str
    context: str
    metadata_json: str
    provider: str | None
    model: str | None
    provider_response_id: str | None
    version: int
    message_count: int
    parent_delegation_id: str | None
    ancestry: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    last_read_at: datetime | None
    expires_at: datetime | None
    locked_until: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> ConversationRecord:
        m = row._mapping
        return cls(
            id=m["id"],
            workspace_type=m["workspace_type"],
            workspace_id=m["workspace_id"],
            owner_type=OwnerType(m["owner_type"]),
            title=m["title"],
            agent_slug=m["agent_slug"],
            context=m["context"],
            metadata_json=m["metadata"],
            provider=m["provider"],
            model=m["model"],
            provider_response_id=m["provider_response_id"],
            version=m["version"],
            message_count=m["message_count"],
            parent_delegation_id=m["parent_delegation_id"],
            ancestry=tuple(m["ancestry"].split()),
            created_at=m["created_at"],
            updated_at=m["updated_at"],
            last_read_at=m["last_read_at"],
            expires_at=m["expires_at"],
            locked_until=m["locked_until"],
        )

    def is_pending(self, now: datetime) -> bool:
        return self.message_count == 0 or (
            self.locked_until is not None and self.locked_until > now
        )


@dataclass(frozen=True, slots=True)
class MessageRecord:
    conversation_id: str
    seq: int
    role: str
    data_json: str
    created_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> MessageRecord:
        m = row._mapping
        return cls(m["conversation_id"], m["seq"], m["role"], m["data"], m["created_at"])


@dataclass(frozen=True, slots=True)
class SnapshotRecord:
    id: str
    conversation_id: str
    message_count: int
    messages_json: str
    created_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> SnapshotRecord:
        m = row._mapping
        return cls(
            m["id"], m["conversation_id"], m["message_count"], m["messages"], m["created_at"]
        )


@dataclass(frozen=True, slots=True)
class DelegationRecord:
    id: str
    parent_conversation_id: str
    child_conversation_id: str
    delegating_tier: str
    target_tier: str
    task: str
    max_turns: int | None
    status: DelegationStatus
    summary: str | None
    resumed_from_id: str | None
    created_at: datetime
    completed_at: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> DelegationRecord:
        m = row._mapping
        return cls(
            id=m["id"],
            parent_conversation_id=m["parent_conversation_id"],
            child_conversation_id=m["child_conversation_id"],
            delegating_tier=m["delegating_tier"],
            target_tier=m["target_tier"],
            task=m["task"],
            max_turns=m["max_turns"],
            status=DelegationStatus(m["status"]),
            summary=m["summary"],
            resumed_from_id=m["resumed_from_id"],
            created_at=m["created_at"],
            completed_at=m["completed_at"],
        )


@dataclass(frozen=True, slots=True)
class SessionStateRecord:
    session_id: str
    version: int
    state_json: str
    outcome: ReflectOutcome
    created_at: datetime

    @classmethod
    def from_row(cls, row: Any) -> SessionStateRecord:
        m = row._mapping
        return cls(
            m["session_id"], m["version"], m["state"], ReflectOutcome(m["outcome"]), m["created_at"]
        )


@dataclass(frozen=True, slots=True)
class Event:
    """A committed change, published to subscribers after the transaction commits."""

    kind: EventKind
    conversation_id: str
    # Ancestors of the conversation, root first: subscribers above it see it too.
    ancestry: tuple[str, ...]
    workspace_type: str
    workspace_id: str
    version: int
    at: datetime
    messages: tuple[MessageRecord, ...] | None = None
    delegation: DelegationRecord | None = None

    @classmethod
    def of(cls, kind: EventKind, record: ConversationRecord, **extra: Any) -> Event:
        """The event of `kind` about the conversation `record` (as written)."""
        return cls(
            kind=kind,
            conversation_id=record.id,
            ancestry=record.ancestry,
            workspace_type=record.workspace_type,
            workspace_id=record.workspace_id,
            version=record.version,
            at=record.updated_at,
            **extra,
        )
