"""Committed changes, told to the subscribers of this process.

The repositories collect an `Event` per change; the unit of work hands them to the broker
once the transaction has committed. Each subscriber has a bounded queue. When events may
have committed that the broker never heard of (PostgreSQL's LISTEN connection was lost, a
notification could not be read; on SQLite another process wrote to the file), `lost_track()`
tells every subscriber, and each reads them from the durable log (api/subscriptions.py).

A queue that overflows is dropped the same way: one write may publish more events to a
subscriber than its queue holds (a root's expiry moves every child transcript below it), so
an overflow is no sign of a reader that stopped. The listener drops what it queued, queues
nothing more until its reader is told (LOST), and the reader reads what it missed from the
log: memory stays bounded by the queue, and the stream goes on, missing nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from graph.domain.events import EventKind
from graph.store.sql import Sql
from graph.store.tables import Conversation, Delegation, Message

# Unread events a subscriber may hold before its queue is dropped for the log (the default).
QUEUE_SIZE = 1000
# The kinds whose events say their conversation's message count after them.
_COUNTED = frozenset({EventKind.MESSAGES_APPENDED, EventKind.TRANSCRIPT_REPLACED})


@dataclass(frozen=True, slots=True)
class Event:
    """A committed change to one conversation, published after the transaction commits."""

    kind: EventKind
    conversation_id: str
    # Ancestors of the conversation, root first: subscribers above it see it too.
    ancestry: tuple[str, ...]
    workspace_type: str
    workspace_id: str
    version: int
    at: datetime
    messages: tuple[Message, ...] | None = None
    delegation: Delegation | None = None
    # The event's place in its tree's log (store/event_log.py), given just before commit.
    position: int = 0
    # The root's event counter as the row was written (a deleted root's last position).
    head: int | None = None
    # Of a replace that wrote no message (it cut the transcript, or saved it unchanged):
    # the conversation's message count after it. Otherwise `message_count` says it.
    count_without_messages: int | None = None

    def numbered(self, position: int) -> Event:
        """This event at `position` in its tree's log (dataclasses.replace without its
        field-by-field introspection: every write numbers its events)."""
        return Event(
            self.kind,
            self.conversation_id,
            self.ancestry,
            self.workspace_type,
            self.workspace_id,
            self.version,
            self.at,
            self.messages,
            self.delegation,
            position,
            self.head,
            self.count_without_messages,
        )

    @property
    def message_count(self) -> int | None:
        """Of an append or a replace: the conversation's message count after it. What
        either writes goes at the end, so its last message's seq says it, unless a replace
        wrote none."""
        if self.kind not in _COUNTED:
            return None
        if self.messages:
            return self.messages[-1].seq
        return self.count_without_messages

    @property
    def root_id(self) -> str:
        """The root of the event's tree: whose log holds it."""
        return self.ancestry[0] if self.ancestry else self.conversation_id

    @classmethod
    def of(
        cls,
        kind: EventKind,
        conversation: Conversation,
        *,
        at: datetime | None = None,
        **extra: Any,
    ) -> Event:
        """The event of `kind` about `conversation` (as written); `at`, when it happened,
        is the write's own time (`updated_at`) unless given: a delete writes no row.

        A delete is one version past the row's last (the version no read will see): a client
        that merges what it read with the stream by version (README) would otherwise take a
        delete at the version it had read for an event it had already seen, and drop it."""
        version = conversation.version
        if kind is EventKind.CONVERSATION_DELETED:
            version += 1
        return cls(
            kind=kind,
            conversation_id=conversation.id,
            ancestry=conversation.ancestors,
            workspace_type=conversation.workspace_type,
            workspace_id=conversation.workspace_id,
            version=version,
            at=conversation.updated_at if at is None else at,
            head=None if conversation.ancestry else conversation.event_position,
            **extra,
        )


class Lost:
    """What a listener gives when events may have been missed (LOST, the one instance)."""

    __slots__ = ()


LOST = Lost()


@dataclass(eq=False, slots=True)
class Listener:
    """One subscription's place in the broker: the events it wants, queued.

    The queue is a list and one future its reader waits on, not an asyncio.Queue, and the
    listener has slots, not a dict: a server holds one per subscriber, and a Queue's three
    deques and Event are a lot of memory for a queue that almost always holds nothing."""

    conversation_id: str
    include_descendants: bool
    queue_size: int = QUEUE_SIZE
    # Set once the conversation is read: deleting an ancestor deletes this one too. Until
    # then (None) every delete is queued, and the reader asks `wants` again.
    ancestry: tuple[str, ...] | None = None
    # Events were dropped for want of room and the reader is not told yet: until it is,
    # nothing more is queued but what ends the stream.
    behind: bool = False
    # The first position of the stream's tree dropped since the reader was last told (0:
    # none): the catch-up must find it in the log (`missing`, once told).
    dropped_from: int = 0
    missing: int = 0
    # A delete was dropped before the ancestry was known, of a tree it could not place
    # (perhaps an ancestor's): the reader checks that its conversation is still there.
    dropped_unplaced: bool = False
    # Events may have been committed that were not offered: read them from the log.
    lost: bool = False
    # Every event of the tree up to this position was offered (wanted) or passed over (not
    # wanted), with no loss of track since: a catch-up with nothing queued starts here.
    heard: int = 0
    # None in the queue means the broker stopped.
    _queued: list[Event | None] = field(init=False, default_factory=list)
    _waiter: asyncio.Future[None] | None = field(init=False, default=None)
    _heard_when_lost: int = field(init=False, default=0)

    def wants(self, event: Event) -> bool:
        if event.conversation_id == self.conversation_id or self.ends_with(event):
            return True
        if self.ancestry is None and event.kind is EventKind.CONVERSATION_DELETED:
            return True  # perhaps an ancestor's: the reader decides once it knows them
        return self.include_descendants and self.conversation_id in event.ancestry

    def learn_ancestry(self, ancestry: tuple[str, ...]) -> None:
        """The conversation's ancestors, once read: the deletes queued meanwhile that were
        not of one of them (another tree's, perhaps another tenant's) go. Until then the
        queue takes more than its size: what it would drop could be of any tree, and a
        resume could not say from where (it holds one read's worth of commits)."""
        self.ancestry = ancestry
        self._queued = [e for e in self._queued if e is None or self.wants(e)]
        if len(self._queued) > self.queue_size:
            self._fall_behind()

    def ends_with(self, event: Event) -> bool:
        """Whether `event` deleted the subscribed conversation (itself or an ancestor)."""
        return event.kind is EventKind.CONVERSATION_DELETED and (
            event.conversation_id == self.conversation_id
            or (self.ancestry is not None and event.conversation_id in self.ancestry)
        )

    def lose_track(self) -> None:
        """Events may have committed without being offered: the reader is told (LOST) at
        once, before anything queued, and reads them from the log."""
        self.lost = True
        self._wake()

    def hear(self, event: Event, root_id: str) -> None:
        """`event`, of the tree of `root_id`, was published: queued if this listener wants
        it, and noted as heard either way."""
        if self.wants(event):
            self.offer(event)
        if self.lost or self.ancestry is None or event.position <= self.heard:
            return
        if root_id == (self.ancestry[0] if self.ancestry else self.conversation_id):
            self.heard = event.position

    def catch_up_from(self, handled: int) -> int:
        """Where the catch-up after the last LOST starts reading the log, for a reader that
        handled everything up to `handled`: past what was passed over too, when nothing was
        queued or dropped (a queued event comes before it, or it is handled). As things
        stood when LOST was given: what is heard since may already lie past a missed event."""
        return max(handled, self._heard_when_lost)

    def ending_queued(self) -> bool:
        """Whether an event that ends this listener is queued."""
        return any(e is not None and self.ends_with(e) for e in self._queued)

    def offer(self, event: Event | None) -> None:
        """Queue `event` for the reader (None: the broker stops), or drop it for the log."""
        if event is None or (self.behind and self._ends_unqueued(event)):
            # The end has room always: the log cannot say that the broker stops, nor hold a
            # deleted root's delete (its log went with it).
            self._queued.append(event)
        elif self.behind:
            self._drop(event)
            return
        else:
            # Before the ancestry is known the queue holds one read's worth of commits, up to
            # ten times its size (every delete of the process may be queued meanwhile).
            room = self.queue_size if self.ancestry is not None else 10 * self.queue_size
            if len(self._queued) >= room:
                self._fall_behind()
                self.offer(event)
                return
            self._queued.append(event)
        self._wake()

    def _ends_unqueued(self, event: Event) -> bool:
        return self.ends_with(event) and not self.ending_queued()

    def _fall_behind(self) -> None:
        """Drop the queue, but for the end (the broker's stop, the first event that ends the
        stream): the reader reads the rest from the log once told (LOST)."""
        queued, self._queued = self._queued, []
        self.behind = True
        for event in queued:
            if event is None or self._ends_unqueued(event):
                self._queued.append(event)
            else:
                self._drop(event)
        self._wake()

    def _drop(self, event: Event) -> None:
        if self.ancestry is None and not (
            event.conversation_id == self.conversation_id or self.conversation_id in event.ancestry
        ):
            # Not known to be of the stream's tree: a position of another tree means nothing.
            self.dropped_unplaced = True
        elif not self.dropped_from or event.position < self.dropped_from:
            self.dropped_from = event.position

    def _to_tell(self) -> bool:
        """Whether the reader is owed word of something besides a queued event."""
        return self.lost or self.behind

    def queued_positions(self) -> tuple[int, ...]:
        """The positions of the events queued and not yet read, and the first one dropped
        before the reader was told: the events it is owed, of its tree once its ancestry is
        known."""
        queued = tuple(e.position for e in self._queued if e is not None)
        return (*queued, self.dropped_from) if self.dropped_from else queued

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _arrival(self, idle_seconds: float | None) -> bool:
        """Wait until something is queued (True) or `idle_seconds` pass first (False)."""
        if self._queued:
            return True
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        timer = None if idle_seconds is None else loop.call_later(idle_seconds, self._wake)
        try:
            await self._waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()
        return bool(self._queued)

    async def events(
        self, *, idle_seconds: float | None = None
    ) -> AsyncIterator[Event | Lost | None]:
        """The events in commit order, until the conversation is deleted or the broker stops.

        With `idle_seconds`, None comes after that long without an event (a chance for the
        subscriber to check that it may still listen). LOST comes, before anything queued,
        when events may have been missed (lost track of, or dropped for want of room): the
        reader reads the log from its last event, and events are queued again meanwhile.
        """
        while True:
            waited = not self._to_tell() and not await self._arrival(idle_seconds)
            if waited and not self._to_tell():
                yield None  # nothing came: the reader may check that it still listens
                continue
            if self._to_tell():
                # Heard up to here with no loss of track, unless something is queued or was
                # dropped (heard, but not handled).
                self._heard_when_lost = 0 if self._queued or self.behind else self.heard
                self.missing, self.dropped_from = self.dropped_from, 0
                self.lost = self.behind = False
                yield LOST
                continue
            event = self._queued.pop(0)
            if event is None:
                return
            yield event
            if self.ends_with(event):
                return


class EventBroker:
    """Fans committed events out to this process's subscribers."""

    def __init__(self, *, queue_size: int = QUEUE_SIZE) -> None:
        self._listeners: set[Listener] = set()
        self._queue_size = queue_size

    @property
    def active(self) -> int:
        return len(self._listeners)

    def publish(self, events: Iterable[Event]) -> None:
        for event in events:
            root_id = event.root_id
            for listener in tuple(self._listeners):
                listener.hear(event, root_id)

    # How many times a connection this broker listened on was lost (PostgreSQL's LISTEN).
    connections_lost = 0

    def listener_down_for(self) -> float | None:
        """Seconds this broker has not been listening to the database (0.0 while it listens);
        None for one that needs no connection of its own to hear events."""
        return None

    def lost_track(self) -> None:
        """Events may have committed that were not published here: every subscriber reads
        what it missed from the log."""
        for listener in tuple(self._listeners):
            listener.lose_track()

    @asynccontextmanager
    async def subscribe(
        self, conversation_id: str, *, include_descendants: bool
    ) -> AsyncIterator[Listener]:
        listener = Listener(conversation_id, include_descendants, self._queue_size)
        self._listeners.add(listener)
        self._joined(listener)
        try:
            yield listener
        finally:
            self._listeners.discard(listener)
            self._left(listener)

    def _joined(self, listener: Listener) -> None:
        """Hook: `listener` listens from now on (before its subscription reads anything)."""

    def _left(self, listener: Listener) -> None:
        """Hook: `listener` no longer listens."""

    async def notices(self, sql: Sql, events: Sequence[Event]) -> list[tuple[str, str]]:
        """The notifications to send inside the write transaction for `events`, as (channel,
        payload): PostgreSQL's NOTIFY, which event_log.record sends with the log rows. None
        here: this process's subscribers get the events once committed."""
        return []

    async def start(self) -> None:
        """Hook for brokers that listen to the database (PostgreSQL LISTEN/NOTIFY)."""

    async def stop(self) -> None:
        for listener in tuple(self._listeners):
            listener.offer(None)
