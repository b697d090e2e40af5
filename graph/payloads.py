"""Mutation payloads: the result, or `userErrors` saying what was wrong and where."""

from __future__ import annotations

from datetime import datetime

import strawberry

from .errors import DomainError
from .types import Conversation, Delegation, Message, SessionState, Snapshot, UserError


def user_errors(error: DomainError) -> list[UserError]:
    return [UserError(code=error.code, message=error.message, field=error.field)]


@strawberry.type
class ConversationPayload:
    conversation: Conversation | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class AppendMessagesPayload:
    conversation: Conversation | None = None
    messages: list[Message] = strawberry.field(
        default_factory=list,
        description="The messages this call stored, with their sequence numbers.",
    )
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class SnapshotPayload:
    snapshot: Snapshot | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type(
    description="Deletes are idempotent: deleting what is already gone is not an "
    "error (`deleted` is false)."
)
class DeletePayload:
    deleted: bool = False
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class DelegationPayload:
    delegation: Delegation | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class LockPayload:
    token: str | None = None
    expires_at: datetime | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class ReleaseLockPayload:
    released: bool = False
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class SessionStatePayload:
    session_state: SessionState | None = None
    user_errors: list[UserError] = strawberry.field(default_factory=list)
