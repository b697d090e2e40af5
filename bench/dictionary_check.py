"""The compression dictionary's training on a big database: how long the server waits.

    python -m bench.dictionary_check [--runs 3] [--workdir DIR]

SQLite with compression trains a dictionary from the newest messages once the database holds
enough (store/dictionary_training.py), and again when the messages drift from it. The real
app, in this process, holds bench/million.py's 1,000,000 messages (compressed with its
dictionary, indexed); a training (`check(again=True)`: the samples read, a dictionary
learnt in a worker thread, stored) then runs while a client appends and a ticker ticks
beside it (bench/stall.py). The filled file is made once in `--workdir` and copied for each
run.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path

from bench.bulk import filled_once
from bench.inprocess import app_client
from bench.million import fill_sqlite
from bench.stall import Stall, during, report_runs

FILLED = "dictionary_check.sqlite"


async def measure(template: Path) -> Stall[bool]:
    with tempfile.TemporaryDirectory(dir=template.parent) as workdir:
        shutil.copy(template, Path(workdir) / "db.sqlite")
        async with app_client(Path(workdir)) as app:
            return await during(app, app.services.training.check(again=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp())
    template = asyncio.run(filled_once(workdir, FILLED, fill_sqlite))

    def run() -> tuple[Stall[bool], str]:
        stall = asyncio.run(measure(template))
        return stall, f"trained (compressing: {stall.result})"

    report_runs(args.runs, run)


if __name__ == "__main__":
    main()
