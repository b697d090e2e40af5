"""Subscription root: live events of a conversation and its descendants, resumable.

With `after` (an event's cursor) the stream first replays the logged events after it, then
goes on live. The listener is registered before the replay reads the log: an event that
commits during the replay is queued, and one both replayed and queued is dropped from the
queue by its position, so the seam has no gap and no duplicate. When the broker may have
missed events (store/events.py: `lost_track`), or dropped them because more came at once
than the stream's queue holds, the stream replays the log from the last position it
handled the same way, before anything queued after.

What still ends a stream: its conversation's delete (the event, or NOT_FOUND when its tree
went with the events it missed), a token revoked or expired (FORBIDDEN), and events it
missed that the log no longer holds (CURSOR_EXPIRED: a reader stalled for longer than the
retention; read the state, subscribe anew). A client that stops reading its socket is
not ended for it: its stream waits at the WebSocket's send, its queue overflows and is
dropped (it holds no more than that), and once the client reads again the stream catches
up from the log.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

import strawberry

from graph.api.context import Context
from graph.api.types import ConversationEvent, Info
from graph.domain import cursors, ids
from graph.domain.errors import forbidden, not_found
from graph.store.events import Event, Listener, Lost
from graph.store.repository.replay import Tree, expired

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
                listener.learn_ancestry(found.ancestors)
                if mark is None:
                    head = start = await repo.replay.position(found)
                else:
                    head = await repo.replay.head(found, *mark)
                    start = mark[1]
            if listener.dropped_unplaced:
                # A delete dropped before the ancestry was known may have been an ancestor's,
                # committed before the head was read (its position is before the catch-up's
                # start): whether the conversation is still there says.
                async with ctx.read() as repo:
                    if await repo.conversations.get(cid) is None:
                        raise not_found("conversation", "conversationId")
            # Not the whole record in this frame, which lives as long as the subscription:
            # what reading its tree's log needs.
            tree = Tree.of(found)
            del found
            # The last position handled. Without `after`, what committed between the subscribe
            # and the read is queued (or dropped for want of room), unsent, at or before
            # `start`: handled up to just before the first of it, so a catch-up reads it too
            # (and the queued copy is then passed over as seen).
            handled = (
                start
                if mark is not None
                else min([start, *(p - 1 for p in listener.queued_positions())])
            )
            # The position up to which queued events are passed over: the log was read up to
            # it (they were sent from it), or the stream starts after it. So an event before
            # the head heard only after the read (a notification on its way, a COMMIT read
            # before it was published) is not sent: the catch-ups start at the head, and the
            # next event, if the broker missed it, would never follow it.
            seen = handled
            # Heard up to there, not up to `start`: the broker may have missed an event
            # between the first queued one and the head, and once the queued ones are sent a
            # catch-up would start past it.
            listener.heard = max(listener.heard, handled)
            replay = (
                None if mark is None or head == start else _replayed(ctx, tree, start, head=head)
            )
            while True:
                if replay is not None:
                    async for event in replay:
                        seen = handled = event.position
                        if listener.wants(event):
                            ctx.reset_loaders()
                            yield ConversationEvent.of(event)
                            if listener.ends_with(event):
                                return
                    replay = None
                async for live in listener.events(idle_seconds=LIVENESS_SECONDS):
                    # Before each event, and now and then without one: a revoked or expired
                    # token ends it.
                    await _check_live(ctx)
                    if isinstance(live, Lost):
                        start = listener.catch_up_from(handled)
                        replay = _replayed(ctx, tree, start, catching_up=listener)
                        break
                    # Not one that ends the stream: a replay that read it ended the stream
                    # then, and one before the head heard late is still its end.
                    if live is None or (live.position <= seen and not listener.ends_with(live)):
                        continue
                    # One connection serves many events: each reads its nested fields afresh.
                    ctx.reset_loaders()
                    handled = live.position
                    yield ConversationEvent.of(live)
                else:
                    return  # the conversation was deleted, or the server stops


async def _replayed(
    ctx: Context,
    tree: Tree,
    after: int,
    *,
    head: int | None = None,
    catching_up: Listener | None = None,
) -> AsyncIterator[Event]:
    """The logged events of the tree after `after`, page by page, until a page comes back
    short (then every event committed since is in the listener's queue).

    `head`: the last position a client's cursor was checked against (its events must all
    still be there). `catching_up`: the listener of a stream that may have missed events
    since it handled `after`: what the sweep pruned meanwhile is skipped (older than the
    retention, it was never the stream's to miss), and a conversation gone with its tree's
    log ends the stream with NOT_FOUND, unless the delete is queued for it already; the
    first position dropped from its queue (`Listener.missing`), which the stream has not
    handled, must still be in the log, or the stream ends with CURSOR_EXPIRED (it fell
    further behind than the log retains)."""
    missing = catching_up.missing if catching_up is not None else 0
    gone = False
    while True:
        await _check_live(ctx)
        async with ctx.read() as repo:
            page = await repo.replay.page(tree, after, limit=REPLAY_PAGE, whole=catching_up is None)
            if not page and catching_up is not None:
                gone = await repo.conversations.get(catching_up.conversation_id) is None
                if gone:
                    # Perhaps deleted since the read above: its delete is in the log unless
                    # its tree's root went (and the log with it), and a read now finds it.
                    page = await repo.replay.page(tree, after, limit=REPLAY_PAGE, whole=False)
                    gone = not page
        if not page and head is not None and after < head:
            raise expired()  # pruned between the check and this read
        if missing > after and not gone and (not page or page[0].position > missing):
            raise expired()  # dropped from the queue, then pruned before it was read
        missing = 0
        for event in page:
            yield event
            after = event.position
        if len(page) < REPLAY_PAGE:
            if gone and catching_up is not None and not catching_up.ending_queued():
                raise not_found("conversation", "conversationId")
            return


async def _check_live(ctx: Context) -> None:
    if ctx.still_live is not None and not await ctx.still_live(ctx.principal):
        raise forbidden("the token of this subscription was revoked or has expired")
