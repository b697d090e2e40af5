"""How long the retention sweep reads before it deletes anything, at a large backlog.

    python -m bench.sweep_read [--expired 400000] [--database-url postgresql+asyncpg://…]

A migrated database is filled in bulk with SQL (bench/bulk.py) with EXPIRED conversations
past their expiry (roots without messages: what is timed is finding them, not deleting
them). The sweep's read of what to delete (`Conversations.expired`, one window of
retention.WINDOW and the rest of its trees) is timed ROUNDS times, in this process, as the
sweep runs it: on SQLite's inline driver every millisecond of it holds the event loop, and
with it health checks and every other request of the process. Before the window, the sweep
read every expired conversation at once, and grouped them all into trees, before its first
share.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.bulk import load_postgres, load_sqlite, postgres_databases, sqlite_settings
from graph.domain.principal import SYSTEM
from graph.services import build_services
from graph.settings import Settings
from graph.store.migrate import upgrade
from graph.store.retention import WINDOW

ROUNDS = 5
COLUMNS = {
    "conversation": "id, workspace_type, workspace_id, owner_type, owner_digest, agent_slug, "
    "context, metadata, version, message_count, ancestry, created_at, updated_at, expires_at"
}


def batches(expired: int, at: datetime) -> Iterator[dict[str, list[tuple[Any, ...]]]]:
    made = at - timedelta(days=2)
    for start in range(0, expired, 50_000):
        yield {
            "conversation": [
                (
                    str(uuid.uuid4()),
                    "site",
                    "1",
                    "user",
                    "x",
                    "",
                    "chat",
                    "{}",
                    1,
                    0,
                    "",
                    made,
                    made,
                    at,
                )
                for _ in range(min(50_000, expired - start))
            ]
        }


async def measure(settings: Settings, expired: int) -> list[float]:
    expiry = datetime.now(UTC) - timedelta(days=1)
    await upgrade(settings)
    if settings.sqlite_path is not None:
        load_sqlite(settings.sqlite_path, batches(expired, expiry), COLUMNS)
    else:
        await load_postgres(settings, batches(expired, expiry), COLUMNS)
    services = build_services(settings)
    await services.start()
    samples = []
    try:
        for _ in range(ROUNDS):
            started = time.perf_counter()
            async with services.uow.read(SYSTEM) as repo:
                trees = await repo.conversations.expired(datetime.now(UTC), first=WINDOW)
            samples.append(time.perf_counter() - started)
            assert len(trees) == min(WINDOW, expired)
    finally:
        await services.stop()
    return samples


async def run(expired: int, database_url: str | None) -> list[float]:
    if database_url:
        async with postgres_databases(database_url, "bench_sweep_read") as (settings,):
            return await measure(settings, expired)
    with tempfile.TemporaryDirectory() as workdir:
        folder = Path(workdir)
        return await measure(sqlite_settings(folder / "sweep.sqlite", folder), expired)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expired", type=int, default=400_000)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    samples = asyncio.run(run(args.expired, args.database_url))
    print(
        f"{args.expired} expired: the sweep's read of a window of {WINDOW}, "
        f"median {1000 * statistics.median(samples):.1f} ms, "
        f"longest {1000 * max(samples):.1f} ms ({ROUNDS} rounds)"
    )


if __name__ == "__main__":
    main()
