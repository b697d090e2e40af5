"""Deleting a big conversation on SQLite: how long the rest of the process waits for it.

    python -m bench.big_delete [--messages 100000] [--rounds 3]

The real app, in this process, holds one conversation of MESSAGES messages (written through
the repository, 100 per append) on a fresh database. A ticker sleeps TICK seconds at a time
while `deleteConversation` removes it over GraphQL: the bench reports how long the delete
took and the longest the event loop was late meanwhile (health checks, reads and every
other request of the process wait that long). Each round runs twice, the delete's cascade
off the event loop (as the server does) and, for comparison, on it (as it did before:
`InlineConnection.off_loop` made a no-op); medians of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.inprocess import app_client
from graph.domain.conversations import new_conversation
from graph.domain.messages import prepare_messages
from graph.store.sqlite_inline import InlineConnection

TICK = 0.005
PER_APPEND = 100
DELETE = """mutation($id: ID!) { deleteConversation(input: {id: $id}) {
  deleted userErrors { code } } }"""


@contextlib.contextmanager
def on_the_loop() -> Iterator[None]:
    """Statements the server would move off the event loop stay on it (as before)."""
    moved = InlineConnection.off_loop
    InlineConnection.off_loop = lambda self: contextlib.nullcontext()  # type: ignore[method-assign,assignment,return-value]
    try:
        yield
    finally:
        InlineConnection.off_loop = moved  # type: ignore[method-assign]


async def measure(messages: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as workdir:
        async with app_client(Path(workdir)) as app:
            turns = [
                {"role": "user", "content": f"turn {n} of a long task, with a few words"}
                for n in range(PER_APPEND)
            ]
            prepared = prepare_messages(turns, max_count=PER_APPEND, max_bytes=1 << 20)
            async with app.services.uow.write(app.principal) as repo:
                made = await repo.conversations.create(
                    new_conversation(now=datetime.now(UTC)), announce=False
                )
                for _ in range(messages // PER_APPEND):
                    await repo.transcripts.append(made.id, prepared, expected_version=None)
            await app.services.search_index.ready()

            done = asyncio.Event()
            late: list[float] = []

            async def tick() -> None:
                while not done.is_set():
                    started = time.perf_counter()
                    await asyncio.sleep(TICK)
                    late.append(time.perf_counter() - started - TICK)

            ticker = asyncio.create_task(tick())
            await asyncio.sleep(0.1)
            started = time.perf_counter()
            answer = await app.gql(DELETE, {"id": made.id})
            took = time.perf_counter() - started
            await asyncio.sleep(0.1)
            done.set()
            await ticker
            assert answer["deleteConversation"]["deleted"], answer
    return {"delete_ms": took * 1000, "late_ms": max(late) * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {"off the loop": [], "on the loop": []}
    for _ in range(args.rounds):
        results["off the loop"].append(asyncio.run(measure(args.messages)))
        with on_the_loop():
            results["on the loop"].append(asyncio.run(measure(args.messages)))
    for name, runs in results.items():
        med: dict[str, Any] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(
            f"{name}: delete of {args.messages:,} messages {med['delete_ms']:.0f} ms, "
            f"event loop late by at most {med['late_ms']:.0f} ms (medians of {args.rounds})"
        )


if __name__ == "__main__":
    main()
