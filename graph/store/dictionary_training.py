"""SQLite: the compression dictionary trained from the database's own messages, once.

A dictionary learnt from too few messages knows only them; one learnt from a thousand of
the newest knows what the next ones share (store/compression.py). So a check, `DELAY`
seconds after a write began (when it has committed), takes a dictionary stored already (by
another process) or, once the database holds `TRAIN_AT` messages, trains one from the newest
`SAMPLES` stored as text, in a worker thread (tens of milliseconds), and stores it. Messages
written before it stay text; the ones after are compressed. A check runs at start, and then
only once this process has stored as many messages as the database lacked at the last one:
no statement of its own beside the writes of a small database. If training fails (messages
too alike to learn from), it is tried again when the database holds twice as many.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime

import zstandard
from sqlalchemy import bindparam, func, select
from sqlalchemy.dialects.sqlite import insert

from graph.store.compression import Compression
from graph.store.db import Database
from graph.store.sql import Prepared, Sql
from graph.store.tables import message as M
from graph.store.tables import message_dictionary as D

logger = logging.getLogger("convograph.compression")

TRAIN_AT = 1000
SAMPLES = 4000
DICTIONARY_BYTES = 32 * 1024
DELAY = 0.2

_STORED = Prepared(select(D.c.id, D.c.data))
_LARGEST = Prepared(select(func.coalesce(func.max(M.c.id), 0)))
_TEXTS = Prepared(
    select(M.c.data)
    .where(func.typeof(M.c.data) == "text")
    .order_by(M.c.id.desc())
    .limit(bindparam("limit"))
)
_INSERT = Prepared(
    insert(D).on_conflict_do_nothing(index_elements=["id"]),
    column_keys=["id", "data", "created_at"],
)


def train(texts: list[str], *, ident: int) -> bytes | None:
    """A dictionary learnt from `texts`; None if they are too few or too alike."""
    try:
        made = zstandard.train_dictionary(
            DICTIONARY_BYTES, [t.encode() for t in texts], dict_id=ident, level=3
        )
    except zstandard.ZstdError:
        return None
    return made.as_bytes()


class DictionaryTraining:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._compression: Compression | None = db.compression
        self.enabled = (
            db.compression is not None and db.compression.enabled and db.encryption is None
        )
        # Messages this process must store (as text) before the next check is worth it.
        self._needed = TRAIN_AT
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def written(self) -> None:
        """A write transaction begins."""
        compression = self._compression
        if not self.enabled or compression is None or compression.texts_stored < self._needed:
            return
        if self._timer is not None or (self._task is not None and not self._task.done()):
            return
        self._timer = asyncio.get_running_loop().call_later(DELAY, self._start)

    def _start(self) -> None:
        self._timer = None
        self._task = asyncio.get_running_loop().create_task(self._check())

    async def stop(self) -> None:
        """No more checks; one under way is cancelled (a training thread runs out alone)."""
        self.enabled = False
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _check(self) -> None:
        try:
            await self.check()
        except Exception as exc:
            # Tried again after the next write (the database away, or not migrated yet).
            logger.warning("checking the messages' compression dictionary failed: %s", exc)

    async def check(self) -> bool:
        """Take a stored dictionary, or train one if the database holds enough messages;
        whether this process compresses new messages now."""
        compression = self._compression
        assert compression is not None
        async with self._db.read() as conn:
            sql = Sql(conn, self._db)
            stored = (await sql.rows(_STORED)).values
            if stored:
                compression.learn(stored)
                self.enabled = False  # nothing more to do
                return True
            largest = int((await sql.rows(_LARGEST)).scalars()[0])
            if largest < TRAIN_AT:
                self._needed = compression.texts_stored + TRAIN_AT - largest
                return False
            texts = (await sql.rows(_TEXTS, {"limit": SAMPLES})).scalars()
        made = await asyncio.to_thread(train, texts, ident=1)
        if made is None:
            logger.info("too few different messages to train a compression dictionary from")
            self._needed = compression.texts_stored + largest
            return False
        async with self._db.write() as conn:
            sql = Sql(conn, self._db)
            await sql.execute(_INSERT, {"id": 1, "data": made, "created_at": datetime.now(UTC)})
            stored = (await sql.rows(_STORED)).values  # another process's, if it was first
        compression.learn(stored)
        self.enabled = False
        logger.info("messages are now stored compressed")
        return True
