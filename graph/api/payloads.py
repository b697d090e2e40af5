"""Mutation payloads: the result, or `userErrors` saying what was wrong and where."""

from __future__ import annotations

import functools
import typing
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

import strawberry

from graph.api.types import Conversation, Delegation, Message, SessionState, Snapshot, UserError
from graph.domain.errors import DomainError
from graph.store.scope import check_write


@strawberry.type
class Payload:
    user_errors: list[UserError] = strawberry.field(default_factory=list)


@strawberry.type
class ConversationPayload(Payload):
    conversation: Conversation | None = None


@strawberry.type
class AppendMessagesPayload(Payload):
    conversation: Conversation | None = None
    messages: list[Message] = strawberry.field(
        default_factory=list,
        description="The messages this call stored, with their sequence numbers.",
    )


@strawberry.type
class SnapshotPayload(Payload):
    snapshot: Snapshot | None = None


@strawberry.type(
    description="Deletes are idempotent: deleting what is already gone is not an "
    "error (`deleted` is false)."
)
class DeletePayload(Payload):
    deleted: bool = False


@strawberry.type
class DelegationPayload(Payload):
    delegation: Delegation | None = None


@strawberry.type
class LockPayload(Payload):
    token: str | None = None
    expires_at: datetime | None = None


@strawberry.type
class ReleaseLockPayload(Payload):
    released: bool = False


@strawberry.type
class SessionStatePayload(Payload):
    session_state: SessionState | None = None


P = ParamSpec("P")
R = TypeVar("R", bound=Payload)


def writes(resolve: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """A mutation: refused (FORBIDDEN) before its input is read when the caller may not
    write, and an expected failure (DomainError) becomes its payload's `userErrors` (the
    unit of work it was in has rolled back)."""
    payload: list[type[Payload]] = []

    @functools.wraps(resolve)
    async def resolver(*args: P.args, **kwargs: P.kwargs) -> R:
        info: Any = kwargs["info"]
        try:
            check_write(info.context.principal)
            return await resolve(*args, **kwargs)
        except DomainError as error:
            if not payload:
                payload.append(typing.get_type_hints(resolve)["return"])
            failed: Any = payload[0](
                user_errors=[UserError(code=error.code, message=error.message, field=error.field)]
            )
            return typing.cast(R, failed)

    return resolver
