"""CPU instructions per in-process append (figure 6's append), counted by callgrind.

    python -m bench.append_instructions                 # this tree
    python -m bench.append_instructions --tree ../old   # another checkout, same harness

Figure 6 appends one message at a time through the storage layer, in process (no HTTP).
This counts one such append: 200 appends warm the process up, then a loop of `--appends`
more runs to its end without the event loop (SQLite's statements run inline, so an append
never waits), inside one call that callgrind is told to count alone
(`--toggle-collect=functools_reduce`): the start-up, the migrations and whatever timers
the event loop would run between appends are left out, so two runs of one tree agree
within a fraction of a percent. The search index's batches are off (they run between
appends, on the event loop); a tree from before the layered package (14090d4) indexes in
a trigger, which is dropped, as that tree's own reference run does. Files on tmpfs where
there is one: fsync is not what this counts. Needs valgrind (apt-get install valgrind).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .instructions import callgrind_total

# Run with the tree's own packages first on the path; argv: appends, scratch directory.
_LOOP = """
import asyncio, functools, sys
from pathlib import Path
sys.path.insert(0, ".")
from bench.inprocess import storage
from bench.peers.run_peers import make_messages

count, workdir = int(sys.argv[1]), Path(sys.argv[2])
messages = make_messages(count + 200)


def to_end(coroutine):
    while True:
        try:
            coroutine.send(None)
        except StopIteration:
            return
        raise RuntimeError("an append waited on the event loop: the count would include it")


async def main():
    async with storage(workdir) as ctx:
        try:  # this tree's storage API
            import graph.store.unit_of_work  # noqa: F401
        except ImportError:  # a tree from before the layered package
            from sqlalchemy import text
            async with ctx.services.db.write() as conn:
                await conn.execute(text("DROP TRIGGER message_fts_insert"))
            async with ctx.write() as repo:
                created = await repo.conversations.create(
                    title="count", agent_slug="", metadata=None, context="chat",
                    expires_at=None, idempotency_key=None,
                )

            async def append(message):
                async with ctx.write() as repo:
                    await repo.messages.append(
                        conversation_id=created.id, messages=[message], expected_version=None
                    )
        else:
            from datetime import UTC, datetime
            from graph.domain.conversations import new_conversation
            from graph.domain.messages import prepare_messages
            ctx.services.search_index.enabled = False
            settings = ctx.services.settings
            async with ctx.write() as repo:
                created = await repo.conversations.create(
                    new_conversation(now=datetime.now(UTC), title="count")
                )

            async def append(message):
                prepared = prepare_messages(
                    [message],
                    max_count=settings.max_messages_per_call,
                    max_bytes=settings.max_message_bytes,
                )
                async with ctx.write() as repo:
                    await repo.transcripts.append(created.id, prepared, expected_version=None)

        for message in messages[:200]:
            await append(message)

        async def counted():
            for message in messages[200:]:
                await append(message)

        functools.reduce(lambda _, coroutine: to_end(coroutine), [counted()], None)


asyncio.run(main())
"""


def per_append(tree: Path, *, appends: int) -> float:
    """Instructions of one in-process append of `tree`'s storage layer."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=base) as scratch:
        out = Path(scratch) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                "--toggle-collect=functools_reduce",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-c",
                _LOOP,
                str(appends),
                str(Path(scratch) / "db"),
            ],
            cwd=tree,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return callgrind_total(out) / appends


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--appends", type=int, default=300)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        print("valgrind is needed: apt-get install valgrind", file=sys.stderr)
        return 2
    value = per_append(args.tree.resolve(), appends=args.appends)
    print(f"{args.tree}: {value:,.0f} instructions per in-process append")
    return 0


if __name__ == "__main__":
    sys.exit(main())
