"""Delegations: a conversation's hand-off to a sub-agent, with the child transcript."""

from __future__ import annotations

from datetime import datetime

import strawberry

from graph.api.types.base import Info, Wraps
from graph.api.types.conversation import Conversation, conversation_of
from graph.api.types.enums import DelegationStatus
from graph.api.types.relay import Node
from graph.store import tables


@strawberry.type
class Delegation(Node, Wraps[tables.Delegation]):
    id: strawberry.ID
    delegating_tier: str
    target_tier: str
    task: str
    max_turns: int | None = strawberry.field(description="Turn limit; null means unlimited.")
    status: DelegationStatus
    summary: str | None
    created_at: datetime
    completed_at: datetime | None

    @strawberry.field
    async def parent_conversation(self, info: Info) -> Conversation:
        return await conversation_of(info, self._row.parent_conversation_id, "parentConversation")

    @strawberry.field
    async def child_conversation(self, info: Info) -> Conversation:
        return await conversation_of(info, self._row.child_conversation_id, "childConversation")

    @strawberry.field(description="The delegation this one resumed, if any.")
    async def resumed_from(self, info: Info) -> Delegation | None:
        if self._row.resumed_from_id is None:
            return None
        found = await info.context.loaders.delegation.load(self._row.resumed_from_id)
        return Delegation.of(found) if found else None
