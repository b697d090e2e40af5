"""`deleteConversation` of a long transcript: how long the rest of the server waits for it.

    python -m bench.big_delete [--messages 100000] [--runs 3] [--database-url postgresql+asyncpg://…]

The real app, in this process, holds one conversation of MESSAGES messages (written through
the repository, 5,000 per transaction) and a live one. While a client deletes the long one
through the API, another appends a message to the live one every GAP seconds and a ticker
sleeps TICK seconds at a time (bench/stall.py), and a third reads a short conversation
every GAP seconds: the bench reports the delete's time, the longest an append took, the
longest the event loop was late, and the longest a read took (reads need no write lock:
only the event loop keeps them waiting). Each run fills and deletes anew.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.inprocess import app_client
from bench.stall import CREATE, Stall, during, keep_timing, report_runs
from graph.domain.conversations import new_conversation
from graph.domain.messages import prepare_messages

PER_WRITE = 5000
DELETE = "mutation($id: ID!) { deleteConversation(input: {id: $id}) { deleted } }"
READ = "query($id: ID!) { conversation(id: $id) { title messageCount } }"


async def measure(messages: int, database_url: str | None) -> tuple[Stall[dict[str, Any]], float]:
    changes = {"database_url": database_url} if database_url else {}
    with tempfile.TemporaryDirectory() as workdir:
        async with app_client(Path(workdir), **changes) as app:
            async with app.services.uow.write(app.principal) as repo:
                made = await repo.conversations.create(
                    new_conversation(now=datetime.now(UTC)), announce=False
                )
            for start in range(0, messages, PER_WRITE):
                turns = [
                    {"role": "user", "content": f"turn {n} of a long task, with a few words"}
                    for n in range(start, min(messages, start + PER_WRITE))
                ]
                prepared = prepare_messages(turns, max_count=len(turns), max_bytes=1 << 30)
                async with app.services.uow.write(app.principal) as repo:
                    await repo.transcripts.append(made.id, prepared, expected_version=None)
            # The search index takes in what the fill wrote first: what is timed is the
            # delete alone.
            await app.services.search_index.ready()
            short = (await app.gql(CREATE))["createConversation"]["conversation"]["id"]
            reads: list[float] = []
            stop = asyncio.Event()
            reader = keep_timing(lambda: app.gql(READ, {"id": short}), stop, reads)
            reading = asyncio.create_task(reader)
            stall = await during(app, app.gql(DELETE, {"id": made.id}))
            stop.set()
            await reading
    assert stall.result["deleteConversation"]["deleted"], stall.result
    return stall, max(reads) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--database-url")
    args = parser.parse_args()

    def run() -> tuple[Stall[dict[str, Any]], str]:
        stall, read_ms = asyncio.run(measure(args.messages, args.database_url))
        return (
            stall,
            f"deleted {args.messages} messages (reads beside it: {read_ms:.1f} ms at most)",
        )

    report_runs(args.runs, run)


if __name__ == "__main__":
    main()
