"""Disk (issue 13, item 1): the bytes a SQLite database takes per byte of message JSON.

    python -m bench.disk [--conversations 20000] [--messages 26] [--turns] [--database-url URL]

A fresh migrated database is filled through the storage layer, as the mutations fill it
(one unit of work per conversation: its creation and one append of its messages; with
`--turns`, one unit of work per message, as an agent runtime appends a turn), with
varied English-like messages of about 370 bytes of JSON each (words drawn from a fixed
vocabulary, a quarter of them with structured content parts), then the search index's
last batch is written and the WAL checkpointed. The figure is the database's size on disk
over the messages' JSON bytes (what `appendMessages` was given, encoded compactly), with
the size of each table and index (SQLite's dbstat). With `--database-url` for PostgreSQL,
the database's size (pg_database_size) and each relation's, over the same bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text

from graph.domain.conversations import new_conversation
from graph.domain.messages import prepare_messages
from graph.settings import Settings

from .bulk import postgres_databases
from .inprocess import storage

TARGET = 1.5
SEED = 13


def vocabulary(size: int = 8000) -> tuple[list[str], list[float]]:
    """Made-up words of 2-11 letters, weighted as natural text's are (Zipf)."""
    rng = random.Random(SEED)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights_of_letters = [26 - i for i in range(26)]
    words = sorted(
        {
            "".join(rng.choices(letters, weights_of_letters, k=rng.randint(2, 11)))
            for _ in range(size * 2)
        }
    )[:size]
    rng.shuffle(words)
    return words, [1 / (rank + 1) for rank in range(len(words))]


def messages(count: int, rng: random.Random, words: list[str], weights: list[float]) -> list[Any]:
    out: list[Any] = []
    for i in range(count):
        prose = " ".join(rng.choices(words, weights, k=rng.randint(40, 60)))
        role = "user" if i % 2 == 0 else "assistant"
        if rng.random() < 0.25:
            half = len(prose) // 2
            content: Any = [
                {"type": "text", "text": prose[:half]},
                {"type": "text", "text": prose[half:]},
            ]
        else:
            content = prose
        out.append({"role": role, "content": content})
    return out


def conversations(total: int, each: int) -> Iterator[list[Any]]:
    rng = random.Random(SEED)
    words, weights = vocabulary()
    for _ in range(total):
        yield messages(each, rng, words, weights)


async def fill(
    workdir: Path, settings: Settings | None, total: int, each: int, *, turns: bool = False
) -> dict[str, Any]:
    """Fill a fresh database and measure it: the messages' JSON bytes, the database's bytes
    on disk and each table's and index's. With `turns`, each message is appended alone."""
    json_bytes = 0
    started = time.perf_counter()
    async with storage(workdir, settings) as ctx:
        limits = ctx.services.settings
        for batch in conversations(total, each):
            prepared = prepare_messages(
                batch, max_count=limits.max_messages_per_call, max_bytes=limits.max_message_bytes
            )
            json_bytes += sum(len(m.encoded) for m in prepared)
            async with ctx.write() as repo:
                created = await repo.conversations.create(
                    new_conversation(now=datetime.now(UTC), title="disk")
                )
                if not turns:
                    await repo.transcripts.append(created.id, prepared, expected_version=None)
            if turns:
                for message in prepared:
                    async with ctx.write() as repo:
                        await repo.transcripts.append(created.id, [message], expected_version=None)
            # The loop's turn, as a server's between requests: the statements of SQLite run
            # on the loop without waiting, and background work (the compression
            # dictionary's training) would otherwise never run during the fill.
            await asyncio.sleep(0)
        await ctx.services.search_index.ready()
        filled = time.perf_counter() - started
        db = ctx.services.db
        if db.is_sqlite:
            async with db.write() as conn:
                # As a long-running server's index ends up: its segments merged.
                await conn.execute(text("INSERT INTO message_fts(message_fts) VALUES ('optimize')"))
            async with db.read() as conn:
                await conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
                found = await conn.execute(
                    text("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")
                )
                parts = {str(name): int(size) for name, size in found}
                free = await conn.execute(text("PRAGMA freelist_count"))
                page = await conn.execute(text("PRAGMA page_size"))
                parts["(free pages)"] = int(free.scalar_one()) * int(page.scalar_one())
            path = Path(ctx.services.settings.database_url.split("///", 1)[1])
            on_disk = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        else:
            async with db.read() as conn:
                await conn.execute(text("VACUUM ANALYZE"))
                found = await conn.execute(
                    text(
                        "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
                        "JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = current_schema() AND c.relkind = 'r' "
                        "ORDER BY 2 DESC"
                    )
                )
                parts = {str(name): int(size) for name, size in found}
                size = await conn.execute(text("SELECT pg_database_size(current_database())"))
                on_disk = int(size.scalar_one())
    return {"json": json_bytes, "disk": on_disk, "parts": parts, "fill_s": filled}


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    if args.database_url is None:
        return await fill(workdir, None, args.conversations, args.messages, turns=args.turns)
    async with postgres_databases(args.database_url, "cg_disk") as (settings,):
        return await fill(workdir, settings, args.conversations, args.messages, turns=args.turns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--conversations", type=int, default=20_000)
    parser.add_argument("--messages", type=int, default=26, help="per conversation")
    parser.add_argument("--turns", action="store_true", help="one append per message")
    parser.add_argument("--database-url", help="a PostgreSQL database to work beside")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-disk-"))
    try:
        found = asyncio.run(run(args, workdir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    count = args.conversations * args.messages
    mb = 1024 * 1024
    ratio = found["disk"] / found["json"]
    verdict = "met" if ratio <= TARGET else "NOT met"
    how = "one append per message" if args.turns else "one append per conversation"
    print(
        f"{count:,} messages ({how}), {found['json'] / mb:.1f} MB of JSON (filled in "
        f"{found['fill_s']:.0f} s): the database takes {found['disk'] / mb:.1f} MB, "
        f"{ratio:.2f}x (target {TARGET}x: {verdict})"
    )
    for name, size in found["parts"].items():
        if size >= mb / 100:
            print(f"  {name}: {size / mb:.1f} MB")


if __name__ == "__main__":
    main()
