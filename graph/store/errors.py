"""Which failures are the database's, not the request's: the layers above tell clients
"retry" (unavailable) or STORAGE_FULL (out of space) for these instead of "unexpected
error"."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from collections.abc import Iterator

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from graph.store.db import DatabaseBusy
from graph.store.encryption import MasterKeyRefused

# PostgreSQL's SQLSTATEs of a database that cannot serve now, whose messages do not say
# "connect": sessions refused, its connection slots all taken (53300, "sorry, too many
# clients already": replicas times their pool size past max_connections), a server starting
# up, shutting down or in recovery (57P03), or ending sessions (57P01, 57P02); the database
# or the role not there (yet) or the password refused (3D000, 28000, 28P01): a replica
# started before its database was made waits for it. A statement that gave up waiting is
# `waited_out`.
_UNAVAILABLE_SQLSTATES = frozenset({"53300", "57P01", "57P02", "57P03", "3D000", "28000", "28P01"})


def is_unavailable(exc: BaseException | None) -> bool:
    """Connection loss, refusal, pool exhaustion, or SQLite's write lock held elsewhere too
    long: the database, not the request, is at fault. So is a master key that does not open
    the key store (rotated since the start, or not checked then): it serves again once
    restarted with the right one."""
    if isinstance(
        exc, PoolTimeout | ConnectionError | asyncio.TimeoutError | DatabaseBusy | MasterKeyRefused
    ):
        return True
    if waited_out(exc):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        sqlstate = str(getattr(exc.orig, "sqlstate", None) or "")
        # Class 08: connection exceptions.
        if sqlstate in _UNAVAILABLE_SQLSTATES or sqlstate.startswith("08"):
            return True
        return isinstance(exc.orig, ConnectionError | OSError) or "connect" in str(exc.orig).lower()
    return isinstance(exc, OSError)


def is_from_database(exc: BaseException) -> bool:
    """Whether the database (its driver) raised it, whatever it said: a table missing from a
    database not migrated yet, a lock or statement timeout. Not a fault of the code."""
    return isinstance(exc, DBAPIError)


# PostgreSQL's query_canceled (past the statement timeout, typically waiting for a lock
# another replica's transaction or a session holds, or cancelled by an operator) and
# lock_not_available (past a lock_timeout the database or role sets). Each rolled back what
# it wrote, as SQLite's write lock held elsewhere too long does.
_WAITED_OUT_SQLSTATES = frozenset({"57014", "55P03"})
_SQLITE_BUSY = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


def waited_out(exc: BaseException | None) -> bool:
    """Whether `exc` (or the driver error it wraps) is a statement that gave up waiting: for a
    lock another session holds (a table locked by hand, the key store's file held by another
    process) or for a database too busy to answer in time. Nothing was written; a retry
    later may succeed (what was INTERNAL, "Unexpected error", for a locked key store)."""
    return any(
        getattr(e, "sqlstate", None) in _WAITED_OUT_SQLSTATES
        or (
            isinstance(e, sqlite3.OperationalError)
            and getattr(e, "sqlite_errorcode", 0) & 0xFF in _SQLITE_BUSY
        )
        for e in _wrapped(exc)
    )


def _wrapped(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc` and the errors it wraps (SQLAlchemy's driver error, a `raise … from`), at most
    five deep."""
    for _ in range(5):
        if exc is None:
            return
        yield exc
        exc = exc.orig if isinstance(exc, DBAPIError) else exc.__cause__


DISK_FULL_SQLSTATE = "53100"


def is_storage_full(exc: BaseException | None) -> bool:
    """Whether `exc` (or the driver error it wraps) says the database has no space left."""
    for e in _wrapped(exc):
        if isinstance(e, sqlite3.Error) and (
            getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL
            or "database or disk is full" in str(e)
        ):
            return True
        if getattr(e, "sqlstate", None) == DISK_FULL_SQLSTATE:
            return True  # asyncpg's DiskFullError, whichever wrapper carries it
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return True
    return False


class Unwritable(Exception):
    """The SQLite database cannot be written, found before it is opened (the message says
    which file or directory: db.sqlite_read_only)."""


class NotMigrated(Exception):
    """The database's schema is behind this release's, found before a command uses it."""


def database_problem(exc: BaseException) -> str | None:
    """One line saying why the database cannot be used, when `exc` is the database's (it
    cannot be reached or opened, refuses the connection, or is not migrated), for a
    command's error message; None for any other failure."""
    if isinstance(exc, Unwritable | NotMigrated):
        return str(exc)
    if isinstance(exc, DBAPIError):
        reason = str(exc.orig if exc.orig is not None else exc)
    elif isinstance(exc, OSError | sqlite3.Error) or type(exc).__module__.startswith("asyncpg"):
        reason = str(exc) or type(exc).__name__
    else:
        return None
    line = reason.strip().splitlines()[0] if reason.strip() else type(exc).__name__
    if "no such table" in line or ("relation" in line and "does not exist" in line):
        line += " (is it migrated? convograph migrate)"
    return line
