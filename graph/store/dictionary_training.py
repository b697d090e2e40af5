"""SQLite: the compression dictionaries, trained from the database's own messages.

A dictionary learnt from too few messages knows only them; one learnt from a thousand or
more knows what the next ones share (store/compression.py). So a check, `DELAY` seconds
after a write began (when it has committed), takes the dictionaries stored already (by
another process) or, once the database holds `TRAIN_AT` messages, trains one from the newest
`SAMPLES` (the first `SAMPLE_CHARS` characters of each: a few MB, however large the
messages), in a worker thread (tens of milliseconds), and stores it if it is worth it: the
samples hold `DISTINCT` different texts, and every tenth of them, held out, compresses to at
most compression.WORTH of what zstd makes of it alone (and of its JSON). Boilerplate first
messages (a load test, pings, one prompt over and over) are refused so, and tried again when
the database holds twice as many. Later, if the messages drift away from what the newest
dictionary knows (`Compression.drifted`), another is trained from the newest messages and
stored beside it: a frame names its dictionary, and none is ever deleted. Messages written
before the first stay text. At start only the stored dictionaries are taken; a check then
runs only once this process has stored as many messages as the database lacked at the last
one: no statement of its own beside the writes of a small database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

import zstandard
from sqlalchemy import bindparam, func, select
from sqlalchemy.dialects.sqlite import insert

from graph.store.compression import WORTH, Compression, inflated
from graph.store.db import Database
from graph.store.sql import Prepared, Sql
from graph.store.tables import message as M
from graph.store.tables import message_dictionary as D

logger = logging.getLogger("convograph.compression")

TRAIN_AT = 1000
SAMPLES = 2000
SAMPLE_CHARS = 2048
DISTINCT = 200
DICTIONARY_BYTES = 32 * 1024
DELAY = 0.2
RETRY_AFTER = 100

_STORED = Prepared(select(D.c.id, D.c.data))
_LARGEST = Prepared(select(func.coalesce(func.max(M.c.id), 0)))
# The newest messages' texts, stored as text or as frames (inflated in SQL, so that only
# their first SAMPLE_CHARS characters come out).
_SAMPLES = Prepared(
    select(func.substr(inflated(M.c.data), 1, SAMPLE_CHARS))
    .order_by(M.c.id.desc())
    .limit(bindparam("limit"))
)
_INSERT = Prepared(
    insert(D).on_conflict_do_nothing(index_elements=["id"]),
    column_keys=["id", "data", "created_at"],
)


def train(texts: list[str], *, ident: int) -> bytes | None:
    """A dictionary learnt from `texts`; None if they are too few or too alike to give one
    worth keeping."""
    samples = list(dict.fromkeys(t.encode() for t in texts))  # each text once
    if len(samples) < DISTINCT:
        return None
    held = samples[::10]
    try:
        made = zstandard.train_dictionary(
            DICTIONARY_BYTES, [s for i, s in enumerate(samples) if i % 10], dict_id=ident, level=3
        )
    except zstandard.ZstdError:
        return None
    with_it = zstandard.ZstdCompressor(level=3, dict_data=made).compress
    alone = zstandard.ZstdCompressor(level=3).compress
    kept = sum(len(with_it(s)) for s in held)
    if kept > WORTH * min(sum(len(alone(s)) for s in held), sum(map(len, held))):
        return None
    return made.as_bytes()


class DictionaryTraining:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._compression: Compression | None = db.compression
        # (Compression is not enabled with encryption on: db.py.)
        self.enabled = db.compression is not None and db.compression.enabled
        # Messages this process must store (as text) before the next check is worth it.
        self._needed = TRAIN_AT
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def written(self) -> None:
        """A write transaction begins."""
        compression = self._compression
        if not self.enabled or compression is None:
            return
        if self._timer is not None or (self._task is not None and not self._task.done()):
            return  # (before `drifted`, which starts its samples again when it answers)
        if compression.compressing:
            if not compression.drifted():
                return
            again = True  # the messages moved away from what the dictionary knows
        elif compression.texts_stored < self._needed:
            return
        else:
            again = False
        self._timer = asyncio.get_running_loop().call_later(DELAY, self._start, again)

    def _start(self, again: bool) -> None:
        self._timer = None
        self._task = asyncio.get_running_loop().create_task(self._check(again))

    async def stop(self) -> None:
        """No more checks; one under way is cancelled (a training thread runs out alone)."""
        self.enabled = False
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _check(self, again: bool) -> None:
        try:
            await self.check(again=again)
        except Exception as exc:
            # Tried again after RETRY_AFTER more messages (the database away, or not
            # migrated yet): not at every write.
            logger.warning("checking the messages' compression dictionary failed: %s", exc)
            self.failed()

    def failed(self) -> None:
        """A check failed: the next one after RETRY_AFTER more messages stored as text."""
        if self._compression is not None:
            self._needed = self._compression.texts_stored + RETRY_AFTER

    async def check(self, *, training: bool = True, again: bool = False) -> bool:
        """Take the stored dictionaries, and train one if none is (`training`, and the
        database holds enough messages) or if the newest no longer fits (`again`); whether
        this process compresses new messages now."""
        compression = self._compression
        assert compression is not None
        async with self._db.read() as conn:
            sql = Sql(conn, self._db)
            compression.learn((await sql.rows(_STORED)).values)
            known = compression.newest
            if known and not again:
                if not compression.compressing:  # its dictionary dropped (encrypt-existing)
                    self._needed = compression.texts_stored + TRAIN_AT
                return compression.compressing
            largest = int((await sql.rows(_LARGEST)).scalars()[0])
            if largest < TRAIN_AT or not training:
                self._needed = compression.texts_stored + max(TRAIN_AT - largest, 0)
                return compression.compressing
            texts = (await sql.rows(_SAMPLES, {"limit": SAMPLES})).scalars()
        made = await asyncio.to_thread(train, texts, ident=known + 1)
        if made is None:
            logger.info("the messages gave no compression dictionary worth keeping: not yet")
            self._needed = compression.texts_stored + largest
            return compression.compressing
        async with self._db.write() as conn:
            sql = Sql(conn, self._db)
            now = datetime.now(UTC)
            await sql.execute(_INSERT, {"id": known + 1, "data": made, "created_at": now})
            stored = (await sql.rows(_STORED)).values  # another process's, if it was first
        compression.learn(stored)
        logger.info("new messages are stored compressed with dictionary %d", compression.newest)
        return True
