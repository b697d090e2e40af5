"""A background loop ends when it is cancelled, wherever the cancellation lands.

On Python 3.11, `asyncio.wait_for` drops a cancellation that arrives after the awaited
operation has finished but before the waiting task resumes (CPython gh-86296, fixed in 3.12
only): the task goes on as if nothing happened, and whoever awaits its end (a server's
shutdown) waits forever. It happened to the PostgreSQL event listener, cancelled by a
shutdown just as a ping was answered. These tests cancel the loops at every step of their
first rounds and require each to end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from graph.store import events_postgres
from graph.store.events_postgres import PostgresBroker

STEPS = 40  # event-loop passes: several rounds of each loop below


class AnsweringAtOnce:
    """A connection whose ping is answered in the next pass of the event loop: as close as
    the window between an answer and its reader's turn gets."""

    async def fetchval(self, _query: str) -> int:
        return 1


async def ends_when_cancelled_at_every_step(loop: Callable[[], Coroutine[Any, Any, Any]]) -> None:
    """`loop()` makes the coroutine; it is started afresh, and cancelled after 0, 1, 2, …
    passes of the event loop: each time it must end within a second."""
    for steps in range(STEPS):
        task = asyncio.ensure_future(loop())
        for _ in range(steps):
            await asyncio.sleep(0)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=1)
        assert task in done, f"cancelled after {steps} passes, it went on"
        assert task.cancelled(), f"cancelled after {steps} passes, it ended otherwise"


async def test_the_event_listener_s_pings_end_when_cancelled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(events_postgres, "PING_SECONDS", 0)  # a ping every pass

    def pinging() -> Coroutine[Any, Any, bool]:
        return PostgresBroker._until_lost(AnsweringAtOnce(), asyncio.Event())

    await ends_when_cancelled_at_every_step(pinging)
