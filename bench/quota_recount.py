"""The quotas' recounts of a workspace's usage: how long the rest of the server waits.

    python -m bench.quota_recount [--conversations 100000] [--database-url postgresql+asyncpg://…]

With quotas on, a process counts every workspace's usage again before its first write
(`UnitOfWork.count_usage`: at start, or at the first write after a start while the database
was away), in one statement under workspace_usage's EXCLUSIVE lock on PostgreSQL; a delete
takes what its tree held off its workspace's usage (it counted the whole workspace again
until 2026-12-06). The real app, in this process,
holds CONVERSATIONS conversations of one workspace (filled with SQL, ten messages counted
on each), with quotas on: the count runs while a client appends and a ticker ticks beside
it (bench/stall.py), then DELETES conversations are deleted one by one, each timed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bench.bulk import load_postgres, load_sqlite, postgres_databases
from bench.figures_plans import CONVERSATION_COLUMNS
from bench.inprocess import App, app_client
from bench.shred_scan import conversations
from bench.stall import during

DELETES = 20
DELETE = """mutation($id: ID!) { deleteConversation(input: {id: $id}) {
  userErrors { code } } }"""
CREATE = 'mutation { createConversation(input: {title: "doomed"}) { conversation { id } } }'


def rows(count: int) -> list[tuple[Any, ...]]:
    """`count` conversations of the bench's workspace, each counted as ten messages."""
    return [(*row[:10], 10, *row[11:]) for row in conversations(count)]


@asynccontextmanager
async def app_on(database_url: str | None) -> AsyncIterator[App]:
    quotas = {"workspace_max_messages": 10**9}
    if database_url is None:
        with tempfile.TemporaryDirectory() as workdir:
            async with app_client(Path(workdir), **quotas) as app:
                yield app
        return
    async with postgres_databases(database_url, "quota_bench") as (settings,):
        with tempfile.TemporaryDirectory() as workdir:
            url = settings.database_url
            async with app_client(Path(workdir), database_url=url, **quotas) as app:
                yield app


async def fill(app: App, count: int) -> None:
    settings = app.services.settings
    batch = [{"conversation": rows(count)}]
    columns = {"conversation": CONVERSATION_COLUMNS}
    if settings.sqlite_path is not None:
        load_sqlite(settings.sqlite_path, batch, columns)
    else:
        await load_postgres(settings, batch, columns)


async def measure(count: int, database_url: str | None) -> None:
    async with app_on(database_url) as app:
        await fill(app, count)
        stall = await during(app, app.services.uow.count_usage())
        print(f"count_usage of {stall.result} workspace(s): {stall.line()}")
        took = []
        for _ in range(DELETES):
            doomed = (await app.gql(CREATE))["createConversation"]["conversation"]["id"]
            started = time.perf_counter()
            await app.gql(DELETE, {"id": doomed})
            took.append(time.perf_counter() - started)
        print(
            f"deleteConversation in a workspace of {count:,}: p50 "
            f"{statistics.median(took) * 1000:.1f} ms, longest {max(took) * 1000:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    asyncio.run(measure(args.conversations, args.database_url))


if __name__ == "__main__":
    main()
