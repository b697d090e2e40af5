"""Query root: thin resolvers over the repository and the loaders."""

from __future__ import annotations

from typing import Any

import strawberry

from .errors import invalid
from .inputs import ConversationFilter
from .pagination import page_size
from .repository.conversations import ConversationFilter as Filter
from .scalars import JSON
from .types import (
    CTX,
    Connection,
    Conversation,
    Delegation,
    Node,
    Principal,
    SessionState,
    Snapshot,
)


def _filter(value: ConversationFilter | None) -> Filter:
    if value is None:
        return Filter()
    return Filter(
        agent_slug=value.agent_slug,
        context=value.context,
        created_after=value.created_after,
        created_before=value.created_before,
        root_only=bool(value.root_only),
        search=value.search,
        owner=None if value.owner is None else (value.owner.type, value.owner.key),
    )


@strawberry.type
class Query:
    @strawberry.field
    def viewer(self, info: CTX) -> Principal:
        return Principal.of(info.context.principal)

    @strawberry.field
    async def node(self, info: CTX, id: strawberry.ID) -> Node | None:
        loaders = info.context.loaders
        conversation = await loaders.conversation.load(id)
        if conversation is not None:
            return Conversation.of(conversation)
        delegation = await loaders.delegation.load(id)
        if delegation is not None:
            return Delegation.of(delegation)
        async with info.context.read() as repo:
            snapshot = await repo.messages.snapshot(id)
        return Snapshot.of(snapshot) if snapshot is not None else None

    @strawberry.field
    async def conversation(self, info: CTX, id: strawberry.ID) -> Conversation | None:
        found = await info.context.loaders.conversation.load(id)
        return Conversation.of(found) if found else None

    @strawberry.field(description="Newest first.")
    async def conversations(
        self,
        info: CTX,
        filter: ConversationFilter | None = None,
        first: int | None = 50,
        after: str | None = None,
    ) -> Connection[Conversation]:
        size = page_size(
            first, default=50, maximum=info.context.settings.max_page_size, field_name="first"
        )
        async with info.context.read() as repo:
            page = await repo.conversations.find(where=_filter(filter), first=size, after=after)
        return Connection.of(page, Conversation.of)

    @strawberry.field(
        description="The newest conversation of the caller created within "
        "`withinSeconds` for `context` (and `tokenId`, when given), if it is still "
        "pending; else null."
    )
    async def recent_pending_conversation(
        self,
        info: CTX,
        within_seconds: int = 600,
        context: str = "chat",
        token_id: strawberry.ID | None = None,
    ) -> Conversation | None:
        async with info.context.read() as repo:
            found = await repo.conversations.recent_pending(
                within_seconds=within_seconds, context=context, token_id=token_id
            )
        return Conversation.of(found) if found else None

    @strawberry.field
    async def delegation(self, info: CTX, id: strawberry.ID) -> Delegation | None:
        found = await info.context.loaders.delegation.load(id)
        return Delegation.of(found) if found else None

    @strawberry.field(description="The most recent COMPLETED delegation to `targetTier`.")
    async def latest_delegation(self, info: CTX, target_tier: str) -> Delegation | None:
        async with info.context.read() as repo:
            found = await repo.delegations.latest(target_tier)
        return Delegation.of(found) if found else None

    @strawberry.field(
        description="COMPLETED delegations whose summary contains `query`, newest completion first."
    )
    async def search_delegations(
        self, info: CTX, query: str, first: int | None = 10
    ) -> list[Delegation]:
        size = page_size(
            first, default=10, maximum=info.context.settings.max_page_size, field_name="first"
        )
        async with info.context.read() as repo:
            found = await repo.delegations.search(query, size)
        return [Delegation.of(d) for d in found]

    @strawberry.field(
        description="The latest checkpoint of a session; null when the session has "
        "none (first run)."
    )
    async def session_state(self, info: CTX, session_id: str) -> SessionState | None:
        async with info.context.read() as repo:
            found = await repo.sessions.latest(session_id)
        return SessionState.of(found) if found else None

    @strawberry.field(description="Every stored version of a session's checkpoint, newest first.")
    async def session_state_history(
        self, info: CTX, session_id: str, first: int | None = 20, after: str | None = None
    ) -> Connection[SessionState]:
        size = page_size(
            first, default=20, maximum=info.context.settings.max_page_size, field_name="first"
        )
        async with info.context.read() as repo:
            page = await repo.sessions.history(session_id=session_id, first=size, after=after)
        return Connection.of(page, SessionState.of)

    @strawberry.field(description="The Datalog facts an envelope carries (its `facts` list).")
    def extract_facts(self, envelope: JSON) -> list[str]:
        value: Any = envelope
        if not isinstance(value, dict):
            raise invalid("`envelope` must be a JSON object", "envelope")
        facts = value.get("facts") or []
        if not isinstance(facts, list) or not all(isinstance(f, str) for f in facts):
            raise invalid("`envelope.facts` must be a list of strings", "envelope", "facts")
        return facts
