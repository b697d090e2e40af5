"""SQLite statements moved off the event loop (sqlite_inline's `off_loop`): a statement
whose work grows with what is stored (a delete cascading to every message of a
conversation) held every other request of the process for all of it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from graph.store.sqlite_inline import InlineConnection, connect


def slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@pytest.fixture
async def connection(tmp_path: Path) -> AsyncIterator[InlineConnection]:
    opened = connect(str(tmp_path / "db.sqlite"))
    await opened.create_function("thread", 0, threading.get_ident)
    await opened.create_function("slow", 1, slow)
    try:
        yield opened
    finally:
        await opened.close()


async def thread_of(connection: InlineConnection) -> int:
    cursor = await connection.execute("SELECT thread()")
    (row,) = await cursor.fetchall()
    await cursor.close()
    return int(row[0])


async def test_a_statement_runs_off_the_loop_only_when_asked(
    connection: InlineConnection,
) -> None:
    here = threading.get_ident()
    assert await thread_of(connection) == here
    with connection.off_loop():
        assert await thread_of(connection) != here
    assert await thread_of(connection) == here


async def test_the_event_loop_goes_on_while_a_statement_runs_off_it(
    connection: InlineConnection,
) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        with connection.off_loop():
            await (await connection.execute("SELECT slow(0.2)")).close()
        during = ticks
        await (await connection.execute("SELECT slow(0.2)")).close()  # inline: no tick
        assert during > 0 and ticks == during
    finally:
        ticker.cancel()


async def test_the_commit_after_a_statement_off_the_loop_goes_there_too(
    connection: InlineConnection,
) -> None:
    await (await connection.execute("CREATE TABLE t (x)")).close()
    await (await connection.execute("BEGIN IMMEDIATE")).close()
    with connection.off_loop():
        await (await connection.execute("INSERT INTO t VALUES (1)")).close()
    committing = asyncio.ensure_future(connection.commit())
    await asyncio.sleep(0)
    assert connection.busy  # the commit holds the connection in its thread
    await committing
    assert not connection.busy and not connection.in_transaction
    # The next transaction, with nothing off the loop, commits on the loop again.
    await (await connection.execute("BEGIN IMMEDIATE")).close()
    await (await connection.execute("INSERT INTO t VALUES (2)")).close()
    committing = asyncio.ensure_future(connection.commit())
    await asyncio.sleep(0)
    assert committing.done()


async def test_a_cancelled_statement_off_the_loop_holds_the_connection_until_it_ends(
    connection: InlineConnection,
) -> None:
    async def statement() -> None:
        with connection.off_loop():
            await (await connection.execute("SELECT slow(0.3)")).close()

    started = time.monotonic()
    running = asyncio.create_task(statement())
    await asyncio.sleep(0.05)
    assert connection.busy
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    # Not before SQLite's work in the thread ended: nothing used the connection meanwhile.
    assert time.monotonic() - started >= 0.25
    await asyncio.sleep(0)
    assert not connection.busy
    assert await thread_of(connection) == threading.get_ident()
