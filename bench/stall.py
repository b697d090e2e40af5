"""How long the rest of the server waits while a background job runs in its process.

While `job` runs, a client appends one message to a live conversation every GAP seconds
and a ticker sleeps TICK seconds at a time: `during` reports the job's time, the longest an
append took (and their median), and the longest the event loop was late (health checks,
reads and every other request of the process wait that long). The benches of the jobs the
server runs on its own measure with it: bench/sweep_backlog.py, bench/shred_scan.py,
bench/search_backlog.py, bench/quota_recount.py, bench/dictionary_check.py.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from bench.inprocess import App

GAP = 0.01
TICK = 0.005
SETTLE = 0.2  # seconds of appends and ticks before the job starts, and after it ends
CREATE = 'mutation { createConversation(input: {title: "live"}) { conversation { id } } }'
APPEND = """mutation($id: ID!) { appendMessages(input: {conversationId: $id,
  messages: [{role: "user", content: "a turn during the job"}]}) { userErrors { code } } }"""

T = TypeVar("T")


@dataclass(frozen=True)
class Stall(Generic[T]):
    result: T
    job_s: float
    append_p50_ms: float
    append_max_ms: float
    loop_late_max_ms: float
    appends: int

    def line(self) -> str:
        return (
            f"took {self.job_s:.2f} s; appends during it: {self.appends}, "
            f"p50 {self.append_p50_ms:.1f} ms, longest {self.append_max_ms:.1f} ms; "
            f"event loop late by at most {self.loop_late_max_ms:.1f} ms"
        )


async def keep_timing(
    call: Callable[[], Awaitable[object]], done: asyncio.Event, took: list[float]
) -> None:
    """Run `call` every GAP seconds until `done` is set; how long each took into `took`."""
    while not done.is_set():
        started = time.perf_counter()
        await call()
        took.append(time.perf_counter() - started)
        await asyncio.sleep(GAP)


async def during(app: App, job: Awaitable[T]) -> Stall[T]:
    """Run `job` with appends and a ticker beside it (module docstring)."""
    live = (await app.gql(CREATE))["createConversation"]["conversation"]["id"]
    done = asyncio.Event()
    appends: list[float] = []
    late: list[float] = []

    async def tick() -> None:
        while not done.is_set():
            started = time.perf_counter()
            await asyncio.sleep(TICK)
            late.append(time.perf_counter() - started - TICK)

    appending = keep_timing(lambda: app.gql(APPEND, {"id": live}), done, appends)
    tasks = [asyncio.create_task(appending), asyncio.create_task(tick())]
    await asyncio.sleep(SETTLE)
    started = time.perf_counter()
    result = await job
    took = time.perf_counter() - started
    await asyncio.sleep(SETTLE)
    done.set()
    await asyncio.gather(*tasks)
    return Stall(
        result,
        took,
        statistics.median(appends) * 1000,
        max(appends) * 1000,
        max(late) * 1000,
        len(appends),
    )


def report_runs(runs: int, run: Callable[[], tuple[Stall[Any], str]]) -> None:
    """Run `run` `runs` times, printing what each did (the text it returns) with its stall,
    then the median of the longest lateness."""
    lates = []
    for _ in range(runs):
        stall, did = run()
        lates.append(stall.loop_late_max_ms)
        print(f"{did}: {stall.line()}")
    print(f"median of the longest lateness: {statistics.median(lates):.1f} ms")
