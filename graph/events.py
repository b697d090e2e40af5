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

from .records import Event

QUEUE_SIZE = 1000


class SubscriberTooSlow(Exception):
    """The subscriber's queue overflowed; the stream ends and the client should resubscribe."""


@dataclass(eq=False)
class Subscription:
    conversation_id: str
    include_descendants: bool
    queue: asyncio.Queue[Event | None] = field(
        default_factory=lambda: asyncio.Queue(maxsize=QUEUE_SIZE)
    )
    overflowed: bool = False

    def wants(self, event: Event) -> bool:
        if event.conversation_id == self.conversation_id:
            return True
        return self.include_descendants and self.conversation_id in event.ancestry

    def offer(self, event: Event) -> None:
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.overflowed = True

    async def events(self) -> AsyncIterator[Event]:
        while True:
            event = await self.queue.get()
            if self.overflowed:
                raise SubscriberTooSlow("too many events unread: resubscribe")
            if event is not None:
                yield event


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
            sub.offer(None)  # type: ignore[arg-type]
