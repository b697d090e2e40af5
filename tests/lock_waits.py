"""PostgreSQL sessions waiting for a lock: what a test that makes a write wait looks for."""

from __future__ import annotations

import asyncio

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

_WAITING = text(
    "SELECT pid FROM pg_stat_activity "
    "WHERE wait_event_type = 'Lock' AND datname = current_database()"
)


async def lock_waiters(engine: AsyncEngine, count: int = 1) -> list[int]:
    """The pids of the sessions of `engine`'s database waiting for a lock, once there are at
    least `count` of them (for up to 20 s; AssertionError if never)."""
    for _ in range(400):
        # A connection per look: pg_stat_activity stays as a transaction first saw it.
        async with engine.connect() as probe:
            pids = list((await probe.execute(_WAITING)).scalars())
        if len(pids) >= count:
            return pids
        await asyncio.sleep(0.05)
    raise AssertionError(f"never {count} statements waiting for a lock")
