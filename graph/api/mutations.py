"""Mutation root: input → validated domain command → one unit of work → payload.

Inputs are checked before the unit of work begins (nothing is held while a 5,000-message
save is validated); an expected failure anywhere becomes the payload's `userErrors`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, TypeVar

import strawberry

from graph.api import inputs
from graph.api.payloads import (
    AppendMessagesPayload,
    ConversationPayload,
    DelegationPayload,
    DeletePayload,
    LockPayload,
    ReleaseLockPayload,
    SessionStatePayload,
    SnapshotPayload,
    writes,
)
from graph.api.types import Conversation, Delegation, Info, Message, SessionState, Snapshot
from graph.domain import conversations, delegations
from graph.domain.checkpoints import ReflectOutcome
from graph.domain.conversations import DEFAULT_CONTEXT, DEFAULT_LOCK_TTL, KEEP
from graph.domain.messages import PreparedMessage, prepare_messages
from graph.settings import Settings

T = TypeVar("T")
# How many appends' worth of messages one whole transcript may hold.
WHOLE_TRANSCRIPT_CALLS = 100


def _kept(value: T | None) -> T | conversations.Keep | None:
    """A left-out input (strawberry.UNSET) keeps the stored value; an explicit null clears."""
    return KEEP if value is strawberry.UNSET else value


def _messages(
    settings: Settings, messages: list[Any], *, whole: bool = False
) -> list[PreparedMessage]:
    # A whole transcript (one replaced, or the history a snapshot keeps before compaction)
    # grows with the conversation past one call's message limit, which bounds an append;
    # each message is still checked.
    most = settings.max_messages_per_call * (WHOLE_TRANSCRIPT_CALLS if whole else 1)
    return prepare_messages(messages, max_count=max(most, 1), max_bytes=settings.max_message_bytes)


def _now() -> datetime:
    return datetime.now(UTC)


@strawberry.type
class Mutation:
    @strawberry.mutation
    @writes
    async def create_conversation(
        self, info: Info, input: inputs.CreateConversationInput
    ) -> ConversationPayload:
        new = conversations.new_conversation(
            now=_now(),
            title=input.title,
            agent_slug=input.agent_slug or "",
            metadata=input.metadata,
            context=DEFAULT_CONTEXT if input.context is None else input.context,
            expires_at=input.expires_at,
            idempotency_key=input.idempotency_key,
        )
        async with info.context.write() as repo:
            created = await repo.conversations.create(new)
        return ConversationPayload(conversation=Conversation.of(created))

    @strawberry.mutation
    @writes
    async def update_conversation(
        self, info: Info, input: inputs.UpdateConversationInput
    ) -> ConversationPayload:
        changes = conversations.update_changes(
            now=_now(),
            title=_kept(input.title),
            metadata=_kept(input.metadata),
            provider=_kept(input.provider),
            model=_kept(input.model),
            provider_response_id=_kept(input.provider_response_id),
            expires_at=_kept(input.expires_at),
            mark_read=bool(input.mark_read),
        )
        async with info.context.write() as repo:
            updated = await repo.conversations.update(
                input.id, changes, expected_version=input.expected_version
            )
        return ConversationPayload(conversation=Conversation.of(updated))

    @strawberry.mutation
    @writes
    async def append_messages(
        self, info: Info, input: inputs.AppendMessagesInput
    ) -> AppendMessagesPayload:
        messages = _messages(info.context.settings, list(input.messages))
        async with info.context.write() as repo:
            conversation, stored = await repo.transcripts.append(
                input.conversation_id,
                messages,
                expected_version=input.expected_version,
                expected_message_count=input.expected_message_count,
            )
        return AppendMessagesPayload(
            conversation=Conversation.of(conversation), messages=[Message.of(m) for m in stored]
        )

    @strawberry.mutation
    @writes
    async def replace_transcript(
        self, info: Info, input: inputs.ReplaceTranscriptInput
    ) -> ConversationPayload:
        messages = _messages(info.context.settings, list(input.messages), whole=True)
        changes = conversations.transcript_changes(
            metadata=_kept(input.metadata),
            provider=input.provider,
            model=input.model,
            provider_response_id=_kept(input.provider_response_id),
        )
        async with info.context.write() as repo:
            conversation = await repo.transcripts.replace(
                input.conversation_id,
                messages,
                changes=changes,
                expected_version=input.expected_version,
            )
        return ConversationPayload(conversation=Conversation.of(conversation))

    @strawberry.mutation
    @writes
    async def save_snapshot(self, info: Info, input: inputs.SaveSnapshotInput) -> SnapshotPayload:
        messages = _messages(info.context.settings, list(input.messages), whole=True)
        async with info.context.write() as repo:
            snapshot = await repo.snapshots.save(input.conversation_id, messages)
        return SnapshotPayload(snapshot=Snapshot.of(snapshot))

    @strawberry.mutation
    @writes
    async def delete_conversation(
        self, info: Info, input: inputs.DeleteConversationInput
    ) -> DeletePayload:
        async with info.context.write() as repo:
            return DeletePayload(deleted=await repo.conversations.delete(input.id))

    @strawberry.mutation
    @writes
    async def create_delegation(
        self, info: Info, input: inputs.CreateDelegationInput
    ) -> DelegationPayload:
        new = delegations.new_delegation(
            delegating_tier=input.delegating_tier,
            target_tier=input.target_tier,
            task=input.task,
            max_turns=input.max_turns,
            idempotency_key=input.idempotency_key,
        )
        async with info.context.write() as repo:
            created = await repo.delegations.create(input.parent_conversation_id, new)
        return DelegationPayload(delegation=Delegation.of(created))

    @strawberry.mutation
    @writes
    async def complete_delegation(
        self, info: Info, input: inputs.CompleteDelegationInput
    ) -> DelegationPayload:
        delegations.check_completion(input.status, input.summary)
        async with info.context.write() as repo:
            completed = await repo.delegations.complete(
                input.delegation_id, status=input.status, summary=input.summary
            )
        return DelegationPayload(delegation=Delegation.of(completed))

    @strawberry.mutation
    @writes
    async def resume_delegation(
        self, info: Info, input: inputs.ResumeDelegationInput
    ) -> DelegationPayload:
        delegations.check_resume(input.delegation_id, input.target_tier, input.task)
        async with info.context.write() as repo:
            resumed = await repo.delegations.resume(
                delegation_id=input.delegation_id,
                target_tier=input.target_tier,
                task=input.task,
                max_turns=input.max_turns,
            )
        return DelegationPayload(delegation=Delegation.of(resumed))

    @strawberry.mutation
    @writes
    async def acquire_lock(self, info: Info, input: inputs.AcquireLockInput) -> LockPayload:
        ttl = DEFAULT_LOCK_TTL if input.ttl_seconds is None else input.ttl_seconds
        conversations.lock_expiry(ttl, _now())  # checked before anything is written
        chosen = None if input.token is None else conversations.check_lock_token(input.token)
        async with info.context.write() as repo:
            token, until = await repo.conversations.acquire_lock(
                input.conversation_id, ttl_seconds=ttl, token=chosen
            )
        return LockPayload(token=token, expires_at=until)

    @strawberry.mutation
    @writes
    async def release_lock(self, info: Info, input: inputs.ReleaseLockInput) -> ReleaseLockPayload:
        async with info.context.write() as repo:
            released = await repo.conversations.release_lock(
                input.conversation_id, token=input.token
            )
        return ReleaseLockPayload(released=released)

    @strawberry.mutation
    @writes
    async def checkpoint_session(
        self, info: Info, input: inputs.CheckpointSessionInput
    ) -> SessionStatePayload:
        outcome = ReflectOutcome.PROCEED if input.outcome is None else input.outcome
        async with info.context.write() as repo:
            stored = await repo.checkpoints.save(
                session_id=input.session_id,
                state=input.state,
                outcome=outcome,
                expected_version=input.expected_version,
            )
        return SessionStatePayload(session_state=SessionState.of(stored))

    @strawberry.mutation
    @writes
    async def delete_session_state(
        self, info: Info, input: inputs.DeleteSessionStateInput
    ) -> DeletePayload:
        async with info.context.write() as repo:
            return DeletePayload(deleted=await repo.checkpoints.delete(input.session_id))
