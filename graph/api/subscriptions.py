"""Subscription root: live events of a conversation and its descendants."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import strawberry

from graph.api.types import ConversationEvent, Info
from graph.domain import ids
from graph.domain.errors import forbidden, not_found

# How long an idle subscription goes before it checks that its token is still live.
LIVENESS_SECONDS = 2.0


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="Live events of a conversation and, by default, of every "
        "child transcript below it."
    )
    async def conversation_events(
        self, info: Info, conversation_id: strawberry.ID, include_descendants: bool | None = True
    ) -> AsyncGenerator[ConversationEvent, None]:
        ctx = info.context
        cid = ids.parse(conversation_id, what="conversation", field="conversationId")
        # Listen before reading: a write committed between the two is queued, not lost,
        # and a delete committed before the read makes the read fail.
        async with ctx.services.broker.subscribe(
            cid, include_descendants=include_descendants is not False
        ) as listener:
            async with ctx.read() as repo:
                found = await repo.conversations.get(cid)
            if found is None:
                raise not_found("conversation", "conversationId")
            listener.ancestry = found.ancestors
            async for event in listener.events(idle_seconds=LIVENESS_SECONDS):
                # Before each event, and now and then without one: a revoked or expired token
                # ends it.
                if ctx.still_live is not None and not await ctx.still_live(ctx.principal):
                    raise forbidden("the token of this subscription was revoked or has expired")
                if event is None:
                    continue
                # One connection serves many events: each reads its nested fields afresh.
                ctx.reset_loaders()
                yield ConversationEvent.of(event)
