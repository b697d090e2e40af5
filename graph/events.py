"""Publish/subscribe of committed conversation events, in process.

Each subscriber has a bounded queue: a subscriber that stops reading is cut off
instead of growing memory without limit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncConnection

from .errors import DomainError, ErrorCode
from .records import Event, EventKind

QUEUE_SIZE = 1000


class SubscriberTooSlow(DomainError):
    """The subscriber's queue overflowed; the stream ends and the client should resubscribe."""

    def __init__(self) -> None:
        super().__init__(ErrorCode.LIMIT_EXCEEDED, "too many events unread: resubscribe")


@dataclass(eq=False)
class Subscription:
    conversation_id: str
    include_descendants: bool
    # Set once the conversation is read: deleting an ancestor deletes this one too.
    ancestry: tuple[str, ...] = ()
    # None in the queue means the broker stopped.
    queue: asyncio.Queue[Event | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=QUEUE_SIZE)
    )
    overflowed: bool = False

    def wants(self, event: Event) -> bool:
        if event.conversation_id == self.conversation_id or self.ends_with(event):
            return True
        return self.include_descendants and self.conversation_id in event.ancestry

    def ends_with(self, event: Event) -> bool:
        """Whether `event` deleted the subscribed conversation (itself or an ancestor)."""
        return event.kind is EventKind.CONVERSATION_DELETED and (
            event.conversation_id == self.conversation_id or event.conversation_id in self.ancestry
        )

    def offer(self, event: Event | None) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True

    async def events(self) -> AsyncIterator[Event]:
        """The events in commit order, until the conversation is deleted or the broker stops."""
        while True:
            event = await self.queue.get()
            if self.overflowed:
                raise SubscriberTooSlow
            if event is None:
                return
            yield event
            if self.ends_with(event):
                return


class EventBroker:
    """Fans committed events out to this process's subscribers."""

    def __init__(self) -> None:
        self._subscriptions: set[Subscription] = set()

    @property
    def active(self) -> int:
        return len(self._subscriptions)

    def publish(self, events: Iterable[Event]) -> None:
        for event in events:
            for sub in tuple(self._subscriptions):
                if sub.wants(event):
                    sub.offer(event)

    @asynccontextmanager
    async def subscribe(
        self, conversation_id: str, *, include_descendants: bool
    ) -> AsyncIterator[Subscription]:
        sub = Subscription(conversation_id, include_descendants)
        self._subscriptions.add(sub)
        try:
            yield sub
        finally:
            self._subscriptions.discard(sub)

    async def stage(self, conn: AsyncConnection, events: Iterable[Event]) -> None:
        """Called inside the write transaction, before commit (PostgreSQL NOTIFYs here)."""

    async def start(self) -> None:
        """Hook for brokers that listen to the database (PostgreSQL LISTEN/NOTIFY)."""

    async def stop(self) -> None:
        for sub in tuple(self._subscriptions):
            sub.offer(None)
