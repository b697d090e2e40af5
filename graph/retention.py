"""Retention: delete conversations past their `expiresAt`, with everything below them."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy import delete

from .context import Services
from .db import Database
from .events import EventBroker
from .records import ConversationRecord, Event, EventKind
from .tables import conversation as C
from .tables import event_outbox

OUTBOX_KEEP = timedelta(hours=1)

logger = logging.getLogger("convograph.retention")


async def sweep(
    db: Database, *, broker: EventBroker | None = None, now: datetime | None = None
) -> int:
    """Delete expired conversations (cascading to transcripts, snapshots and delegations),
    announcing each deletion to `broker`'s subscribers as an explicit delete does."""
    now = now or datetime.now(UTC)
    async with db.write() as conn:
        rows = (
            await conn.execute(
                delete(C).where(C.c.expires_at.is_not(None), C.c.expires_at <= now).returning(*C.c)
            )
        ).all()
        events = [
            Event.of(EventKind.CONVERSATION_DELETED, ConversationRecord.from_row(row))
            for row in rows
        ]
        if broker is not None:
            await broker.stage(conn, events)
        # Parked event payloads are read within moments of their NOTIFY; keep an hour.
        await conn.execute(
            delete(event_outbox).where(event_outbox.c.created_at < now - OUTBOX_KEEP)
        )
    if broker is not None:
        broker.publish(events)
    return len(rows)


async def sweep_forever(services: Services) -> None:
    interval = services.settings.sweep_interval_seconds
    if interval <= 0:
        return
    while True:
        await asyncio.sleep(interval)
        try:
            removed = await sweep(services.db, broker=services.broker)
            if removed:
                logger.info("retention sweep removed %d expired conversations", removed)
        except Exception:
            logger.exception("retention sweep failed; retrying in %.0fs", interval)
