"""Subscription root: live events of a conversation and its descendants."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from .errors import not_found
from .records import EventKind
from .types import CTX, ConversationEvent


@strawberry.type
class Subscription:
    @strawberry.subscription(description="Live events of a conversation and, by default, of every "
                             "child transcript below it.")
    async def conversation_events(
        self, info: CTX, conversation_id: strawberry.ID, include_descendants: bool | None = True
    ) -> AsyncGenerator[ConversationEvent, None]:
        ctx = info.context
        async with ctx.read() as repo:
            found = await repo.conversations.get(conversation_id)
        if found is None:
            raise not_found("conversation", "conversationId")
        async with ctx.services.broker.subscribe(
            found.id, include_descendants=include_descendants is not False
        ) as sub:
            async for event in sub.events():
                yield ConversationEvent.of(event)
                if event.kind is EventKind.CONVERSATION_DELETED and event.conversation_id == (
                    found.id
                ):
                    return
