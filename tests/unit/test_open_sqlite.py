"""Opening a SQLite connection retries what SQLite refuses at once with "locked".

SQLite documents moments (another process's last close, a WAL recovery) when a connection
that opens the file is refused at once whatever its busy timeout; a server then failed its
start in CI. Here the refusal is made on demand: statements run with busy_timeout=0 while
another connection holds the write lock.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from graph.store.db import open_sqlite

REFUSED_AT_ONCE = ["PRAGMA busy_timeout=0", "BEGIN IMMEDIATE", "ROLLBACK"]


def holder(path: Path, seconds: float) -> threading.Thread:
    taken = threading.Event()

    def hold() -> None:
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        taken.set()
        time.sleep(seconds)
        connection.execute("ROLLBACK")
        connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(5)
    return thread


@pytest.fixture
def path(tmp_path: Path) -> Path:
    file = tmp_path / "lock.db"
    with sqlite3.connect(file) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    return file


def test_a_refusal_that_ends_within_the_timeout_is_retried(path: Path) -> None:
    thread = holder(path, 0.2)
    connection = sqlite3.connect(path, isolation_level=None)
    started = time.monotonic()
    open_sqlite(connection, REFUSED_AT_ONCE, timeout=5)
    assert time.monotonic() - started >= 0.1  # it waited for the holder, then went on
    thread.join()
    connection.close()


def test_a_refusal_that_outlasts_the_timeout_is_raised(path: Path) -> None:
    thread = holder(path, 1.0)
    connection = sqlite3.connect(path, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        open_sqlite(connection, REFUSED_AT_ONCE, timeout=0.1)
    thread.join()
    connection.close()


def test_other_errors_are_not_retried(path: Path) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="syntax"):
        open_sqlite(connection, ["PRAGMA busy_timeout=0", "NOT SQL"], timeout=5)
    assert time.monotonic() - started < 1
    connection.close()
