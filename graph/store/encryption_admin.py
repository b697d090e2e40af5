"""The operator's side of encryption at rest: `convograph keys status|rotate|encrypt-existing`,
and the sweep's collection of data keys whose conversation is gone.

Every pass here is resumable: it works in small batches, each committed on its own, and a
batch only changes what is not yet as wanted (a data key not yet wrapped by the current
master key, a value not yet sealed), each row changed only if it still holds what was read
(so a server writing at the same time loses nothing).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table, and_, bindparam, or_, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from graph.domain import chunks, jsoncodec
from graph.domain.messages import search_text as message_search_text
from graph.settings import Settings
from graph.store import pending_shreds
from graph.store.compression import is_frame_sql
from graph.store.db import Database
from graph.store.encryption import (
    CONVERSATION,
    Encryption,
    EncryptionError,
    conversation_ref,
    is_sealed,
)
from graph.store.key_store import TOMBSTONE
from graph.store.sealed_blocks import seal_missing
from graph.store.search_index import index_waiting
from graph.store.sql import Sql
from graph.store.tables import conversation as C
from graph.store.tables import delegation as D
from graph.store.tables import event_log as L
from graph.store.tables import message as M
from graph.store.tables import session_state as SS
from graph.store.tables import snapshot as S

logger = logging.getLogger("convograph.encryption")

BATCH = 500
# A key younger than this may belong to a conversation whose create has not committed yet.
ORPHAN_AGE_SECONDS = 3600.0
# Keys a sweep reads for those without data, at most (see shred_orphans).
SCAN_PER_SWEEP = 50_000


@dataclass(frozen=True, slots=True)
class KeyCount:
    key_id: str
    count: int
    which: str  # "current", "previous" or "unknown"


async def status(encryption: Encryption) -> list[KeyCount]:
    """How many data keys each master key wraps; none where there is no key store (a status
    makes none)."""
    if not await encryption.store.exists():
        return []
    await encryption.store.open()
    counts = await encryption.store.counts()
    out = []
    for key_id, count in sorted(counts.items()):
        if key_id == TOMBSTONE:
            which = "deleted: the keys of deleted conversations, destroyed"
        elif key_id == encryption.current.id:
            which = f"current ({encryption.current.setting})"
        elif encryption.previous is not None and key_id == encryption.previous.id:
            which = f"previous ({encryption.previous.setting})"
        else:
            which = "unknown: neither key set wraps these"
        out.append(KeyCount(key_id, count, which))
    return out


async def retired_to(encryption: Encryption) -> str | None:
    """The master key id `keys rotate` rotated the current master key away to, if it did."""
    if not await encryption.store.exists():
        return None
    await encryption.store.open()
    return await encryption.store.successor(encryption.current.id)


async def rotate(encryption: Encryption, *, progress: Callable[[int], None] | None = None) -> int:
    """Wrap every data key under the current master key; how many were wrapped again. The
    content is not touched: only the wrapped keys change. The previous master key is retired
    first: from then on no server left running with it alone makes a key wrapped by it, which
    would outlive the rotation (see key_store)."""
    await encryption.store.open()
    # Given alone, a retired key is the old one, not one to rotate to.
    await encryption.check_not_retired()
    current, previous = encryption.current, encryption.previous
    if previous is not None and previous.id != current.id:
        recorded = await encryption.store.retire(previous.id, current.id)
        if recorded != current.id:
            # Another rotation (under way, or interrupted) took it to another key: two would
            # split the data keys between their two new master keys.
            raise EncryptionError(
                f"{previous.setting} (master key id {previous.id}) was rotated "
                f"to master key id {recorded} by another `keys rotate`, not to "
                f"{current.setting} (id {current.id}): finish that rotation with that key as "
                f"{current.setting}, then rotate away from it with it as "
                "CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY"
            )
    done, after = 0, ""
    while True:
        page = await encryption.store.page(
            after=after, limit=BATCH, not_key_id=encryption.current.id
        )
        if not page:
            return done
        for stored in page:
            master = encryption.masters.get(stored.key_id)
            if master is None:
                raise EncryptionError(
                    f"the data key {stored.ref} is wrapped by master key {stored.key_id}: set it "
                    "as CONVOGRAPH_ENCRYPTION_PREVIOUS_KEY to rotate away from it"
                )
            rewrapped = encryption.current.wrap(stored.ref, master.unwrap(stored))
            # Lost only to a delete (nothing left to wrap) or another rotation (done).
            if await encryption.store.replace(stored, rewrapped):
                done += 1
        after = page[-1].ref
        if progress is not None:
            progress(done)


async def shred_orphans(db: Database, *, batch: int = BATCH) -> int:
    """Delete the data keys that deletes left (a process stopped between a delete's commit
    and its keys' end: store/pending_shreds.py), and those of conversations that are gone
    (deleted by a cascade, or by a release before pending shreds); how many.

    Each sweep reads SCAN_PER_SWEEP keys of the key store at most, from where the one before
    stopped (the whole store each time cost seconds of CPU a minute at a million
    conversations), `batch` keys at a time, and lets the process's other requests in after
    each: SQLite's key store and data answer inline, on the event loop, so without a yield
    the scan held the whole process."""
    encryption = db.encryption
    if encryption is None:
        return 0
    await encryption.ready()
    gone, after = await pending_shreds.finish_all(db, batch=batch), encryption.orphan_scan_after
    read = 0
    while True:
        if read >= SCAN_PER_SWEEP:
            encryption.orphan_scan_after = after  # the next sweep goes on from here
            return gone
        refs = await encryption.store.refs_older_than(
            CONVERSATION, ORPHAN_AGE_SECONDS, after=after, limit=min(batch, SCAN_PER_SWEEP - read)
        )
        if not refs:
            encryption.orphan_scan_after = ""  # through: the next sweep begins again
            return gone
        read += len(refs)
        ids = [r[len(CONVERSATION) :] for r in refs]
        async with db.read() as conn:
            found = await Sql(conn, db).rows(select(C.c.id).where(C.c.id.in_(ids)))
        alive = set(found.scalars())
        orphans = [conversation_ref(i) for i in ids if i not in alive]
        if orphans:
            await encryption.forget(orphans)
            gone += len(orphans)
        after = refs[-1]
        await asyncio.sleep(0)


# -- encrypt-existing ---------------------------------------------------------------------


async def encrypt_existing(db: Database, *, progress: Callable[[str, int], None]) -> int:
    """Seal every value written while encryption was off, in place; how many rows."""
    encryption = db.encryption
    if encryption is None:
        raise EncryptionError("CONVOGRAPH_ENCRYPTION_KEY (or _KEY_FILE) is not set")
    index = await encryption.ready()
    total = 0

    def conversation_key(row: dict[str, Any]) -> str:
        return conversation_ref(row["id"])

    passes: list[tuple[str, Table, str, tuple[str, ...], Callable[[dict[str, Any]], str]]] = [
        ("conversations", C, "id", ("title", "metadata"), conversation_key),
        ("snapshots", S, "id", ("messages",), lambda r: conversation_ref(r["conversation_id"])),
        (
            "delegations",
            D,
            "id",
            ("task", "summary"),
            lambda r: conversation_ref(r["child_conversation_id"]),
        ),
        ("checkpoints", SS, "id", ("state",), lambda r: index.session_ref(r, r["session_id"])),
    ]
    for name, table, key, columns, ref_of in passes:
        count = await _seal_table(db, table, key, columns, ref_of)
        progress(name, count)
        total += count
    count = await _seal_messages(db)
    progress("messages", count)
    total += count
    if db.is_sqlite:
        progress("compression dictionaries (dropped)", await _drop_dictionaries(db))
    count = await _seal_transcript_blocks(db)
    progress("transcript blocks", count)
    total += count
    count = await _seal_event_log(db)
    progress("event log", count)
    if db.is_sqlite:
        await index_waiting_now(db)
    return total + count


async def _seal_table(
    db: Database,
    table: Table,
    key: str,
    columns: tuple[str, ...],
    ref_of: Callable[[dict[str, Any]], str],
) -> int:
    encryption = db.encryption
    assert encryption is not None
    id_column = table.c[key]
    done = 0
    after: object = 0 if id_column.type.python_type is int else ""
    while True:
        async with db.write() as conn:
            sql = _raw(conn, db)
            found = await sql.rows(
                select(table).where(id_column > after).order_by(id_column).limit(BATCH)
            )
            if not found.values:
                return done
            for values in found.values:
                row = dict(zip(found.keys, values, strict=True))
                plain = {c: row[c] for c in columns if row[c] is not None and not is_sealed(row[c])}
                if not plain:
                    continue
                sealed = dict(plain)
                await encryption.seal_values(ref_of(row), sealed, columns)
                # Only if the row still holds what was read: a concurrent write wins.
                await sql.execute(
                    update(table)
                    .where(id_column == row[key], *(table.c[c] == v for c, v in plain.items()))
                    .values(sealed)
                )
                done += 1
            after = found.values[-1][found.keys.index(key)]


# A message's words as the index holds them (the view of migration 0012): taken out before
# its row is sealed, its digests put in after. A message above the index's mark waits to be
# indexed with its new text (search_index.py).
_UNINDEX = text(
    "INSERT INTO message_fts(message_fts, rowid, search_text) "
    "SELECT 'delete', id, search_text FROM message_search WHERE id = :id "
    "AND search_text IS NOT NULL AND id <= (SELECT upto FROM message_fts_mark)"
)
_REINDEX = text(
    "INSERT INTO message_fts(rowid, search_text) "
    "SELECT id, search_text FROM message_search WHERE id = :id "
    "AND search_text IS NOT NULL AND id <= (SELECT upto FROM message_fts_mark)"
)


async def _seal_messages(db: Database) -> int:
    """Messages: the JSON sealed, the digest keyed, the search text as word digests. On
    SQLite the full-text index drops the message's words and indexes its digests."""
    encryption = db.encryption
    assert encryption is not None
    done, after = 0, 0
    while True:
        async with db.write() as conn:
            sql = _raw(conn, db)
            found = await sql.rows(
                select(M.c.id, M.c.conversation_id, M.c.data, M.c.digest, M.c.search_text)
                .where(M.c.id > after)
                .order_by(M.c.id)
                .limit(BATCH)
            )
            if not found.values:
                return done
            for mid, cid, data, digest, search_text in found.values:
                if is_sealed(data):
                    continue
                # Compressed before encryption was on: sealed as the text it holds.
                plain = db.compression.inflate_value(data) if db.compression else data
                if search_text is None:  # SQLite keeps no copy of the words: read the JSON
                    search_text = message_search_text(jsoncodec.loads(plain))
                row = {"data": plain, "digest": digest, "search_text": search_text}
                (sealed,) = await encryption.sealed_messages(cid, [row])
                if db.is_sqlite:
                    await sql.execute(_UNINDEX, {"id": mid})
                await sql.execute(
                    update(M)
                    .where(M.c.id == bindparam("mid"), M.c.data == bindparam("old"))
                    .values(sealed),
                    {"mid": mid, "old": data},
                )
                if db.is_sqlite:
                    await sql.execute(_REINDEX, {"id": mid})
                done += 1
            after = found.values[-1][0]


# The compression dictionaries no message uses any more (a frame begins with zstd's magic
# number; the sealed messages hold none).
_UNUSED_DICTIONARIES = text(
    "DELETE FROM message_dictionary WHERE NOT EXISTS "
    f"(SELECT 1 FROM message WHERE {is_frame_sql('data')})"
)


async def _drop_dictionaries(db: Database) -> int:
    """SQLite: drop the compression dictionaries once every message is sealed (how many). A
    dictionary is learnt from messages and holds pieces of their text as it was written:
    kept, it would keep in clear what encryption is there to hide."""
    async with db.write() as conn:
        return await _raw(conn, db).execute(_UNUSED_DICTIONARIES)


async def _seal_transcript_blocks(db: Database) -> int:
    """The complete blocks of 64 messages of every transcript that has none, each sealed as
    one value (store/sealed_blocks.py), so that old transcripts read as fast. One
    transcript per transaction: it holds its tree's locks as a write to it would, and no
    more (a transaction holding several trees could deadlock with a writer)."""
    done, after = 0, ""
    while True:
        async with db.read() as conn:
            found = await Sql(conn, db).rows(
                select(C.c.id)
                .where(C.c.id > after, C.c.message_count >= chunks.SIZE)
                .order_by(C.c.id)
                .limit(BATCH)
            )
        if not found.values:
            return done
        for (cid,) in found.values:
            async with db.write() as conn:
                done += await seal_missing(Sql(conn, db), cid)
        after = found.values[-1][0]


async def index_waiting_now(db: Database) -> None:
    """SQLite: index the waiting digests, then merge the index's segments, which drops the
    words the deletes above marked as gone (until merged, a segment still holds them)."""
    async with db.write() as conn:
        sql = _raw(conn, db)
        await index_waiting(sql)
        await sql.execute(text("INSERT INTO message_fts(message_fts) VALUES ('optimize')"))


async def _seal_event_log(db: Database) -> int:
    encryption = db.encryption
    assert encryption is not None
    done = 0
    after: tuple[str, int] = ("", 0)
    while True:
        async with db.write() as conn:
            sql = _raw(conn, db)
            found = await sql.rows(
                select(L.c.root_id, L.c.position, L.c.payload)
                .where(
                    or_(
                        L.c.root_id > after[0],
                        and_(L.c.root_id == after[0], L.c.position > after[1]),
                    )
                )
                .order_by(L.c.root_id, L.c.position)
                .limit(BATCH)
            )
            if not found.values:
                return done
            for root, position, payload in found.values:
                if payload is None or is_sealed(payload):
                    continue
                sealed = await encryption.seal(conversation_ref(root), payload)
                await sql.execute(
                    update(L)
                    .where(L.c.root_id == root, L.c.position == position, L.c.payload == payload)
                    .values(payload=sealed)
                )
                done += 1
            last = found.values[-1]
            after = (last[0], int(last[1]))


def _raw(conn: AsyncConnection, db: Database) -> Sql:
    """Sql that reads the values as stored (sealed ones not opened, compressed ones not
    inflated)."""
    sql = Sql(conn, db)
    sql.encryption = None
    sql.compression = None
    return sql


def vacuum(settings: Settings) -> None:
    """SQLite: rewrite the file and empty the WAL, so that no freed page keeps a value as it
    was written."""
    path = settings.sqlite_path
    if path is None:
        return
    conn = sqlite3.connect(path, timeout=settings.sqlite_busy_timeout_ms / 1000)
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
