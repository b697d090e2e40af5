"""SQLite's search index brought up to date after a backlog: how long the server waits.

    python -m bench.search_backlog [--chunk 2000] [--runs 3] [--workdir DIR]

A database filled in bulk (bench/million.py's 100,000 conversations, 1,000,000 messages)
whose messages are not indexed yet: what a server finds after writes it did not index
(another process's, a bulk load, a stop before its batch). The real app, in this process,
then indexes them (`SearchIndex.ready`, what a search's gate awaits) while a client appends
and a ticker ticks beside it (bench/stall.py). `--chunk` sets the messages per transaction
(`--chunk 0`: all in one, as before chunking). The first append starts the indexing in the
background, as a server's first write does, so `ready` may find it done: the lateness and
the appends are the figures, not the job's own time. The filled file is made once in `--workdir`
(if it is not there) and copied for each run; each run prints how many messages the
index then finds for a rare word, a common one and one in every message.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import tempfile
from pathlib import Path

from bench.bulk import filled_once, load_sqlite
from bench.inprocess import app_client
from bench.million import COLUMNS, COMMON, RARE, batches
from bench.stall import Stall, during, report_runs
from graph.store.keyring import Keyring
from graph.store.search_index import CHUNK

FILLED = "search_backlog.sqlite"


def _unindexed(path: Path, keyring: Keyring) -> None:
    """bench/million.py's rows, nothing of them indexed."""
    load_sqlite(path, batches(keyring, sqlite=True), COLUMNS)


async def measure(template: Path, chunk: int) -> tuple[Stall[None], dict[str, int]]:
    """One run on a copy of `template`: the stall, and what the index then finds."""
    with tempfile.TemporaryDirectory(dir=template.parent) as workdir:
        path = Path(workdir) / "db.sqlite"
        shutil.copy(template, path)
        async with app_client(Path(workdir)) as app:
            index = app.services.search_index
            index.chunk = chunk or 10**9
            stall = await during(app, index.ready())
        db = sqlite3.connect(path)
        try:
            found = {
                word: db.execute(
                    "SELECT count(*) FROM message_fts WHERE message_fts MATCH ?", (word,)
                ).fetchone()[0]
                for word in (RARE, COMMON, "turn")
            }
        finally:
            db.close()
    return stall, found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk", type=int, default=CHUNK)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp())
    template = asyncio.run(filled_once(workdir, FILLED, _unindexed))

    def run() -> tuple[Stall[None], str]:
        stall, found = asyncio.run(measure(template, args.chunk))
        return stall, f"indexed {found}"

    report_runs(args.runs, run)


if __name__ == "__main__":
    main()
