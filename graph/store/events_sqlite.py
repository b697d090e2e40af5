"""Events on SQLite: this process's own, and a look at the file for other processes' writes.

The server hands its subscribers what its own transactions commit (store/events.py).
Another process writing to the same file (`convograph sweep` run by hand, a second server)
logs its events durably but cannot tell this process: each subscriber notes SQLite's
stamp of other connections' commits (`Database.outside_changes`) when it starts listening,
before it reads anything, and the broker looks again before it hands out events of its own
(which another process's, committed earlier, must not overtake) and every `WATCH_SECONDS`
while there are none: a subscriber whose stamp moved reads the log first
(`Listener.lose_track`). A stamp not known (no write has opened the writer's connection yet)
counts as moved: a read of the log too many, never an event lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Hashable, Iterable

from graph.store.db import Database
from graph.store.events import QUEUE_SIZE, Event, EventBroker, Listener

logger = logging.getLogger("convograph.events")

WATCH_SECONDS = 2.0


class SQLiteBroker(EventBroker):
    def __init__(self, db: Database, *, queue_size: int = QUEUE_SIZE) -> None:
        super().__init__(queue_size=queue_size)
        self._db = db
        self._task: asyncio.Task[None] | None = None
        # Each listener's stamp: what it has heard of (or None: not known).
        self._stamps: dict[Listener, Hashable | None] = {}
        # The stamp every listener has heard of, unless one joined since (`_behind`).
        self._seen: Hashable | None = None
        self._behind = False

    async def start(self) -> None:
        self._task = asyncio.create_task(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await super().stop()

    def publish(self, events: Iterable[Event]) -> None:
        if self._stamps:
            self._look(self._db.outside_changes())
        super().publish(events)

    def _look(self, stamp: Hashable | None) -> None:
        """Every subscriber whose stamp is not `stamp` reads the log (None: not known)."""
        if stamp is not None and stamp == self._seen and not self._behind:
            return
        for listener, heard in tuple(self._stamps.items()):
            if heard is None or heard != stamp:
                listener.lose_track()
                self._stamps[listener] = stamp
        self._seen, self._behind = stamp, False

    def _joined(self, listener: Listener) -> None:
        self._stamps[listener] = self._db.outside_changes()
        self._behind = True

    def _left(self, listener: Listener) -> None:
        self._stamps.pop(listener, None)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            if not self._stamps:
                continue
            try:
                stamp = await self._db.watch_outside()
            except Exception as exc:
                logger.warning("cannot tell whether another process wrote: %s", exc)
                continue
            if stamp is not None:  # else not known now (a COMMIT in a thread): next time
                self._look(stamp)
