"""Crypto-shredding that outlives a crash between a delete's commit and its keys' end.

The key store is apart from the data (store/key_store.py), so a delete can destroy the data
keys of what it deleted only once it has committed. It records them in `pending_shred` in
its own transaction; after the commit they are destroyed and the rows removed. A process
stopped in between (or a key store away then) leaves the rows: the next start and every
sweep finish them. Destroying a key twice is harmless, and a ref is never used again once
destroyed (a conversation's leaves a tombstone; a session's next checkpoints are sealed
under the key of a new generation: encryption.BlindIndex.session_ref).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from graph.store.db import Database
from graph.store.sql import Sql
from graph.store.tables import pending_shred as P

logger = logging.getLogger("convograph.encryption")

BATCH = 500


async def record(sql: Sql, refs: Sequence[str]) -> None:
    """In the deleting transaction: the keys of `refs` are to be destroyed once it commits."""
    if not refs:
        return
    insert = sqlite.insert(P) if sql.is_sqlite else postgresql.insert(P)
    now = datetime.now(UTC)
    unique = list(dict.fromkeys(refs))
    # In batches: the sweep's one transaction deletes every expired conversation, and one
    # INSERT of them all bound more parameters than asyncpg takes (32,767) past 16,383.
    for start in range(0, len(unique), BATCH):
        rows = [{"ref": ref, "created_at": now} for ref in unique[start : start + BATCH]]
        await sql.execute(insert.values(rows).on_conflict_do_nothing())


async def finish(db: Database, refs: Sequence[str]) -> None:
    """Destroy the keys of `refs` (their delete has committed), then their records."""
    encryption = db.encryption
    if encryption is None or not refs:
        return
    await encryption.forget(refs)
    async with db.write() as conn:
        for start in range(0, len(refs), BATCH):  # as many as `record` took
            chunk = list(refs[start : start + BATCH])
            await Sql(conn, db).execute(delete(P).where(P.c.ref.in_(chunk)))


async def finish_all(db: Database, *, batch: int = BATCH) -> int:
    """Finish every pending shred (a start, the sweep), `batch` at a time with the process's
    other requests let in between (on SQLite each batch runs inline, on the event loop);
    how many keys."""
    if db.encryption is None:
        return 0
    done = 0
    while True:
        async with db.read() as conn:
            found = await Sql(conn, db).rows(select(P.c.ref).order_by(P.c.ref).limit(batch))
        refs = [str(ref) for ref in found.scalars()]
        if not refs:
            return done
        await finish(db, refs)
        done += len(refs)
        await asyncio.sleep(0)
