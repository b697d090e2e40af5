"""A retention sweep of a backlog: how long the rest of the server waits for it.

    python -m bench.sweep_backlog [--expired 20000] [--live 0] [--batch 100] [--quotas]
                                  [--database-url postgresql+asyncpg://…]

A server that was down, or whose sweep was off, finds many conversations expired at once.
The real app, in this process, holds EXPIRED of them (root conversations of MESSAGES
messages each, plus one tree of a root and CHILDREN child transcripts, made through the
repository), and one live conversation. While `sweep` removes the backlog, a client appends
one message to the live conversation every GAP seconds and a ticker sleeps TICK seconds at
a time (bench/stall.py): the bench reports the sweep's time, the longest an append took
(median of the appends too), and the longest the event loop was late (health checks, reads
and every other request of the process wait that long). `--batch` sets the sweep's share per
transaction (`--batch 0`: the whole backlog in one, as before batching). `--quotas` turns
the workspace quotas on (a quota no write reaches): each share then takes what it deleted
off the workspace's usage, which `--live` conversations make large.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.inprocess import app_client
from bench.stall import during
from graph.domain.conversations import new_conversation
from graph.domain.messages import prepare_messages
from graph.store.retention import BATCH, sweep

CHILDREN = 50
MESSAGES = 10
DELEGATE = """mutation($id: ID!) { createDelegation(input: {parentConversationId: $id,
  delegatingTier: "lead", targetTier: "worker", task: "t"}) { userErrors { code } } }"""


async def measure(
    expired: int, database_url: str | None, batch: int, live: int = 0, quotas: bool = False
) -> dict[str, Any]:
    changes: dict[str, Any] = {"database_url": database_url} if database_url else {}
    if quotas:
        changes["workspace_max_messages"] = 10**12
    with tempfile.TemporaryDirectory() as workdir:
        async with app_client(Path(workdir), **changes) as app:
            now = datetime.now(UTC)
            later = now + timedelta(hours=1)
            turns = [
                {"role": "user", "content": f"turn {n} of an old task"} for n in range(MESSAGES)
            ]
            prepared = prepare_messages(turns, max_count=MESSAGES, max_bytes=1 << 20)
            async with app.services.uow.write(app.principal) as repo:
                for _ in range(live):  # kept: the workspace's usage is counted over them
                    made = new_conversation(now=now)
                    created = await repo.conversations.create(made, announce=False)
                    await repo.transcripts.append(created.id, prepared, expected_version=None)
                for _ in range(expired):
                    made = new_conversation(now=now, expires_at=later)
                    created = await repo.conversations.create(made, announce=False)
                    await repo.transcripts.append(created.id, prepared, expected_version=None)
                made = new_conversation(now=now, expires_at=later)
                tree = await repo.conversations.create(made, announce=False)
            for _ in range(CHILDREN):
                await app.gql(DELEGATE, {"id": tree.id})
            # The search index takes in what the fill wrote in batches of its own: done first,
            # so that what is timed is the sweep's alone.
            await app.services.search_index.ready()
            stall = await during(
                app, sweep(app.services.uow, now=later + timedelta(seconds=1), batch=batch or 10**9)
            )
    return {
        "removed": stall.result,
        "sweep_s": stall.job_s,
        "append_p50_ms": stall.append_p50_ms,
        "append_max_ms": stall.append_max_ms,
        "loop_late_max_ms": stall.loop_late_max_ms,
        "appends": stall.appends,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expired", type=int, default=20_000)
    parser.add_argument("--database-url")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--live", type=int, default=0, help="conversations that stay")
    parser.add_argument("--quotas", action="store_true", help="workspace quotas on")
    args = parser.parse_args()
    result = asyncio.run(
        measure(args.expired, args.database_url, args.batch, args.live, args.quotas)
    )
    print(
        f"removed {result['removed']} in {result['sweep_s']:.2f} s; "
        f"appends during it: {result['appends']}, p50 {result['append_p50_ms']:.1f} ms, "
        f"longest {result['append_max_ms']:.1f} ms; "
        f"event loop late by at most {result['loop_late_max_ms']:.1f} ms"
    )


if __name__ == "__main__":
    main()
