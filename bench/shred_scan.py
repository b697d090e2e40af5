"""The sweep's scan for orphaned data keys on SQLite: how long the rest of the server waits.

    python -m bench.shred_scan [--conversations 100000] [--orphans 1000] [--batch 500]

With encryption on, every sweep ends with `shred_orphans`: it reads the key store's
conversation keys older than an hour, `BATCH` at a time, and destroys those whose
conversation is gone. The real app, in this process, holds CONVERSATIONS conversations
(filled with SQL, each with its key in the key store, made two hours ago) and ORPHANS keys
whose conversation is gone; `shred_orphans` then runs while a client appends and a ticker
ticks beside it (bench/stall.py). `--batch` sets the keys per step.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.bulk import load_sqlite
from bench.figures_plans import CONVERSATION_COLUMNS
from bench.inprocess import App, app_client
from bench.stall import Stall, during, report_runs
from graph.domain.principal import OwnerType
from graph.store import encryption_admin
from graph.store.encryption import conversation_ref
from graph.store.key_store import SQLiteKeyStore

AGE = 7200.0  # seconds: past encryption_admin.ORPHAN_AGE_SECONDS


def conversations(count: int) -> Iterator[tuple[Any, ...]]:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for c in range(count):
        yield (
            str(uuid.uuid4()), "site", "1", OwnerType.USER.value, "bench", f"c{c}", "", "chat",
            "{}", 1, 0, 0, "", at, at,
        )  # fmt: skip


def fill(app: App, count: int, orphans: int) -> None:
    """`count` conversations with their keys, and `orphans` keys without a conversation."""
    settings = app.services.settings
    assert settings.sqlite_path is not None
    rows = list(conversations(count))
    load_sqlite(
        settings.sqlite_path, [{"conversation": rows}], {"conversation": CONVERSATION_COLUMNS}
    )
    encryption = app.services.db.encryption
    assert encryption is not None and isinstance(encryption.store, SQLiteKeyStore)
    made = time.time() - AGE
    ids = [row[0] for row in rows] + [str(uuid.uuid4()) for _ in range(orphans)]
    keys = [(conversation_ref(i), encryption.current.id, "bench", made) for i in ids]
    store = sqlite3.connect(encryption.store.path)
    try:
        store.executemany("INSERT INTO data_key VALUES (?, ?, ?, ?)", keys)
        store.commit()
    finally:
        store.close()


async def measure(count: int, orphans: int, batch: int) -> Stall[int]:
    key = base64.b64encode(os.urandom(32)).decode()
    with tempfile.TemporaryDirectory() as workdir:
        async with app_client(Path(workdir), encryption_key=key) as app:
            fill(app, count, orphans)
            return await during(app, encryption_admin.shred_orphans(app.services.db, batch=batch))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100_000)
    parser.add_argument("--orphans", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=encryption_admin.BATCH)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    def run() -> tuple[Stall[int], str]:
        stall = asyncio.run(measure(args.conversations, args.orphans, args.batch))
        return stall, f"shredded {stall.result:,} orphaned keys"

    report_runs(args.runs, run)


if __name__ == "__main__":
    main()
