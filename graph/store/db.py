"""Engines and connections: SQLite (on the event loop, see sqlite_inline) and PostgreSQL.

SQLite allows one writer at a time. Writes take an asyncio.Lock, then the writer's one
long-lived connection, in transactions opened with BEGIN IMMEDIATE on the driver, so
concurrent writers queue on the lock instead of failing with "database is locked"; reads
use a separate pool and see committed data through WAL. Concurrent writes share a COMMIT
(group commit, see SQLiteWriter). While another process (the CLI, a backup, a `sqlite3`
shell) holds the file's write lock, BEGIN IMMEDIATE is retried with asyncio sleeps, never
waited for inside SQLite: only the writes wait, the loop goes on.
PostgreSQL's connections stay checked out between uses, in autocommit, and a write or a
query's reads begin and end their transaction on the driver (kept_connections.py).
A query's reads share one ReadTransaction. Statement and error listeners (`on_statement`,
`on_error`) see every statement, whichever way it runs (see sql.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, make_url, text
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool, QueuePool

from graph.domain.delegations import lowered
from graph.settings import Settings
from graph.store import pg_timeouts, sqlite_inline
from graph.store.compression import Compression
from graph.store.connections import driver_connection, end, open_driver_connection, run
from graph.store.encryption import Encryption
from graph.store.full_disk import FullDisk
from graph.store.idle_ping import ping_when_idle
from graph.store.kept_connections import KeptConnections, KeptPostgresConnections

logger = logging.getLogger("convograph.db")

StatementListener = Callable[[str, Any], None]
ErrorListener = Callable[[BaseException, bool], None]  # (error, is_disconnect)

# Waits between attempts to take SQLite's write lock while another process holds it.
BUSY_BACKOFF_SECONDS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05)


class DatabaseBusy(OperationalError):
    """SQLite's write lock stayed with another process for longer than busy_timeout."""


def _sqlite_engine(settings: Settings, *, writer: bool, compression: Compression) -> AsyncEngine:
    path = settings.sqlite_path
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    target = str(path) if path is not None else ":memory:"
    in_thread = settings.sqlite_commit_in_thread

    async def creator() -> Any:
        return sqlite_inline.connect(target, commit_in_thread=in_thread)

    engine = create_async_engine(
        settings.database_url,
        poolclass=AsyncAdaptedQueuePool,
        pool_size=1 if writer else max(1, settings.pool_size),
        max_overflow=0,
        pool_timeout=settings.pool_timeout_seconds,
        # Writes always end in COMMIT or ROLLBACK and reads never open a transaction (but
        # a ReadTransaction, which ends its own), so the rollback-on-return is wasted.
        pool_reset_on_return=None,
        async_creator=creator,
    )
    # The writer never waits inside SQLite for the lock (it would hold the event loop):
    # SQLiteWriter retries instead. Readers in WAL mode do not wait for writers.
    busy = 0 if writer else settings.sqlite_busy_timeout_ms

    @event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        # Opening the file waits like a reader: while another process closes its last
        # connection (checkpointing and removing the WAL) or recovers the WAL, setting the
        # journal mode is refused at once without a timeout.
        timeout_ms = settings.sqlite_busy_timeout_ms
        statements = [
            f"PRAGMA busy_timeout={int(timeout_ms)}",
            "PRAGMA journal_mode=WAL",
            "PRAGMA synchronous=FULL",
            "PRAGMA foreign_keys=ON",
            # The search index's view and trigger call convograph_inflate, an application
            # function: a build of SQLite that does not trust its schema would refuse it.
            "PRAGMA trusted_schema=ON",
        ]
        if busy != timeout_ms:
            statements.append(f"PRAGMA busy_timeout={int(busy)}")
        open_sqlite(dbapi_connection, statements, timeout=timeout_ms / 1000)
        # SQLite's lower() folds ASCII letters only; PostgreSQL's (in a UTF-8 database)
        # folds every letter, as searchDelegations must on both.
        dbapi_connection.create_function("unicode_lower", 1, _unicode_lower, deterministic=True)
        # The search index's view and trigger read compressed messages' JSON through it.
        compression.register(dbapi_connection)

    # No BEGIN from SQLAlchemy (the dialect's do_begin is a no-op): the writer's
    # transactions are opened by SQLiteWriter, and a reader opens one only for a
    # ReadTransaction: other reads see the latest commit at each statement (WAL).
    return engine


def _unicode_lower(text: object) -> object:
    return lowered(text) if isinstance(text, str) else text


def _busy(exc: sqlite3.OperationalError) -> bool:
    """SQLite refused for another connection's lock (what waiting and retrying can cure)."""
    return "locked" in str(exc) or "busy" in str(exc)


def _backoff(attempt: int) -> float:
    return BUSY_BACKOFF_SECONDS[min(attempt, len(BUSY_BACKOFF_SECONDS) - 1)]


def open_sqlite(dbapi_connection: Any, statements: list[str], *, timeout: float) -> None:
    """Run a new connection's PRAGMAs, retrying them while SQLite answers "locked" at once.

    The busy timeout covers most waits, but SQLite documents moments when a connection
    that opens the file is refused at once whatever its timeout (another process closing
    its last connection, or recovering the WAL): a server must not fail its start on one.
    """
    deadline = time.monotonic() + timeout
    for attempt in itertools.count():
        cursor = dbapi_connection.cursor()
        try:
            for statement in statements:
                cursor.execute(statement)
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
            if attempt == 0:
                logger.warning("opening the SQLite database met a lock (%s): retrying", exc)
        finally:
            cursor.close()
        # Blocks the loop, as the busy timeout itself does; only while a connection opens.
        time.sleep(_backoff(attempt))


def _postgres_engine(settings: Settings) -> AsyncEngine:
    engine = create_async_engine(
        settings.database_url,
        pool_size=settings.pool_size,
        max_overflow=settings.pool_size,
        pool_timeout=settings.pool_timeout_seconds,
        # Connections are pinged only after sitting idle (idle_ping.py), not on each checkout.
        pool_pre_ping=False,
        connect_args=pg_timeouts.connect_args(settings),
    )
    ping_when_idle(engine, idle_seconds=settings.pool_ping_idle_seconds)
    return engine


def _where(settings: Settings) -> str:
    """The database as operators name it in logs: its file, or its URL without a password."""
    if settings.is_sqlite:
        return str(settings.sqlite_path or ":memory:")
    return make_url(settings.database_url).render_as_string(hide_password=True)


def sqlite_read_only(settings: Settings) -> str | None:
    """Why the SQLite database of `settings` cannot be written, found before it is opened
    (`sqlite_file_read_only`)."""
    path = settings.sqlite_path
    return None if path is None else sqlite_file_read_only(path)


def sqlite_file_read_only(path: Path) -> str | None:
    """Why the SQLite file at `path` cannot be written, found before it is opened: the file,
    or the -wal or -shm file beside it, is read-only, or the directory they are in (made if
    missing) is. SQLite opens a read-only file for reading without a word, and the first
    write fails (a server's, as it starts, or mid-request); in a read-only directory it
    cannot make its -wal and -shm, and says only "unable to open database file"."""
    for file in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
        if file.exists() and not os.access(file, os.W_OK):
            return f"the SQLite file {file} is read-only"
    directory = next(d for d in path.parents if d.is_dir())
    if not os.access(directory, os.W_OK | os.X_OK):
        needs = "its -wal and -shm made beside it"
        if directory != path.parent:
            needs = f"the directory {path.parent} made"
        return f"the directory {directory} is read-only: the SQLite database {path} needs {needs}"
    return None


class _Group:
    """The writes that share one SQLite transaction, and so one COMMIT (one fsync)."""

    def __init__(self) -> None:
        self.committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.size = 0  # writes run in it, whether they joined or rolled back their own part
        self.joined = 0
        # What the writes that joined do once committed, in the order they ran.
        self.on_commit: list[Callable[[], None]] = []

    def end(self, error: BaseException | None) -> None:
        if self.committed.done():
            return
        if error is None:
            self.committed.set_result(None)
        else:
            self.committed.set_exception(error)
            self.committed.exception()  # retrieved: a group nobody joined logs nothing


class InFlight:
    """The HTTP requests being answered now, counted by the server (server/in_flight.py).

    The SQLite writer leaves its transaction open for other writes to join only while other
    requests are under way: alone (one client's turn after turn, the CLI, the sweep) a
    write commits at once.
    """

    __slots__ = ("requests",)

    def __init__(self) -> None:
        self.requests = 0


class SQLiteWriter:
    """The single SQLite writer: one write at a time, on one long-lived connection, and
    concurrent writes committed together (group commit).

    Each write after a group's first runs inside a SAVEPOINT of the open transaction (the
    first is alone in it). When a write ends while other requests are under way, the writer
    yields to the event loop, so that they reach their write; if one is then waiting for the
    lock, the transaction stays open for it, and otherwise (or when the group is full) it
    commits. A write returns only after the COMMIT that includes it (synchronous=FULL:
    durable), so every acknowledged write is on disk, and concurrent writes pay one fsync and
    write each page they share once. A write that fails rolls back to its savepoint, leaving
    the others (the first rolls back the transaction, which holds nothing else); if the
    failure ended the whole transaction (SQLite rolls back on a full disk or an I/O error),
    or the COMMIT fails, every write of the group fails with it: none was acknowledged.

    The connection stays checked out between transactions (a pool checkout and return per
    write is measurable on an append). It is replaced after a failure left its state
    unknown (see _end).
    """

    # Writes in one transaction at most: the first of them waits for all the others.
    MAX_GROUP = 64
    # Turns of the event loop a finished write leaves for others to join its transaction.
    JOIN_TURNS = 2

    def __init__(self, engine: AsyncEngine, *, busy_timeout_ms: int, in_flight: InFlight) -> None:
        self.engine = engine
        self.busy_timeout = busy_timeout_ms / 1000
        self.in_flight = in_flight
        self._lock = asyncio.Lock()
        self._conn: AsyncConnection | None = None
        self._waiting = 0  # writes waiting for the lock
        self._group: _Group | None = None  # the open transaction's writes
        self._flushes: set[asyncio.Task[None]] = set()
        self.writes = 0  # writes committed
        self.commits = 0  # COMMITs that made them durable
        self._opened = 0  # connections opened: a new one's data_version starts afresh
        self._committing = False  # a COMMIT in a worker thread holds the connection
        # Whether the write holding the lock waits for another process's lock on the file:
        # then the writes queued behind it wait no longer than their busy timeout either.
        self._file_busy = False

    @property
    def in_use(self) -> int:
        return 1 if self._lock.locked() else 0

    @asynccontextmanager
    async def transaction(
        self, on_commit: Callable[[], None] | None = None
    ) -> AsyncIterator[AsyncConnection]:
        # One wait for the whole write, behind this process's other writes and another
        # process's lock alike: queued behind a write that waits for the file, each would
        # otherwise wait its own busy timeout after the one before it.
        deadline = asyncio.get_running_loop().time() + self.busy_timeout
        await self._acquire(deadline)
        group: _Group | None = None
        try:
            conn = await self._connection()
            raw = driver_connection(conn)
            group = self._group
            if group is None:
                # IMMEDIATE takes the write lock up front: a read-then-write transaction
                # can then never fail half-way on lock upgrade.
                await self._begin_immediate(raw, deadline)
                group = self._group = _Group()
            group.size += 1
            # The first write of a group is alone in its transaction: undoing it is a
            # ROLLBACK, and it needs no savepoint of its own.
            savepoint = group.size > 1
            if savepoint:
                run(raw, "SAVEPOINT write")
            try:
                yield conn
            except BaseException as exc:
                await self._undo(conn, raw, group, exc, savepoint=savepoint)
                raise
            if savepoint:
                run(raw, "RELEASE write")
            group.joined += 1
            if on_commit is not None:
                group.on_commit.append(on_commit)
        finally:
            try:
                await self._settle()
            finally:
                self._lock.release()
        # Committed by this write or by a later one of its group; returns once it is.
        assert group is not None
        await asyncio.shield(group.committed)

    async def _acquire(self, deadline: float | None = None) -> None:
        self._waiting += 1
        try:
            if deadline is None or not self._lock.locked():
                await self._lock.acquire()
            else:
                try:
                    async with asyncio.timeout_at(deadline):
                        await self._lock.acquire()
                except TimeoutError:
                    if self._file_busy:
                        locked = sqlite3.OperationalError("database is locked")
                        raise DatabaseBusy("BEGIN IMMEDIATE", None, locked) from None
                    # Behind this process's own writes only: they end, and the group
                    # commit they share is what the busy timeout is not about.
                    await self._lock.acquire()
        except BaseException:
            self._waiting -= 1
            # The open transaction may have been left for this write, which will not come.
            self._flush_later()
            raise
        self._waiting -= 1

    def _flush_later(self) -> None:
        """Have the open transaction, if any, committed by a task of its own: a write that
        was to commit it (or to join it) was cancelled first."""
        if self._group is None:
            return
        task = asyncio.get_running_loop().create_task(self._flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self) -> None:
        await self._acquire()
        try:
            await self._settle()
        finally:
            self._lock.release()

    async def _settle(self, *, now: bool = False) -> None:
        """With the lock held: commit the open transaction, unless another write is on its
        way to join it."""
        group = self._group
        if group is None:
            return
        if not now and group.size < self.MAX_GROUP:
            if self._waiting:
                return
            if self.in_flight.requests > 1:
                # Requests under way reach their write (and wait for the lock) meanwhile: the
                # requests read in the next turn of the loop, in the one after.
                try:
                    for _ in range(self.JOIN_TURNS):
                        await asyncio.sleep(0)
                except BaseException:  # cancelled meanwhile: the group is committed anyway
                    self._flush_later()
                    raise
                if self._waiting:
                    return
        self._group = None
        # A group lives on the connection that began it: a failure that replaces the
        # connection ends the group first (_undo), and close() commits it before closing.
        conn = self._conn
        assert conn is not None
        self._committing = True
        try:
            await end(conn, driver_connection(conn), commit=True)
        except BaseException as exc:
            group.end(exc)
            return
        finally:
            self._committing = False
        self.commits += 1
        self.writes += group.joined
        _committed(group.on_commit)
        group.end(None)

    async def _undo(
        self,
        conn: AsyncConnection,
        raw: Any,
        group: _Group,
        error: BaseException,
        *,
        savepoint: bool,
    ) -> None:
        """Roll back one failed write: to its savepoint, or the whole transaction when it is
        the group's first (nothing else is in it). If the failure (or the rollback) ended
        the whole transaction, the group's other writes fail with it."""
        try:
            if savepoint and raw.in_transaction:
                run(raw, "ROLLBACK TO write")
                run(raw, "RELEASE write")
                return
        except Exception:
            pass
        if self._group is group:
            self._group = None
        group.end(error)
        with contextlib.suppress(Exception):  # the caller raises `error`
            await end(conn, raw, commit=False)

    async def _begin_immediate(self, raw: Any, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        try:
            for attempt in itertools.count():
                try:
                    run(raw, "BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if not _busy(exc):
                        raise
                    self._file_busy = True  # another process holds the file's write lock
                    if loop.time() >= deadline:
                        raise DatabaseBusy("BEGIN IMMEDIATE", None, exc) from exc
                pause = _backoff(attempt)
                await asyncio.sleep(min(pause, max(0.0, deadline - loop.time())))
        finally:
            self._file_busy = False

    async def _connection(self) -> AsyncConnection:
        conn = self._conn
        if conn is not None and not conn.invalidated:
            return conn
        self._conn = None
        if conn is not None:
            await conn.close()  # hands the invalidated connection's pool slot back
        self._conn = await self.engine.connect()
        self._opened += 1
        return self._conn

    async def watch_outside(self) -> tuple[int, int] | None:
        """`outside_changes()`, the connection opened first if no write has opened it."""
        if self._conn is None or self._conn.invalidated:
            await self._acquire()
            try:
                await self._connection()
            finally:
                self._lock.release()
        return self.outside_changes()

    def outside_changes(self) -> tuple[int, int] | None:
        """A stamp that moves whenever another connection (another process) commits to the
        database file, and only then: the writer connection's data_version, which the
        server's own writes leave alone. None while there is no open connection to ask, or
        its COMMIT runs in a worker thread (asking would wait for the fsync)."""
        conn = self._conn
        if conn is None or self._committing:
            return None
        raw = open_driver_connection(conn)
        if raw is None:
            return None
        try:
            return (self._opened, raw.data_version())
        except sqlite3.Error:
            return None  # a read will say what is wrong

    async def close(self) -> None:
        await self._acquire()
        try:
            await self._settle(now=True)
            if self._conn is not None:
                await self._conn.close()
                self._conn = None
        finally:
            self._lock.release()


def _committed(callbacks: list[Callable[[], None]]) -> None:
    for callback in callbacks:
        try:
            callback()
        except Exception:  # one write's follow-up must not keep the others' from theirs
            logger.exception("a callback after COMMIT failed")


class ReadTransaction:
    """One connection in one read transaction for all the reads of a query, opened on first use.

    The query's loader batches and resolvers then read one committed state, as a single
    SELECT would (SQLite: one WAL snapshot; PostgreSQL: REPEATABLE READ, read only), and pay
    one connection instead of one each. The connection serves one resolver at a time.
    """

    def __init__(self, kept: KeptConnections) -> None:
        self._kept = kept
        self._conn: AsyncConnection | None = None
        self._opening = asyncio.Lock()
        self._in_use = asyncio.Lock()

    @asynccontextmanager
    async def use(self) -> AsyncIterator[AsyncConnection]:
        conn = self._conn or await self._open()
        async with self._in_use:
            yield conn

    async def _open(self) -> AsyncConnection:
        async with self._opening:
            if self._conn is None:
                conn = await self._kept.take()
                try:
                    await self._kept.begin_reads(conn)
                except BaseException:
                    await self._kept.give_back(conn, clean=False)
                    raise
                self._conn = conn
        return self._conn

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            clean = False
            try:
                await self._kept.end(conn, commit=False)
                clean = True
            except Exception:
                # Read only: the reads are done and nothing was written, so the answer
                # stands; the connection that could not end its transaction was dropped.
                logger.warning("a read transaction could not be ended", exc_info=True)
            finally:
                await self._kept.give_back(conn, clean=clean)


class Database:
    """The process's engines: `write()` for a transaction, `read()` for reads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.is_sqlite = settings.is_sqlite
        self.backend = "sqlite" if self.is_sqlite else "postgresql"
        self._sqlite_writer: SQLiteWriter | None = None
        self._postgres: KeptPostgresConnections | None = None
        self._kept: KeptConnections
        self.statement_listeners: list[StatementListener] = []
        self.error_listeners: list[ErrorListener] = []
        self.full_disk = FullDisk(_where(settings))
        self.in_flight = InFlight()
        # Content sealed at rest (store/encryption.py), when a master key is set.
        self.encryption = Encryption.from_settings(settings) if settings.encryption_on else None
        # SQLite: messages stored compressed (store/compression.py); never with encryption.
        self.compression: Compression | None = None
        if self.is_sqlite:
            self.compression = Compression(
                settings.sqlite_path,
                enabled=settings.sqlite_compression and self.encryption is None,
            )
            self.writer = _sqlite_engine(settings, writer=True, compression=self.compression)
            self.reader = _sqlite_engine(settings, writer=False, compression=self.compression)
            self._kept = KeptConnections(self.reader)
            self._sqlite_writer = SQLiteWriter(
                self.writer,
                busy_timeout_ms=settings.sqlite_busy_timeout_ms,
                in_flight=self.in_flight,
            )
        else:
            self.writer = self.reader = _postgres_engine(settings)
            self._kept = self._postgres = KeptPostgresConnections(
                self.writer,
                ping_after=settings.pool_ping_idle_seconds,
                listeners=self.error_listeners,
            )
            self.on_error(self._postgres.saw_error)
        for engine in self.engines().values():
            event.listen(engine.sync_engine, "before_cursor_execute", self._saw_statement)
            event.listen(engine.sync_engine, "handle_error", self._saw_error)

    def engines(self) -> dict[str, AsyncEngine]:
        """The pools by name: SQLite has a writer and a reader, PostgreSQL one pool."""
        if self.writer is self.reader:
            return {"shared": self.writer}
        return {"writer": self.writer, "reader": self.reader}

    def on_statement(self, listener: StatementListener) -> Callable[[], None]:
        """Call `listener(sql, parameters)` before every statement; returns its remover."""
        self.statement_listeners.append(listener)
        return lambda: self.statement_listeners.remove(listener)

    def on_error(self, listener: ErrorListener) -> None:
        """Call `listener(error, is_disconnect)` for every error the driver raises."""
        self.error_listeners.append(listener)

    def _saw_statement(self, _conn: Any, _cursor: Any, sql: str, params: Any, *_: Any) -> None:
        for listener in self.statement_listeners:
            listener(sql, params)

    def _saw_error(self, context: ExceptionContext) -> None:
        error = context.sqlalchemy_exception or context.original_exception
        for listener in self.error_listeners:
            listener(error, context.is_disconnect)

    def write(
        self, *, on_commit: Callable[[], None] | None = None
    ) -> AbstractAsyncContextManager[AsyncConnection]:
        """A transaction: committed when the block ends, rolled back if it raises. Returns
        once it is committed; `on_commit` is called then, in the order transactions commit
        (on SQLite several commit together: see SQLiteWriter)."""
        if self._sqlite_writer is not None:
            # The writer's own block, not one wrapped around it: every write enters it.
            return self._sqlite_writer.transaction(on_commit)
        return self._postgres_write(on_commit)

    @asynccontextmanager
    async def _postgres_write(
        self, on_commit: Callable[[], None] | None
    ) -> AsyncIterator[AsyncConnection]:
        kept = self._postgres
        assert kept is not None  # PostgreSQL's: set with the engine
        conn = await kept.take()
        clean = False
        try:
            await kept.begin_writes(conn)
            try:
                yield conn
            except BaseException:
                # The block's error is the one to raise. Rolled back, the connection is
                # kept (a refused write is common); if not, it goes back to the pool.
                with contextlib.suppress(Exception):
                    await kept.end(conn, commit=False)
                    clean = True
                raise
            await kept.end(conn, commit=True)
            clean = True
        finally:
            await kept.give_back(conn, clean=clean)
        if on_commit is not None:
            _committed([on_commit])

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads that need no snapshot across statements (a query's reads
        share a ReadTransaction). On PostgreSQL each statement commits by itself: under READ
        COMMITTED a transaction around them would see no more, and cost a BEGIN and a
        ROLLBACK, two round trips, every time."""
        async with self._kept.lend() as conn:
            yield conn

    @asynccontextmanager
    async def read_transaction(self) -> AsyncIterator[ReadTransaction]:
        """One read transaction for a query's reads, ended when the block ends."""
        transaction = ReadTransaction(self._kept)
        try:
            yield transaction
        finally:
            await transaction.close()

    async def ping(self) -> bool:
        try:
            async with self.read() as conn:
                await conn.execute(text("SELECT 1"))
            return True
        except Exception:
            return False

    def pool_stats(self) -> dict[str, tuple[int, int]]:
        """(connections in use, connections kept) by pool name."""
        stats = {}
        for name, engine in self.engines().items():
            pool = engine.pool
            if isinstance(pool, QueuePool):
                # SQLite's writer keeps its one connection checked out between writes.
                writer = self._sqlite_writer
                in_use = pool.checkedout()
                if name == "writer" and writer:
                    in_use = writer.in_use
                elif engine is self._kept.engine:
                    in_use -= self._kept.idle  # checked out, but waiting for the next use
                stats[name] = (in_use, pool.size())
        return stats

    def outside_changes(self) -> tuple[int, int] | None:
        """SQLite: a stamp that moves when another process commits to the file (see
        SQLiteWriter.outside_changes); None on PostgreSQL, where no such stamp is cheap."""
        writer = self._sqlite_writer
        return None if writer is None else writer.outside_changes()

    async def watch_outside(self) -> tuple[int, int] | None:
        """SQLite: `outside_changes()`, the writer's connection opened for it if need be."""
        writer = self._sqlite_writer
        return None if writer is None else await writer.watch_outside()

    def group_commits(self) -> tuple[int, int] | None:
        """SQLite: (writes committed, COMMITs that made them durable); None on PostgreSQL."""
        writer = self._sqlite_writer
        return None if writer is None else (writer.writes, writer.commits)

    async def dispose(self) -> None:
        if self._sqlite_writer is not None:
            await self._sqlite_writer.close()
        await self._kept.close()
        await self.writer.dispose()
        if self.reader is not self.writer:
            await self.reader.dispose()
        if self.encryption is not None:
            await self.encryption.close()
