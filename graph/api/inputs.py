"""Strawberry input types of the mutations and filters."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import strawberry
from strawberry.schema.name_converter import NameConverter
from strawberry.types.arguments import InputContext
from strawberry.types.base import StrawberryMaybe, StrawberryType, get_object_definition

from graph.api.scalars import JSON
from graph.api.types.enums import DelegationStatus, OwnerType, ReflectOutcome
from graph.domain.conversations import DEFAULT_CONTEXT, DEFAULT_LOCK_TTL, MAX_SEARCH_WORDS


@strawberry.input
class OwnerInput:
    type: OwnerType
    key: str


@strawberry.input
class ConversationFilter:
    agent_slug: str | None = None
    context: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    root_only: bool | None = strawberry.field(
        default=False,
        description="Only conversations that are not a delegation's child transcript.",
    )
    search: str | None = strawberry.field(
        default=None,
        description="Full-text search over message content: the conversations with a "
        f"message that holds every word (at most {MAX_SEARCH_WORDS} words; more is "
        "LIMIT_EXCEEDED).",
    )
    owner: OwnerInput | None = strawberry.field(
        default=None,
        description="ADMIN scope only: narrow to one owner of the workspace. "
        "Without ADMIN the caller's own owner is always used.",
    )
    owner_type: OwnerType | None = strawberry.field(
        default=None,
        description="Only conversations owned by an owner of this type. It narrows, never "
        "widens: an ADMIN or SERVICE token, which reads the whole workspace, sees that type's "
        "conversations; any other token its own conversations, or none when the type is not "
        "its own.",
    )


@strawberry.input
class CreateConversationInput:
    title: str | None = None
    agent_slug: str | None = ""
    metadata: JSON | None = None
    context: str | None = DEFAULT_CONTEXT
    expires_at: datetime | None = None
    idempotency_key: str | None = strawberry.field(
        default=None,
        description="A retry with the same key by the same principal returns the "
        "first conversation instead of a new one.",
    )


@strawberry.input
class UpdateConversationInput:
    id: strawberry.ID
    title: str | None = strawberry.UNSET
    metadata: JSON | None = strawberry.UNSET
    provider: str | None = strawberry.UNSET
    model: str | None = strawberry.UNSET
    provider_response_id: str | None = strawberry.UNSET
    expires_at: datetime | None = strawberry.UNSET
    mark_read: bool | None = False
    expected_version: int | None = strawberry.field(
        default=None,
        description="When given, the write happens only if the conversation's "
        "version still equals it (else CONFLICT).",
    )


@strawberry.input
class AppendMessagesInput:
    conversation_id: strawberry.ID
    messages: list[JSON]
    expected_version: int | None = None
    expected_message_count: int | None = strawberry.field(
        default=None,
        description="Refused with CONFLICT unless the conversation holds exactly this many "
        "messages: a precondition on the transcript alone, where expectedVersion also "
        "changes with the title, metadata, snapshots and delegations below it.",
    )


@strawberry.input(
    description="Replace the live transcript with the complete list given (the "
    "transcript may shrink after compaction)."
)
class ReplaceTranscriptInput:
    conversation_id: strawberry.ID
    messages: list[JSON]
    expected_version: int | None = None
    metadata: JSON | None = strawberry.UNSET
    provider: str | None = None
    model: str | None = None
    provider_response_id: str | None = strawberry.UNSET


@strawberry.input
class SaveSnapshotInput:
    conversation_id: strawberry.ID
    messages: list[JSON]


@strawberry.input
class DeleteConversationInput:
    id: strawberry.ID


@strawberry.input
class CreateDelegationInput:
    parent_conversation_id: strawberry.ID
    delegating_tier: str
    target_tier: str
    task: str
    max_turns: int | None = None
    idempotency_key: str | None = strawberry.field(
        default=None,
        description="A retry with the same key by the same principal returns the "
        "first delegation instead of a new one.",
    )


@strawberry.input
class CompleteDelegationInput:
    delegation_id: strawberry.ID
    status: DelegationStatus = strawberry.field(description="COMPLETED or FAILED.")
    summary: str | None = None


@strawberry.input(
    description="Exactly one of `delegationId` and `targetTier` (the latter means "
    "the latest COMPLETED delegation to that tier)."
)
class ResumeDelegationInput:
    task: str
    delegation_id: strawberry.ID | None = None
    target_tier: str | None = None
    max_turns: int | None = None


@strawberry.input
class AcquireLockInput:
    conversation_id: strawberry.ID
    ttl_seconds: int | None = DEFAULT_LOCK_TTL
    token: str | None = strawberry.field(
        default=None,
        description="The lock's token, chosen by the caller (32 to 128 characters of A-Z, "
        "a-z, 0-9, `-` and `_`, at random) instead of by the server. Acquiring with the "
        "token that holds the lock takes it again for `ttlSeconds` from now and answers the "
        "same token: a retry after a lost answer gets the lock it was granted, where "
        "without a token it would meet its own lock as LOCKED. A token that has released "
        "the lock cannot take it again (CONFLICT on `token`: choose a new one), so a first "
        "attempt carried out after its retry released the lock does not hold it for nobody; "
        "a token whose lock ran out unreleased may, while nobody else has taken it.",
    )


@strawberry.input
class ReleaseLockInput:
    conversation_id: strawberry.ID
    token: str


@strawberry.input
class CheckpointSessionInput:
    session_id: str
    state: JSON
    outcome: ReflectOutcome | None = ReflectOutcome.PROCEED
    expected_version: int | None = None


@strawberry.input
class DeleteSessionStateInput:
    session_id: str


# -- building the inputs -------------------------------------------------------------------


@dataclass(frozen=True)
class _Fields:
    """An input class's fields, resolved for one name converter."""

    # (GraphQL name, Python name, type) of each field.
    named: tuple[tuple[str, str, StrawberryType | type], ...]
    # The Python names of the fields without a default: None when the value leaves them out.
    without_default: tuple[str, ...]


_resolved: dict[tuple[type, NameConverter], _Fields] = {}


def _fields(cls: type, names: NameConverter) -> _Fields:
    found = _resolved.get((cls, names))
    if found is None:
        definition = get_object_definition(cls, strict=True)
        found = _resolved[(cls, names)] = _Fields(
            named=tuple(
                (names.from_field(f), f.python_name, f.resolve_type(type_definition=definition))
                for f in definition.fields
            ),
            without_default=tuple(
                f.python_name
                for f in definition.fields
                if f.default_value is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING
            ),
        )
    return found


def build_input(cls: type, value: Mapping[str, Any], context: InputContext) -> Any:
    """Strawberry's `from_input` hook, doing what Strawberry does without it (each field
    the value holds converted by Strawberry, None for a field with no default that it leaves
    out), but with each field's GraphQL name and type resolved once per class, where
    Strawberry resolves both again for every field of every input of every request."""
    fields = _fields(cls, context.config.name_converter)
    kwargs: dict[str, Any] = dict.fromkeys(fields.without_default)
    for graphql_name, python_name, type_ in fields.named:
        if graphql_name in value:
            kwargs[python_name] = context.convert(value[graphql_name], type_, graphql_name)
    return cls(**kwargs)


def takes_the_hook(cls: type) -> bool:
    """Whether `cls` is an input type built by `build_input`: every one but one with a
    `Maybe` field, as Strawberry refuses a null for `Maybe[T]` in the document only for types
    without the hook (with it, the refusal would move into execution, in other words)."""
    definition = get_object_definition(cls)
    return (
        definition is not None
        and definition.is_input
        and not any(isinstance(f.type, StrawberryMaybe) for f in definition.fields)
    )


# Every input type of this module (they are all the schema has).
for _value in list(globals().values()):
    if isinstance(_value, type) and takes_the_hook(_value):
        get_object_definition(_value, strict=True).from_input = build_input
