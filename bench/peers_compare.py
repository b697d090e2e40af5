"""Figure 6: convograph's storage layer against the peers, on the peers' own workload.

Workload (bench/peers/run_peers.py): append N messages one call at a time, then read the whole
transcript back, each store on its own fresh SQLite file.  convograph runs in this process
through the unit of work its mutations use (`Context.write()`: BEGIN IMMEDIATE, version bump,
insert, commit with synchronous=FULL, event publish) and reads through the `transcript`
resolver's query, decoding the JSON as the peers do.  Each peer runs in its own venv
(bench/.venv-peers) with the same messages and the same summary (run_peers.Timings), between
runs of convograph.  Pragmas: convograph WAL + synchronous=FULL; each peer keeps its own
defaults (the journal mode each used is recorded).  Beside each convograph run, a reference
run with the search index's batches off shows what indexing costs the appends (no peer
indexes for search; graph/search_index.py indexes the new messages in batches while the
appends wait); it does not enter the figure.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from graph.domain import jsoncodec
from graph.domain.conversations import new_conversation
from graph.domain.messages import prepare_messages

from .inprocess import storage
from .peers.run_peers import PEERS, Timings, make_messages
from .report import Figure, median
from .servers import ROOT

PEERS_PYTHON = ROOT / "bench" / ".venv-peers" / "bin" / "python"
FLAT = 1.2  # last-10% append over first-10% append that still counts as flat


async def _convograph(workdir: Path, n: int, *, search_index: bool = True) -> dict[str, Any]:
    messages = make_messages(n)
    timings = Timings()
    async with storage(workdir) as ctx:
        if not search_index:
            # The reference run: no message is indexed for search
            # (conversations(filter: {search})), which no peer offers.
            ctx.services.search_index.enabled = False
        async with ctx.write() as repo:
            conversation = await repo.conversations.create(
                new_conversation(now=datetime.now(UTC), title="peers")
            )
        cid = conversation.id
        settings = ctx.services.settings

        async def append(message: dict[str, str]) -> None:
            # As appendMessages does: the message checked, then one unit of work.
            prepared = prepare_messages(
                [message],
                max_count=settings.max_messages_per_call,
                max_bytes=settings.max_message_bytes,
            )
            async with ctx.write() as repo:
                await repo.transcripts.append(cid, prepared, expected_version=None)

        for message in messages:
            await timings.append(append(message))
        # The search index's last batch: the batches before it ran while appends waited.
        start = time.perf_counter()
        await ctx.services.search_index.ready()
        timings.deferred = time.perf_counter() - start

        async def read() -> int:
            async with ctx.read() as repo:
                found = await repo.conversations.get(cid)
                assert found is not None
                texts = (await repo.transcripts.texts([(found, 1)]))[(cid, 1)]
            return len(jsoncodec.loads("[" + ",".join(texts) + "]"))

        await timings.read(read, n)
    return timings.summary()


def _peer(name: str, n: int) -> dict[str, Any]:
    script = ROOT / "bench" / "peers" / "run_peers.py"
    done = subprocess.run(
        [str(PEERS_PYTHON), str(script), "--n", str(n), "--only", name],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)[name]


def run(workdir: Path, *, n: int) -> Figure:
    subprocess.run(["bash", str(ROOT / "bench" / "peers" / "setup.sh")], check=True)
    # convograph runs before every peer and after the last one; its figures are the medians
    # of those runs, so a slow spell on the shared machine cannot favour either side.
    # Each convograph run is paired with a reference run without the search index.
    runs = [asyncio.run(_convograph(workdir / "convograph-0", n))]
    unindexed = [asyncio.run(_convograph(workdir / "unindexed-0", n, search_index=False))]
    peers: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(PEERS, start=1):
        peers[name] = _peer(name, n)
        runs.append(asyncio.run(_convograph(workdir / f"convograph-{i}", n)))
        unindexed.append(
            asyncio.run(_convograph(workdir / f"unindexed-{i}", n, search_index=False))
        )
    keys = ("first_ms", "last_ms", "read_ms", "mean_ms")
    ours = {key: median([r[key] for r in runs]) for key in keys}
    bare = {key: median([r[key] for r in unindexed]) for key in keys}
    failed = {name: p["error"] for name, p in peers.items() if "error" in p}
    measured = {name: p for name, p in peers.items() if "error" not in p}

    # How many times slower each peer is than convograph (> 1: convograph is faster).
    margins = {
        name: {
            "append_first": p["first_ms"] / ours["first_ms"],
            "append_last": p["last_ms"] / ours["last_ms"],
            "read": p["read_ms"] / ours["read_ms"],
        }
        for name, p in measured.items()
    }
    worst = min((m for per in margins.values() for m in per.values()), default=0.0)
    growth = ours["last_ms"] / ours["first_ms"]
    stores = {"convograph": ours, **measured}
    sides = "; ".join(
        f"{name} {s['first_ms']:.2f}/{s['last_ms']:.2f} ms append (mean with deferred work "
        f"{s['mean_ms']:.2f}), {s['read_ms']:.2f} ms read"
        for name, s in stores.items()
    )
    failures = f"; failed: {failed}" if failed else ""
    return Figure(
        name="peers",
        value=round(worst, 3),
        target=f"every peer > 1x slower on append and read, convograph growth <= {FLAT}",
        met=worst > 1 and growth <= FLAT and not failed,
        detail=(
            f"smallest peer/convograph time ratio; n={n}, first/last 10% append medians and "
            f"read medians — {sides}; convograph growth {growth:.2f}x; reference: "
            f"convograph without its full-text search index {bare['first_ms']:.2f}/"
            f"{bare['last_ms']:.2f} ms append{failures}"
        ),
        data={
            "n": n,
            "convograph": ours,
            "convograph_runs": runs,
            "convograph_without_search_index": bare,
            "convograph_without_search_index_runs": unindexed,
            "peers": peers,
            "peer_over_convograph": {
                name: {k: round(v, 3) for k, v in per.items()} for name, per in margins.items()
            },
        },
    )
