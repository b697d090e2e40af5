"""Time the storage layers an agent developer would otherwise use, on the same workload.

Workload, per peer, on its own fresh SQLite file: append N messages one call at a time, then
read the whole transcript back.  Reported in milliseconds: the median append over the first
10% and over the last 10% (growth shows whether an append's cost depends on history length),
and the median of 5 full reads.

Run with the peers' own venv, never the project's:
    bash bench/peers/setup.sh
    bench/.venv-peers/bin/python bench/peers/run_peers.py [--n 1000] [--only NAME]

Prints one JSON object: {"openai_agents_sqlite": {"first_ms", "last_ms", "read_ms", "n", ...}}.
A peer that cannot be imported or fails is reported as {"error": "..."} instead.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import socket
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

READS = 5
FILLER = (
    "The quick brown fox jumps over the lazy dog while the agent considers the next tool call, "
    "weighs the user's request against its instructions, and drafts a careful, grounded reply "
    "for the transcript."
)


def make_messages(n: int) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"message {i} {FILLER}"} for i in range(n)]


class Timings:
    """Per-append durations for one peer, summarised the same way for every peer."""

    def __init__(self) -> None:
        self.appends: list[float] = []
        self.reads: list[float] = []
        # Work an append causes but leaves for later (convograph's search index batch).
        self.deferred = 0.0

    async def append(self, call: Awaitable[object]) -> None:
        start = time.perf_counter()
        await call
        self.appends.append(time.perf_counter() - start)

    async def read(self, call: Callable[[], Awaitable[int]], expected: int) -> None:
        for _ in range(READS):
            start = time.perf_counter()
            got = await call()
            self.reads.append(time.perf_counter() - start)
            # A read that returns a partial transcript would make the figure meaningless.
            if got != expected:
                raise AssertionError(f"read back {got} messages, expected {expected}")

    def summary(self) -> dict[str, float | int]:
        tenth = max(1, len(self.appends) // 10)
        return {
            "first_ms": _ms(statistics.median(self.appends[:tenth])),
            "last_ms": _ms(statistics.median(self.appends[-tenth:])),
            "read_ms": _ms(statistics.median(self.reads)),
            # Every append's time and what it left for later, over the appends.
            "mean_ms": _ms((sum(self.appends) + self.deferred) / len(self.appends)),
            "n": len(self.appends),
        }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


async def openai_agents_sqlite(db: Path, messages: list[dict[str, str]]) -> Timings:
    from agents.memory import SQLiteSession

    session = SQLiteSession("bench-session", db)
    timings = Timings()
    try:
        for msg in messages:
            await timings.append(session.add_items([msg]))

        async def read() -> int:
            return len(await session.get_items())

        await timings.read(read, len(messages))
    finally:
        session.close()
    return timings


async def langgraph_sqlite(db: Path, messages: list[dict[str, str]]) -> Timings:
    # A compiled MessagesState graph rather than raw saver.aput calls: this is what a real
    # LangGraph app runs, so each append pays the per-step checkpoints (input + node) and
    # pending writes that the framework itself decides to store, each holding the whole list.
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.graph import END, START, MessagesState, StateGraph

    def noop(state: MessagesState) -> dict:
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("noop", noop)
    builder.add_edge(START, "noop")
    builder.add_edge("noop", END)
    config = {"configurable": {"thread_id": "bench-thread"}}
    timings = Timings()
    async with AsyncSqliteSaver.from_conn_string(str(db)) as saver:
        graph = builder.compile(checkpointer=saver)
        for msg in messages:
            await timings.append(graph.ainvoke({"messages": [msg]}, config))

        async def read() -> int:
            return len((await graph.aget_state(config)).values["messages"])

        await timings.read(read, len(messages))
    return timings


async def google_adk_database(db: Path, messages: list[dict[str, str]]) -> Timings:
    from google.adk.events import Event
    from google.adk.sessions import DatabaseSessionService
    from google.genai import types

    service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{db}")
    ids = {"app_name": "bench", "user_id": "bench-user"}
    timings = Timings()
    try:
        session = await service.create_session(**ids, session_id="bench-session")
        for msg in messages:
            # ADK's content roles are "user" and "model"; the author is the agent's name.
            role = "user" if msg["role"] == "user" else "model"
            event = Event(
                author="user" if role == "user" else "assistant",
                content=types.Content(role=role, parts=[types.Part(text=msg["content"])]),
            )
            await timings.append(service.append_event(session, event))

        async def read() -> int:
            got = await service.get_session(**ids, session_id=session.id)
            return len(got.events) if got else 0

        await timings.read(read, len(messages))
    finally:
        await service.close()
    return timings


# name -> (benchmark, distribution whose version is reported)
PEERS: dict[str, tuple[Callable[[Path, list], Awaitable[Timings]], str]] = {
    "openai_agents_sqlite": (openai_agents_sqlite, "openai-agents"),
    "langgraph_sqlite": (langgraph_sqlite, "langgraph-checkpoint-sqlite"),
    "google_adk_database": (google_adk_database, "google-adk"),
}


def _journal_mode(db: Path) -> str | None:
    # Peers run with their own pragmas, as a developer would get them; record which.
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("PRAGMA journal_mode").fetchone()[0]
    except sqlite3.Error:
        return None


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


async def run_peer(name: str, n: int) -> dict:
    bench, dist = PEERS[name]
    with tempfile.TemporaryDirectory(prefix=f"peer-{name}-") as tmp:
        db = Path(tmp) / f"{name}.sqlite"
        try:
            timings = await bench(db, make_messages(n))
        except Exception as exc:  # one broken peer must not hide the others
            traceback.print_exc(file=sys.stderr)
            return {"error": f"{type(exc).__name__}: {exc}", "version": _version(dist)}
        return {**timings.summary(), "version": _version(dist), "journal_mode": _journal_mode(db)}


def forbid_network() -> None:
    """Refuse any non-loopback connection, so no peer can quietly call a model or telemetry."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0] if isinstance(address, tuple) else address
            try:
                local = ipaddress.ip_address(host).is_loopback
            except ValueError:
                local = host == "localhost"
            if not local:
                raise ConnectionRefusedError(f"run_peers.py forbids network access to {host}")
        return real_connect(self, address)

    socket.socket.connect = connect


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="messages to append per peer")
    parser.add_argument("--only", choices=sorted(PEERS), help="run just this peer")
    args = parser.parse_args()

    forbid_network()
    names = [args.only] if args.only else list(PEERS)
    results = {name: await run_peer(name, args.n) for name in names}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
