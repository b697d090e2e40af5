"""Query root: thin resolvers over the repositories and the loaders."""

from __future__ import annotations

import strawberry

from graph.api.inputs import ConversationFilter
from graph.api.scalars import JSON
from graph.api.types import (
    Connection,
    Conversation,
    Delegation,
    Info,
    Node,
    Principal,
    SessionState,
    Snapshot,
    WorkspaceFigures,
)
from graph.domain.checkpoints import envelope_facts
from graph.domain.conversations import DEFAULT_CONTEXT, DEFAULT_PENDING_WINDOW, ConversationQuery
from graph.domain.paging import page_size

CONVERSATIONS_PAGE = 50
HISTORY_PAGE = 20
SEARCH_RESULTS = 10


def _query(value: ConversationFilter | None) -> ConversationQuery:
    if value is None:
        return ConversationQuery()
    return ConversationQuery(
        agent_slug=value.agent_slug,
        context=value.context,
        created_after=value.created_after,
        created_before=value.created_before,
        root_only=bool(value.root_only),
        search=value.search,
        owner=None if value.owner is None else (value.owner.type, value.owner.key),
        owner_type=value.owner_type,
    )


def _size(info: Info, first: int | None, default: int) -> int:
    return page_size(
        first, default=default, maximum=info.context.settings.max_page_size, field="first"
    )


@strawberry.type
class Query:
    @strawberry.field
    def viewer(self, info: Info) -> Principal:
        return Principal.of(info.context.principal)

    @strawberry.field
    async def node(self, info: Info, id: strawberry.ID) -> Node | None:
        loaders = info.context.loaders
        conversation = await loaders.conversation.load(id)
        if conversation is not None:
            return Conversation.of(conversation)
        delegation = await loaders.delegation.load(id)
        if delegation is not None:
            return Delegation.of(delegation)
        async with info.context.read() as repo:
            snapshot = await repo.snapshots.get(id)
        return Snapshot.of(snapshot) if snapshot is not None else None

    @strawberry.field
    async def conversation(self, info: Info, id: strawberry.ID) -> Conversation | None:
        found = await info.context.loaders.conversation.load(id)
        return Conversation.of(found) if found else None

    @strawberry.field(description="Newest first.")
    async def conversations(
        self,
        info: Info,
        filter: ConversationFilter | None = None,
        first: int | None = CONVERSATIONS_PAGE,
        after: str | None = None,
    ) -> Connection[Conversation]:
        query = _query(filter)
        size = _size(info, first, CONVERSATIONS_PAGE)
        async with info.context.read() as repo:
            page = await repo.conversations.find(query, first=size, after=after)
        return Connection.of(
            page, Conversation.of, count=lambda repo: repo.conversations.count(query)
        )

    @strawberry.field(
        description="The newest conversation of the caller created within "
        "`withinSeconds` for `context` (and `tokenId`, when given), if it is still "
        "pending; else null."
    )
    async def recent_pending_conversation(
        self,
        info: Info,
        within_seconds: int = DEFAULT_PENDING_WINDOW,
        context: str = DEFAULT_CONTEXT,
        token_id: strawberry.ID | None = None,
    ) -> Conversation | None:
        async with info.context.read() as repo:
            found = await repo.conversations.recent_pending(
                within_seconds=within_seconds, context=context, token_id=token_id
            )
        return Conversation.of(found) if found else None

    @strawberry.field
    async def delegation(self, info: Info, id: strawberry.ID) -> Delegation | None:
        found = await info.context.loaders.delegation.load(id)
        return Delegation.of(found) if found else None

    @strawberry.field(description="The most recent COMPLETED delegation to `targetTier`.")
    async def latest_delegation(self, info: Info, target_tier: str) -> Delegation | None:
        async with info.context.read() as repo:
            found = await repo.delegations.latest(target_tier)
        return Delegation.of(found) if found else None

    @strawberry.field(
        description="COMPLETED delegations whose summary contains `query`, newest completion first."
    )
    async def search_delegations(
        self, info: Info, query: str, first: int | None = SEARCH_RESULTS
    ) -> list[Delegation]:
        size = _size(info, first, SEARCH_RESULTS)
        async with info.context.read() as repo:
            found = await repo.delegations.search(query, size)
        return [Delegation.of(d) for d in found]

    @strawberry.field(
        description="The latest checkpoint of a session; null when the session has "
        "none (first run)."
    )
    async def session_state(self, info: Info, session_id: str) -> SessionState | None:
        async with info.context.read() as repo:
            found = await repo.checkpoints.latest(session_id)
        return SessionState.of(found) if found else None

    @strawberry.field(description="Every stored version of a session's checkpoint, newest first.")
    async def session_state_history(
        self,
        info: Info,
        session_id: str,
        first: int | None = HISTORY_PAGE,
        after: str | None = None,
    ) -> Connection[SessionState]:
        size = _size(info, first, HISTORY_PAGE)
        async with info.context.read() as repo:
            page = await repo.checkpoints.history(session_id, first=size, after=after)
        return Connection.of(
            page, SessionState.of, count=lambda repo: repo.checkpoints.count(session_id)
        )

    @strawberry.field(
        description="Conversations, messages, delegations by status and tokens of the records "
        "the caller may read (an ADMIN or SERVICE token: its workspace), counted in the "
        "database."
    )
    async def workspace_figures(self, info: Info) -> WorkspaceFigures:
        async with info.context.read() as repo:
            figures = await repo.figures.read()
        return WorkspaceFigures.of(figures)

    @strawberry.field(description="The Datalog facts an envelope carries (its `facts` list).")
    def extract_facts(self, envelope: JSON) -> list[str]:
        return envelope_facts(envelope)
