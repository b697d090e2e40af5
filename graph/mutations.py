"""Mutation root: input -> repository (one unit of work) -> payload."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import strawberry

from . import inputs
from .errors import DomainError
from .payloads import (
    AppendMessagesPayload,
    ConversationPayload,
    DelegationPayload,
    DeletePayload,
    LockPayload,
    ReleaseLockPayload,
    SessionStatePayload,
    SnapshotPayload,
    user_errors,
)
from .records import ReflectOutcome
from .repository import Repository
from .types import CTX, Conversation, Delegation, Message, SessionState, Snapshot

P = TypeVar("P")


async def _run(info: CTX, payload: type[P], work: Callable[[Repository], Awaitable[P]]) -> P:
    """Run `work` as one unit of work; an expected failure rolls it back and becomes userErrors."""
    try:
        async with info.context.write() as repo:
            return await work(repo)
    except DomainError as error:
        return payload(user_errors=user_errors(error))  # type: ignore[call-arg]


@strawberry.type
class Mutation:
    @strawberry.mutation
    async def create_conversation(
        self, info: CTX, input: inputs.CreateConversationInput
    ) -> ConversationPayload:
        async def work(repo: Repository) -> ConversationPayload:
            record = await repo.conversations.create(
                title=input.title,
                agent_slug=input.agent_slug or "",
                metadata=input.metadata,
                context="chat" if input.context is None else input.context,
                expires_at=input.expires_at,
                idempotency_key=input.idempotency_key,
            )
            return ConversationPayload(conversation=Conversation.of(record))

        return await _run(info, ConversationPayload, work)

    @strawberry.mutation
    async def update_conversation(
        self, info: CTX, input: inputs.UpdateConversationInput
    ) -> ConversationPayload:
        async def work(repo: Repository) -> ConversationPayload:
            record = await repo.conversations.update(
                conversation_id=input.id,
                title=input.title,
                metadata=input.metadata,
                provider=input.provider,
                model=input.model,
                provider_response_id=input.provider_response_id,
                expires_at=input.expires_at,
                mark_read=bool(input.mark_read),
                expected_version=input.expected_version,
                unset=strawberry.UNSET,
            )
            return ConversationPayload(conversation=Conversation.of(record))

        return await _run(info, ConversationPayload, work)

    @strawberry.mutation
    async def append_messages(
        self, info: CTX, input: inputs.AppendMessagesInput
    ) -> AppendMessagesPayload:
        async def work(repo: Repository) -> AppendMessagesPayload:
            record, stored = await repo.messages.append(
                conversation_id=input.conversation_id,
                messages=list(input.messages),
                expected_version=input.expected_version,
            )
            return AppendMessagesPayload(
                conversation=Conversation.of(record), messages=[Message.of(m) for m in stored]
            )

        return await _run(info, AppendMessagesPayload, work)

    @strawberry.mutation
    async def replace_transcript(
        self, info: CTX, input: inputs.ReplaceTranscriptInput
    ) -> ConversationPayload:
        async def work(repo: Repository) -> ConversationPayload:
            record = await repo.messages.replace(
                conversation_id=input.conversation_id,
                messages=list(input.messages),
                expected_version=input.expected_version,
                metadata=input.metadata,
                provider=input.provider,
                model=input.model,
                provider_response_id=input.provider_response_id,
                unset=strawberry.UNSET,
            )
            return ConversationPayload(conversation=Conversation.of(record))

        return await _run(info, ConversationPayload, work)

    @strawberry.mutation
    async def save_snapshot(self, info: CTX, input: inputs.SaveSnapshotInput) -> SnapshotPayload:
        async def work(repo: Repository) -> SnapshotPayload:
            record = await repo.messages.save_snapshot(
                conversation_id=input.conversation_id, messages=list(input.messages)
            )
            return SnapshotPayload(snapshot=Snapshot.of(record))

        return await _run(info, SnapshotPayload, work)

    @strawberry.mutation
    async def delete_conversation(
        self, info: CTX, input: inputs.DeleteConversationInput
    ) -> DeletePayload:
        async def work(repo: Repository) -> DeletePayload:
            return DeletePayload(deleted=await repo.conversations.delete(input.id))

        return await _run(info, DeletePayload, work)

    @strawberry.mutation
    async def create_delegation(
        self, info: CTX, input: inputs.CreateDelegationInput
    ) -> DelegationPayload:
        async def work(repo: Repository) -> DelegationPayload:
            record = await repo.delegations.create(
                parent_conversation_id=input.parent_conversation_id,
                delegating_tier=input.delegating_tier,
                target_tier=input.target_tier,
                task=input.task,
                max_turns=input.max_turns,
                idempotency_key=input.idempotency_key,
            )
            return DelegationPayload(delegation=Delegation.of(record))

        return await _run(info, DelegationPayload, work)

    @strawberry.mutation
    async def complete_delegation(
        self, info: CTX, input: inputs.CompleteDelegationInput
    ) -> DelegationPayload:
        async def work(repo: Repository) -> DelegationPayload:
            record = await repo.delegations.complete(
                delegation_id=input.delegation_id, status=input.status, summary=input.summary
            )
            return DelegationPayload(delegation=Delegation.of(record))

        return await _run(info, DelegationPayload, work)

    @strawberry.mutation
    async def resume_delegation(
        self, info: CTX, input: inputs.ResumeDelegationInput
    ) -> DelegationPayload:
        async def work(repo: Repository) -> DelegationPayload:
            record = await repo.delegations.resume(
                delegation_id=input.delegation_id,
                target_tier=input.target_tier,
                task=input.task,
                max_turns=input.max_turns,
            )
            return DelegationPayload(delegation=Delegation.of(record))

        return await _run(info, DelegationPayload, work)

    @strawberry.mutation
    async def acquire_lock(self, info: CTX, input: inputs.AcquireLockInput) -> LockPayload:
        async def work(repo: Repository) -> LockPayload:
            token, until = await repo.conversations.acquire_lock(
                conversation_id=input.conversation_id,
                ttl_seconds=300 if input.ttl_seconds is None else input.ttl_seconds,
            )
            return LockPayload(token=token, expires_at=until)

        return await _run(info, LockPayload, work)

    @strawberry.mutation
    async def release_lock(self, info: CTX, input: inputs.ReleaseLockInput) -> ReleaseLockPayload:
        async def work(repo: Repository) -> ReleaseLockPayload:
            released = await repo.conversations.release_lock(
                conversation_id=input.conversation_id, token=input.token
            )
            return ReleaseLockPayload(released=released)

        return await _run(info, ReleaseLockPayload, work)

    @strawberry.mutation
    async def checkpoint_session(
        self, info: CTX, input: inputs.CheckpointSessionInput
    ) -> SessionStatePayload:
        async def work(repo: Repository) -> SessionStatePayload:
            record = await repo.sessions.checkpoint(
                session_id=input.session_id,
                state=input.state,
                outcome=ReflectOutcome.PROCEED if input.outcome is None else input.outcome,
                expected_version=input.expected_version,
            )
            return SessionStatePayload(session_state=SessionState.of(record))

        return await _run(info, SessionStatePayload, work)

    @strawberry.mutation
    async def delete_session_state(
        self, info: CTX, input: inputs.DeleteSessionStateInput
    ) -> DeletePayload:
        async def work(repo: Repository) -> DeletePayload:
            return DeletePayload(deleted=await repo.sessions.delete(input.session_id))

        return await _run(info, DeletePayload, work)
