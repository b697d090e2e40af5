"""Subscription root: live events of a conversation and its descendants."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from .errors import not_found
from .repository.conversations import parse_uuid
from .types import CTX, ConversationEvent


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="Live events of a conversation and, by default, of every "
        "child transcript below it."
    )
    async def conversation_events(
        self, info: CTX, conversation_id: strawberry.ID, include_descendants: bool | None = True
    ) -> AsyncGenerator[ConversationEvent, None]:
        ctx = info.context
        cid = parse_uuid(conversation_id, "conversationId")
        # Listen before reading: a write committed between the two is queued, not lost,
        # and a delete committed before the read makes the read fail.
        async with ctx.services.broker.subscribe(
            cid, include_descendants=include_descendants is not False
        ) as sub:
            async with ctx.read() as repo:
                found = await repo.conversations.get(cid)
            if found is None:
                raise not_found("conversation", "conversationId")
            sub.ancestry = found.ancestry
            async for event in sub.events():
                # One connection serves many events: each reads its nested fields afresh.
                ctx.reset_loaders()
                yield ConversationEvent.of(event)
