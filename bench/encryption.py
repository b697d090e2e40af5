"""Encryption at rest's cost: append throughput and a transcript read, with it off and on.

Two apps in this process, each on a fresh SQLite file of its own, one without a master key
and one with: the rounds alternate between them (off, on, off, on, ...) so that whatever
else the machine does falls on both alike, and each figure is the median of its rounds.
A round of appends is `APPENDS` `appendMessages` of one message each to one conversation
(an agent's turn after turn), through the whole app (httpx ASGITransport: HTTP, token,
GraphQL, the store); a round of reads is `READS` reads of a `SIZE`-message transcript (read
again: an agent's every turn, a dashboard's refresh). Then each app is started again on its
files, alternately, once per round, for the first read of that transcript in a new process
(with encryption on, every message decrypted).

    .venv/bin/python -m bench.encryption [--rounds N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import shutil
import tempfile
import time
from pathlib import Path

from .inprocess import App, app_client
from .peers.run_peers import make_messages
from .report import median
from .transcript import APPEND, TRANSCRIPT

APPENDS = 200
READS = 20
SIZE = 1000

CREATE = 'mutation { createConversation(input: {title: "bench"}) { conversation { id } } }'


async def _new(client: App) -> str:
    return str((await client.gql(CREATE))["createConversation"]["conversation"]["id"])


async def appends_per_second(client: App, messages: list[dict[str, str]]) -> float:
    cid = await _new(client)
    start = time.perf_counter()
    for message in messages[:APPENDS]:
        await client.gql(APPEND, {"id": cid, "messages": [message]})
    return APPENDS / (time.perf_counter() - start)


async def read_ms(client: App, cid: str, reads: int = READS) -> float:
    start = time.perf_counter()
    for _ in range(reads):
        await client.gql(TRANSCRIPT, {"id": cid})
    return (time.perf_counter() - start) / reads * 1000


async def run(workdir: Path, rounds: int) -> dict[str, dict[str, float]]:
    messages = make_messages(SIZE)
    keys = {"off": None, "on": base64.b64encode(os.urandom(32)).decode()}
    appends: dict[str, list[float]] = {"off": [], "on": []}
    reads: dict[str, list[float]] = {"off": [], "on": []}
    first_reads: dict[str, list[float]] = {"off": [], "on": []}
    transcripts = {}
    async with (
        app_client(workdir / "off", encryption_key=keys["off"]) as off,
        app_client(workdir / "on", encryption_key=keys["on"]) as on,
    ):
        clients = {"off": off, "on": on}
        for name, client in clients.items():
            cid = await _new(client)
            for start in range(0, SIZE, 100):
                await client.gql(APPEND, {"id": cid, "messages": messages[start : start + 100]})
            transcripts[name] = cid
            await read_ms(client, cid)  # warm: the cached document, the loaded keys
        for i in range(rounds):
            for name in _order(i):
                appends[name].append(await appends_per_second(clients[name], messages))
                reads[name].append(await read_ms(clients[name], transcripts[name]))
    for i in range(rounds):
        for name in _order(i):
            async with app_client(workdir / name, encryption_key=keys[name]) as client:
                first_reads[name].append(await read_ms(client, transcripts[name], reads=1))
    return {
        "appends/s": {k: median(v) for k, v in appends.items()},
        f"transcript read of {SIZE}, read again (ms)": {k: median(v) for k, v in reads.items()},
        f"transcript read of {SIZE}, first in a new process (ms)": {
            k: median(v) for k, v in first_reads.items()
        },
    }


def _order(round_: int) -> list[str]:
    return ["off", "on"] if round_ % 2 == 0 else ["on", "off"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-encryption-"))
    try:
        figures = asyncio.run(run(workdir, args.rounds))
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"median of {args.rounds} alternating rounds; on/off ratio")
    for figure, values in figures.items():
        ratio = values["on"] / values["off"]
        print(f"{figure}: off {values['off']:.2f}, on {values['on']:.2f}, on/off {ratio:.3f}")


if __name__ == "__main__":
    main()
