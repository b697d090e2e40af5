"""The key store: every data key, wrapped by the master key, kept apart from the data.

Apart so that the two are backed up apart: a copy of the data restored after a delete finds
no key for what was deleted (crypto-shredding, see store/encryption.py). On SQLite it is a
file of its own (`CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE`, beside the database by default); on
PostgreSQL a schema of its own (`CONVOGRAPH_ENCRYPTION_KEY_SCHEMA`), reached through a pool
of its own, so that `pg_dump --exclude-schema` leaves it out of the data's backups.

Each call commits at once, outside the data's transaction: a key is stored before the data it
seals can commit, and destroyed only after the data's delete has committed. A crash between
the two leaves at most a key without data, never data without its key; the delete recorded
it in its own transaction, and the next start or sweep destroys it (store/pending_shreds.py).
A destroyed conversation key leaves a tombstone row (no key material).

`keys rotate` also records the master key it rotates away from as retired (table
`retired_master`, the id of its successor beside it): a key is never stored wrapped by a
retired master key (a server left running with the old key alone would otherwise go on
making them after `rotate` said it was done), and a start with it alone says the store was
rotated, instead of that the key is wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from graph.settings import Settings
from graph.store import pg_timeouts

# The key id of a deleted conversation's key: the key is gone, the row stays, so that no
# write can make a new key for it (conversation ids are never reused). A restored copy of
# its data then stays unreadable and unwritable, instead of half-readable under a new key.
TOMBSTONE = "-"


@dataclass(frozen=True, slots=True)
class StoredKey:
    """A data key as stored: `wrapped` (base64) under the master key whose id is `key_id`."""

    ref: str
    key_id: str
    wrapped: str


class KeyStore(ABC):
    where: str  # for messages: the file or schema

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def exists(self) -> bool:
        """Whether a key store with keys in it is there (without creating one)."""

    @abstractmethod
    async def get_many(self, refs: Sequence[str]) -> dict[str, StoredKey]: ...

    @abstractmethod
    async def add(self, key: StoredKey) -> StoredKey | None:
        """Store `key` unless its ref has one already; the one stored (the first wins).
        None when its master key is retired and no key of its ref is stored."""

    @abstractmethod
    async def delete(self, refs: Sequence[str]) -> int: ...

    @abstractmethod
    async def shred(self, refs: Sequence[str]) -> int:
        """Destroy the keys of `refs`, leaving a TOMBSTONE in their place."""

    @abstractmethod
    async def counts(self) -> dict[str, int]:
        """How many data keys each master key id wraps (TOMBSTONE: how many were shredded)."""

    @abstractmethod
    async def page(self, *, after: str, limit: int, not_key_id: str) -> list[StoredKey]:
        """Keys in ref order after `after` not wrapped by `not_key_id` (for rotation)."""

    @abstractmethod
    async def replace(self, old: StoredKey, new: StoredKey) -> bool:
        """Store `new` in place of `old` if `old` is still what is stored."""

    @abstractmethod
    async def refs_older_than(
        self, prefix: str, seconds: float, *, after: str, limit: int
    ) -> list[str]: ...

    @abstractmethod
    async def retire(self, key_id: str, successor: str) -> str:
        """Record master key `key_id` as rotated away from, to `successor`: no key wrapped
        by it is added from now on (one in the middle of being added is stored first). The
        successor recorded: the first one (another rotation's, if one came first)."""

    @abstractmethod
    async def unretire(self, key_id: str) -> None:
        """Forget that `key_id` was retired (a rotation back to it)."""

    @abstractmethod
    async def successor(self, key_id: str) -> str | None:
        """The master key `key_id` was rotated to; None when it is not retired."""

    @abstractmethod
    async def close(self) -> None: ...


_CREATE = (
    "CREATE TABLE IF NOT EXISTS data_key (ref TEXT PRIMARY KEY, key_id TEXT NOT NULL, "
    "wrapped TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)"
)
_CREATE_RETIRED = (
    "CREATE TABLE IF NOT EXISTS retired_master (key_id TEXT PRIMARY KEY, "
    "successor TEXT NOT NULL, retired_at DOUBLE PRECISION NOT NULL)"
)


# SQLite's refusals of a key store file that no retry cures, and what each means here.
_UNUSABLE = {
    sqlite3.SQLITE_NOTADB: "damaged, or another file than a key store",
    sqlite3.SQLITE_CORRUPT: "damaged",
    sqlite3.SQLITE_READONLY: "it, or its directory, is read-only",
    sqlite3.SQLITE_CANTOPEN: "a directory, or in one that cannot be written",
}


class SQLiteKeyStore(KeyStore):
    """A SQLite file of its own, on the stdlib driver: a key is read once per process and
    conversation (then cached), so its few statements run on the event loop, as the data's
    do (see sqlite_inline)."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self.path = path
        self.where = str(path)
        self._busy = busy_timeout_ms / 1000
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            try:
                self._conn = self._open()
            except OSError as exc:
                raise self._unusable(exc.strerror or str(exc)) from None
            except sqlite3.DatabaseError as exc:
                if exc.sqlite_errorcode & 0xFF not in _UNUSABLE:
                    raise
                raise self._unusable(f"{exc} ({_UNUSABLE[exc.sqlite_errorcode & 0xFF]})") from None
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, timeout=self._busy, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            # A key must outlive a power cut once the data it seals has committed.
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute(_CREATE)
            with contextlib.suppress(sqlite3.OperationalError):
                # A read-only store of a release before it: no add or retire can run on it.
                conn.execute(_CREATE_RETIRED)
        except BaseException:
            conn.close()
            raise
        return conn

    def _unusable(self, reason: str) -> Exception:
        return unusable(self.path, reason)

    async def open(self) -> None:
        self._db()

    async def exists(self) -> bool:
        if self._conn is None and not self.path.exists():
            return False
        return bool(self._db().execute("SELECT 1 FROM data_key LIMIT 1").fetchone())

    async def get_many(self, refs: Sequence[str]) -> dict[str, StoredKey]:
        found: dict[str, StoredKey] = {}
        db = self._db()
        for start in range(0, len(refs), 500):
            chunk = list(refs[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for ref, key_id, wrapped in db.execute(
                f"SELECT ref, key_id, wrapped FROM data_key WHERE ref IN ({marks})", chunk
            ):
                found[ref] = StoredKey(ref, key_id, wrapped)
        return found

    async def add(self, key: StoredKey) -> StoredKey | None:
        db = self._db()
        # One statement: SQLite's write lock orders it before or after a `retire`.
        db.execute(
            "INSERT OR IGNORE INTO data_key SELECT ?, ?, ?, ? "
            "WHERE NOT EXISTS (SELECT 1 FROM retired_master WHERE key_id = ?)",
            (key.ref, key.key_id, key.wrapped, time.time(), key.key_id),
        )
        return (await self.get_many([key.ref])).get(key.ref)

    async def delete(self, refs: Sequence[str]) -> int:
        db, count = self._db(), 0
        for start in range(0, len(refs), 500):
            chunk = list(refs[start : start + 500])
            marks = ",".join("?" * len(chunk))
            count += db.execute(f"DELETE FROM data_key WHERE ref IN ({marks})", chunk).rowcount
        return count

    async def shred(self, refs: Sequence[str]) -> int:
        db, count = self._db(), 0
        for start in range(0, len(refs), 500):
            chunk = list(refs[start : start + 500])
            marks = ",".join("?" * len(chunk))
            count += db.execute(
                f"UPDATE data_key SET key_id = ?, wrapped = '' WHERE ref IN ({marks})",
                [TOMBSTONE, *chunk],
            ).rowcount
        return count

    async def counts(self) -> dict[str, int]:
        rows = self._db().execute("SELECT key_id, count(*) FROM data_key GROUP BY key_id")
        return {key_id: int(n) for key_id, n in rows}

    async def page(self, *, after: str, limit: int, not_key_id: str) -> list[StoredKey]:
        rows = self._db().execute(
            "SELECT ref, key_id, wrapped FROM data_key WHERE ref > ? AND key_id <> ? "
            "AND key_id <> ? ORDER BY ref LIMIT ?",
            (after, not_key_id, TOMBSTONE, limit),
        )
        return [StoredKey(*row) for row in rows]

    async def replace(self, old: StoredKey, new: StoredKey) -> bool:
        cursor = self._db().execute(
            "UPDATE data_key SET key_id = ?, wrapped = ? WHERE ref = ? AND key_id = ? "
            "AND wrapped = ?",
            (new.key_id, new.wrapped, old.ref, old.key_id, old.wrapped),
        )
        return cursor.rowcount == 1

    async def refs_older_than(
        self, prefix: str, seconds: float, *, after: str, limit: int
    ) -> list[str]:
        rows = self._db().execute(
            "SELECT ref FROM data_key WHERE ref > ? AND substr(ref, 1, ?) = ? "
            "AND created_at < ? AND key_id <> ? ORDER BY ref LIMIT ?",
            (after, len(prefix), prefix, time.time() - seconds, TOMBSTONE, limit),
        )
        return [ref for (ref,) in rows]

    async def retire(self, key_id: str, successor: str) -> str:
        db = self._db()
        db.execute(
            "INSERT OR IGNORE INTO retired_master VALUES (?, ?, ?)",
            (key_id, successor, time.time()),
        )
        found = db.execute(
            "SELECT successor FROM retired_master WHERE key_id = ?", (key_id,)
        ).fetchone()
        return str(found[0])

    async def unretire(self, key_id: str) -> None:
        self._db().execute("DELETE FROM retired_master WHERE key_id = ?", (key_id,))

    async def successor(self, key_id: str) -> str | None:
        db = self._db()
        try:
            found = db.execute(
                "SELECT successor FROM retired_master WHERE key_id = ?", (key_id,)
            ).fetchone()
        except sqlite3.OperationalError:  # not made in a read-only store (see _open)
            return None
        return None if found is None else str(found[0])

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class PostgresKeyStore(KeyStore):
    """A schema of its own in the database, reached through a small pool of its own: a
    write transaction that needs a new key must not wait for a connection of the data's
    pool, which other such writers may hold."""

    def __init__(self, settings: Settings, *, engine: AsyncEngine | None = None) -> None:
        self.schema = settings.encryption_key_schema
        self.where = f"schema {self.schema}"
        self._table = f'"{self.schema}".data_key'
        self._retired = f'"{self.schema}".retired_master'
        self._settings = settings
        self._lent = engine  # the data's: used, never disposed here
        self._engine: AsyncEngine | None = None  # its own pool, made on first use
        self._opened = False

    def _pool(self) -> AsyncEngine:
        if self._lent is not None:
            return self._lent
        if self._engine is None:
            # Bounded as the data's pool is: a key store table locked by another session
            # held a new conversation's write, and a delete's answer, without limit.
            self._engine = create_async_engine(
                self._settings.database_url,
                pool_size=2,
                max_overflow=8,
                pool_pre_ping=True,
                pool_timeout=self._settings.pool_timeout_seconds,
                connect_args=pg_timeouts.connect_args(self._settings),
            )
        return self._engine

    async def open(self) -> None:
        if self._opened:
            return
        for attempt in range(3):
            try:
                async with self._pool().begin() as conn:
                    await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'))
                    await conn.execute(text(_CREATE.replace("data_key", self._table, 1)))
                    await conn.execute(
                        text(_CREATE_RETIRED.replace("retired_master", self._retired, 1))
                    )
                break
            except Exception:
                # Two processes creating the schema at once: one of them loses the race.
                if attempt == 2:
                    raise
                await asyncio.sleep(0.1)
        self._opened = True

    async def exists(self) -> bool:
        async with self._pool().connect() as conn:
            found = await conn.execute(
                text("SELECT to_regclass(:t)"), {"t": f'"{self.schema}".data_key'}
            )
            if found.scalar() is None:
                return False
            rows = await conn.execute(text(f"SELECT 1 FROM {self._table} LIMIT 1"))
            return rows.first() is not None

    async def get_many(self, refs: Sequence[str]) -> dict[str, StoredKey]:
        await self.open()
        async with self._pool().connect() as conn:
            rows = await conn.execute(
                text(f"SELECT ref, key_id, wrapped FROM {self._table} WHERE ref = ANY(:refs)"),
                {"refs": list(refs)},
            )
            return {ref: StoredKey(ref, key_id, wrapped) for ref, key_id, wrapped in rows}

    async def add(self, key: StoredKey) -> StoredKey | None:
        await self.open()
        async with self._pool().begin() as conn:
            # Waits for a `retire` under way (its table lock), then sees what it recorded.
            await conn.execute(
                text(
                    f"INSERT INTO {self._table} SELECT CAST(:ref AS TEXT), "
                    "CAST(:key_id AS TEXT), CAST(:wrapped AS TEXT), "
                    "CAST(:at AS DOUBLE PRECISION) "
                    f"WHERE NOT EXISTS (SELECT 1 FROM {self._retired} WHERE key_id = :key_id) "
                    "ON CONFLICT (ref) DO NOTHING"
                ),
                {"ref": key.ref, "key_id": key.key_id, "wrapped": key.wrapped, "at": time.time()},
            )
        return (await self.get_many([key.ref])).get(key.ref)

    async def delete(self, refs: Sequence[str]) -> int:
        await self.open()
        async with self._pool().begin() as conn:
            result = await conn.execute(
                text(f"DELETE FROM {self._table} WHERE ref = ANY(:refs)"), {"refs": list(refs)}
            )
            return int(getattr(result, "rowcount", 0))

    async def shred(self, refs: Sequence[str]) -> int:
        await self.open()
        async with self._pool().begin() as conn:
            result = await conn.execute(
                text(f"UPDATE {self._table} SET key_id = :t, wrapped = '' WHERE ref = ANY(:refs)"),
                {"t": TOMBSTONE, "refs": list(refs)},
            )
            return int(getattr(result, "rowcount", 0))

    async def counts(self) -> dict[str, int]:
        await self.open()
        async with self._pool().connect() as conn:
            rows = await conn.execute(
                text(f"SELECT key_id, count(*) FROM {self._table} GROUP BY key_id")
            )
            return {key_id: int(n) for key_id, n in rows}

    async def page(self, *, after: str, limit: int, not_key_id: str) -> list[StoredKey]:
        await self.open()
        async with self._pool().connect() as conn:
            rows = await conn.execute(
                text(
                    f"SELECT ref, key_id, wrapped FROM {self._table} WHERE ref > :after "
                    "AND key_id <> :k AND key_id <> :t ORDER BY ref LIMIT :limit"
                ),
                {"after": after, "k": not_key_id, "t": TOMBSTONE, "limit": limit},
            )
            return [StoredKey(*row) for row in rows]

    async def replace(self, old: StoredKey, new: StoredKey) -> bool:
        await self.open()
        async with self._pool().begin() as conn:
            result = await conn.execute(
                text(
                    f"UPDATE {self._table} SET key_id = :nk, wrapped = :nw WHERE ref = :ref "
                    "AND key_id = :ok AND wrapped = :ow"
                ),
                {
                    "nk": new.key_id,
                    "nw": new.wrapped,
                    "ref": old.ref,
                    "ok": old.key_id,
                    "ow": old.wrapped,
                },
            )
            return int(getattr(result, "rowcount", 0)) == 1

    async def refs_older_than(
        self, prefix: str, seconds: float, *, after: str, limit: int
    ) -> list[str]:
        await self.open()
        async with self._pool().connect() as conn:
            rows = await conn.execute(
                text(
                    f"SELECT ref FROM {self._table} WHERE ref > :after AND left(ref, :n) = :p "
                    "AND created_at < :before AND key_id <> :t ORDER BY ref LIMIT :limit"
                ),
                {
                    "t": TOMBSTONE,
                    "after": after,
                    "n": len(prefix),
                    "p": prefix,
                    "before": time.time() - seconds,
                    "limit": limit,
                },
            )
            return [ref for (ref,) in rows]

    async def retire(self, key_id: str, successor: str) -> str:
        await self.open()
        async with self._pool().begin() as conn:
            # Against the adds: one under way commits first (and `rotate` then finds its
            # key), one after it sees the record and stores nothing.
            await conn.execute(text(f"LOCK TABLE {self._table} IN SHARE ROW EXCLUSIVE MODE"))
            await conn.execute(
                text(
                    f"INSERT INTO {self._retired} VALUES (:k, :s, :at) "
                    "ON CONFLICT (key_id) DO NOTHING"
                ),
                {"k": key_id, "s": successor, "at": time.time()},
            )
            found = await conn.execute(
                text(f"SELECT successor FROM {self._retired} WHERE key_id = :k"), {"k": key_id}
            )
            return str(found.scalar_one())

    async def unretire(self, key_id: str) -> None:
        await self.open()
        async with self._pool().begin() as conn:
            await conn.execute(
                text(f"DELETE FROM {self._retired} WHERE key_id = :k"), {"k": key_id}
            )

    async def successor(self, key_id: str) -> str | None:
        await self.open()
        async with self._pool().connect() as conn:
            found = await conn.execute(
                text(f"SELECT successor FROM {self._retired} WHERE key_id = :k"), {"k": key_id}
            )
            value = found.scalar()
            return None if value is None else str(value)

    async def close(self) -> None:
        engine, self._engine = self._engine, None
        self._opened = False
        if engine is not None:
            await engine.dispose()


def unusable(path: Path, reason: str) -> Exception:
    """The key store's file cannot be used: its setting's to fix, not the database's (what
    a command said of SQLite's error, "file is not a database")."""
    from graph.store.encryption import EncryptionError  # which imports this module

    return EncryptionError(
        f"CONVOGRAPH_ENCRYPTION_KEY_STORE_FILE: cannot use the key store {path}: {reason}"
    )


def key_store(settings: Settings, *, engine: AsyncEngine | None = None) -> KeyStore:
    """The key store of the database `settings` name. On PostgreSQL, `engine` (the data's)
    may serve a short-lived store instead of a pool of its own: the start-up check does not
    need one, and its own engine cost a server's start a connection and a dialect set-up."""
    if settings.is_sqlite:
        return SQLiteKeyStore(
            settings.resolved_key_store_file, busy_timeout_ms=settings.sqlite_busy_timeout_ms
        )
    return PostgresKeyStore(settings, engine=engine)
