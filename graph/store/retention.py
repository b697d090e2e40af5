"""Retention: delete conversations past their `expiresAt`, with everything below them, and
the events older than the event log's retention."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete

from graph.domain.conversations import in_batches
from graph.domain.principal import SYSTEM
from graph.store import event_log
from graph.store.encryption_admin import shred_orphans
from graph.store.tables import event_outbox
from graph.store.unit_of_work import UnitOfWork

# Parked event payloads are read within moments of their NOTIFY; an hour is plenty.
OUTBOX_KEEP = timedelta(hours=1)
# Conversations deleted per transaction: each share holds the writer (SQLite) or its trees'
# locks for tens of milliseconds, not the whole backlog's time.
BATCH = 100
# Expired conversations read at a time (with the rest of their trees): the backlog is never
# held whole.
WINDOW = 1_000

logger = logging.getLogger("convograph.retention")


async def sweep(
    uow: UnitOfWork,
    *,
    now: datetime | None = None,
    batch: int = BATCH,
    window: int = WINDOW,
    stopping: asyncio.Event | None = None,
) -> int:
    """Delete expired conversations (cascading to transcripts, snapshots and delegations),
    announcing each deletion to subscribers (and in the log) as an explicit delete does, and
    prune the event log; the count of conversations.

    The backlog is read `window` expired conversations at a time (with whatever else of
    their trees expired) and deleted whole trees at a time, `batch` conversations to a
    transaction at most, the other requests of the process let in between: a backlog (a
    server that was down, a sweep that was off) in one transaction held SQLite's writer, and
    on the inline driver the whole process, for as long as it took (seconds for tens of
    thousands). Once `stopping` is set (the server shuts down) no share begins: the rest is
    the next sweep's."""
    now = now or datetime.now(UTC)
    removed = 0
    while True:
        async with uow.read(SYSTEM) as repo:
            trees = await repo.conversations.expired(now, first=window)
        went = 0
        for trees_of_batch in in_batches(trees, batch):
            if stopping is not None and stopping.is_set():
                return removed + went
            started = time.monotonic()
            async with uow.write(SYSTEM) as repo:
                went += await repo.conversations.delete_expired(now, trees_of_batch)
            await _give_way(started)
        removed += went
        # Done; or none of the window went although it had expired (a tree whose ancestry
        # and delegations disagree), and the next window would be the same one.
        if not went:
            break
    old = now - timedelta(seconds=uow.settings.event_retention_seconds)
    while stopping is None or not stopping.is_set():
        started = time.monotonic()
        async with uow.write(SYSTEM) as repo:
            pruned = await event_log.prune(repo.sql, old)
        if pruned < event_log.PRUNE_BATCH:
            break
        await _give_way(started)
    async with uow.write(SYSTEM) as repo:
        await repo.sql.execute(
            delete(event_outbox).where(event_outbox.c.created_at < now - OUTBOX_KEEP)
        )
    # The keys of what the deletes cascaded to (child transcripts), and of any delete whose
    # process stopped before deleting its keys: without their data, they go too.
    await shred_orphans(uow.db)
    return removed


async def _give_way(started: float) -> None:
    """After a share of the sweep that began at `started` (time.monotonic()), as long again
    for the rest of the process: the sweep takes half of its time at most. (One pass of the
    event loop was not enough: a request waiting on a timer or a future needs several, and
    the sweep's next share ran in each.)"""
    await asyncio.sleep(min(time.monotonic() - started, 1.0))


async def sweep_forever(uow: UnitOfWork, interval: float, stopping: asyncio.Event) -> None:
    """Sweep every `interval` seconds until `stopping` is set (a sweep under way stops after
    its share in hand) or cancelled; a failed sweep is logged and retried."""
    if interval <= 0:
        return
    while True:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval):
                await stopping.wait()
        if stopping.is_set():
            return
        try:
            removed = await sweep(uow, stopping=stopping)
            if removed:
                logger.info("retention sweep removed %d expired conversations", removed)
        except Exception:
            logger.exception("retention sweep failed; retrying in %.0fs", interval)
