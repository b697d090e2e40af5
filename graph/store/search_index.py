"""SQLite's full-text index of messages, brought up to date in batches.

FTS5 writes an index segment at every commit that touched it: indexing each appended
message in the append's own transaction cost about a sixth of an append. So an append writes
nothing for the index: `message_fts_mark.upto` is the last message id indexed (migration
0011: a new message's id is above every existing one), and the messages above it are
indexed together, `CHUNK` of them (in id order) per write transaction, the process's other
requests let in between (a backlog in one transaction held SQLite's writer, and on the inline
driver the whole process, for all of it: a million waiting messages, seconds):
- `DELAY` seconds after a write, or at once when `BATCH` writes have come since the last
  update, so the list stays short;
- before every operation that may search (`ready()`, called by the api's search gate before
  the operation reads anything), so a search sees every message its answer can see;
- within a transcript save's own transaction (Transcripts.replace), where an extra commit
  would cost more than indexing its rows.
PostgreSQL's GIN index is maintained by PostgreSQL itself: there this does nothing.

The index is contentless and filled from the view `message_search` (migration 0012): the
string leaves under each message's "content", read from its JSON, so a row does not hold
its text a second time. A message row's `search_text` is stored only where the JSON cannot
yield it (`stored_search_text`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from sqlalchemy import text

from graph.domain.messages import PreparedMessage
from graph.domain.words import indexed_text
from graph.store.db import Database
from graph.store.sql import Prepared, Sql

logger = logging.getLogger("convograph.search_index")

DELAY = 0.2
BATCH = 256
# Messages indexed per transaction: each holds the writer for tens of milliseconds.
CHUNK = 2000

_LARGEST = "(SELECT coalesce(max(id), 0) FROM message)"
# The messages above the mark, up to `{end}`, into the index.
_INDEX = (
    "INSERT INTO message_fts(rowid, search_text) SELECT id, search_text FROM message_search "
    "WHERE id > (SELECT upto FROM message_fts_mark) AND id <= {end} AND search_text IS NOT NULL"
)
# Prepared: compiled once per process, where SQLAlchemy compiles a statement again for every
# new engine (every server start, every command).
_INDEX_WAITING = (
    Prepared(text(_INDEX.format(end=_LARGEST))),
    Prepared(text(f"UPDATE message_fts_mark SET upto = {_LARGEST} WHERE upto <> {_LARGEST}")),
)
_INDEX_UPTO = (
    Prepared(text(_INDEX.format(end=":end"))),
    Prepared(text("UPDATE message_fts_mark SET upto = :end")),
)
# The id of the `skip`+1-th message above the mark: where a chunk of skip+1 of them ends.
_CHUNK_END = Prepared(
    text(
        "SELECT id FROM message WHERE id > (SELECT upto FROM message_fts_mark) "
        "ORDER BY id LIMIT 1 OFFSET :skip"
    )
)


# SQLite's JSON functions end a string at an escaped NUL: the words after it would be lost.
_NUL_ESCAPE = b"\\u0000"


def stored_search_text(sql: Sql, message: PreparedMessage) -> str | None:
    """The `search_text` a message row stores: with encryption on, the text (the JSON is
    sealed: the encryption turns it into keyed word digests); on PostgreSQL, the words its
    GIN index is built from. Otherwise SQLite's index reads the words from the JSON, and the
    row stores nothing, unless the JSON cannot yield them (an escaped NUL)."""
    if sql.encryption is not None:
        return message.search_text  # the blind index splits it its own way
    if not sql.is_sqlite:
        # Its words, split as SQLite's tokenizer splits them (domain/words.py), which
        # PostgreSQL's own parser would not: `alice@example.org` one word, `café` not `cafe`.
        return indexed_text(message.search_text)
    if _NUL_ESCAPE in message.encoded:
        return message.search_text
    return None


async def index_waiting(sql: Sql) -> None:
    """SQLite: index the messages above the mark, in the caller's transaction."""
    for statement in _INDEX_WAITING:
        await sql.execute(statement)


async def index_chunk(sql: Sql, size: int) -> bool:
    """SQLite: index at most `size` of the messages above the mark (the oldest), in the
    caller's transaction; whether any may be left."""
    end = (await sql.rows(_CHUNK_END, {"skip": size - 1})).scalars()
    if not end:
        await index_waiting(sql)
        return False
    for statement in _INDEX_UPTO:
        await sql.execute(statement, {"end": end[0]})
    return True


class SearchIndex:
    def __init__(self, db: Database) -> None:
        self._db = db
        self.enabled = db.is_sqlite
        # Unknown at start (messages may have been left waiting by the last run).
        self._dirty = self.enabled
        self._writes = 0
        self._lock = asyncio.Lock()
        self._timer: asyncio.Handle | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.chunk = CHUNK

    def written(self) -> None:
        """A write transaction begins: it may add messages to index (marked before it
        commits, so that no search can read between its commit and this mark)."""
        if not self.enabled:
            return
        self._dirty = True
        self._writes += 1
        if self._stopped:  # no batch after stop(): the next run indexes what waits
            return
        loop = asyncio.get_running_loop()
        if self._writes >= BATCH:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = loop.call_soon(self._in_background)
        elif self._timer is None:
            self._timer = loop.call_later(DELAY, self._in_background)

    async def ready(self) -> None:
        """Every committed message is indexed when this returns."""
        if not self.enabled:
            return
        if self._dirty or self._lock.locked():  # an update under way has not committed yet
            await self._update()

    async def stop(self, *, within: float) -> None:
        """Index what waits, for at most `within` seconds (best effort: the next run indexes
        it anyway; another process may hold SQLite's write lock). A write that begins after
        this, while the process shuts down, schedules no batch: one would run on a closed
        database, or never run at all."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        with contextlib.suppress(Exception):  # TimeoutError included: left for the next run
            async with asyncio.timeout(within):
                await self._last_batch()

    async def _last_batch(self) -> None:
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        if self._dirty:
            await self._update()

    def _in_background(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done():
            self._timer = loop.call_later(DELAY, self._in_background)  # after this one
            return
        self._timer = None
        self._task = loop.create_task(self._background())

    async def _background(self) -> None:
        try:
            await self._update()
        except Exception:
            # A search will try again before it reads; until then nothing is lost.
            logger.warning("indexing the waiting messages failed", exc_info=True)

    async def _update(self) -> None:
        async with self._lock:
            if not self._dirty:
                return
            # Cleared first: a write committed while this runs marks the index dirty again.
            self._dirty = False
            self._writes = 0
            try:
                while True:
                    async with self._db.write() as conn:
                        more = await index_chunk(Sql(conn, self._db), self.chunk)
                    if not more:
                        return
                    await asyncio.sleep(0)
            except BaseException:
                self._dirty = True
                raise
