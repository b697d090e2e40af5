"""Subscription root: live events of a conversation and its descendants, resumable.

With `after` (an event's cursor) the stream first replays the logged events after it, then
goes on live. The listener is registered before the replay reads the log: an event that
commits during the replay is queued, and one both replayed and queued is dropped from the
queue by its position, so the seam has no gap and no duplicate.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import strawberry

from graph.api.context import Context
from graph.api.types import ConversationEvent, Info
from graph.domain import cursors, ids
from graph.domain.errors import forbidden, not_found
from graph.store.events import Event, Listener, SubscriberTooSlow
from graph.store.repository.replay import expired
from graph.store.tables import Conversation

# How long an idle subscription goes before it checks that its token is still live.
LIVENESS_SECONDS = 2.0
# Logged events read per statement while replaying.
REPLAY_PAGE = 200


@strawberry.type
class Subscription:
    @strawberry.subscription(
        description="Live events of a conversation and, by default, of every "
        "child transcript below it. With `after` (an event's `cursor`): first every retained "
        "event after that one, in order, exactly once, then live events."
    )
    async def conversation_events(
        self,
        info: Info,
        conversation_id: strawberry.ID,
        include_descendants: bool | None = True,
        after: str | None = None,
    ) -> AsyncGenerator[ConversationEvent, None]:
        ctx = info.context
        cid = ids.parse(conversation_id, what="conversation", field="conversationId")
        mark = None if after is None else cursors.event(after, "after")
        # Listen before reading: a write committed between the two is queued, not lost,
        # and a delete committed before the read makes the read fail.
        async with ctx.services.broker.subscribe(
            cid, include_descendants=include_descendants is not False
        ) as listener:
            async with ctx.read() as repo:
                found = await repo.conversations.get(cid)
                if found is None:
                    raise not_found("conversation", "conversationId")
                head = None if mark is None else await repo.replay.head(found, *mark)
            listener.ancestry = found.ancestors
            replay = None
            if mark is not None and head is not None:
                replay = _replayed(ctx, found, listener, mark[1], head)
            # Not kept in this frame, which lives as long as the subscription: the replay
            # holds the record while it needs it.
            del found
            # The position up to which the log has been read, and the cursor last sent.
            seen = None if mark is None else mark[1]
            last = after
            sent = seen
            try:
                if replay is not None:
                    async for event in replay:
                        seen = event.position
                        if listener.wants(event):
                            last = cursors.encode_event(event.root_id, event.position)
                            sent = event.position
                            ctx.reset_loaders()
                            yield ConversationEvent.of(event)
                            if listener.ends_with(event):
                                return
                async for live in listener.events(idle_seconds=LIVENESS_SECONDS):
                    # Before each event, and now and then without one: a revoked or expired token
                    # ends it.
                    await _check_live(ctx)
                    if live is None or (seen is not None and live.position <= seen):
                        continue
                    # One connection serves many events: each reads its nested fields afresh.
                    ctx.reset_loaders()
                    last = cursors.encode_event(live.root_id, live.position)
                    sent = live.position
                    yield ConversationEvent.of(live)
            except SubscriberTooSlow as cut_off:
                cut_off.extensions["cursor"] = _resume_from(last, sent, cut_off.undelivered)
                raise


def _resume_from(last: str | None, sent: int | None, undelivered: Event | None) -> str | None:
    """The cursor a stream cut off resumes from: that of the last event sent, unless
    events before the first one missed were never sent (nothing was sent yet, and no `after`
    given: there was no cursor at all); then the place just before that first one."""
    if undelivered is None or (sent is not None and sent >= undelivered.position - 1):
        return last
    return cursors.encode_event(undelivered.root_id, undelivered.position - 1)


async def _replayed(
    ctx: Context, conversation: Conversation, listener: Listener, after: int, head: int
) -> AsyncIterator[Event]:
    """The logged events of the tree after `after`, page by page, until a page comes back
    short (then every event committed since is in the listener's queue)."""
    while True:
        await _check_live(ctx)
        async with ctx.read() as repo:
            page = await repo.replay.page(conversation, after, limit=REPLAY_PAGE)
        if not page and after < head:
            raise expired()  # pruned between the check and this read
        for event in page:
            yield event
            after = event.position
        if len(page) < REPLAY_PAGE:
            return


async def _check_live(ctx: Context) -> None:
    if ctx.still_live is not None and not await ctx.still_live(ctx.principal):
        raise forbidden("the token of this subscription was revoked or has expired")
