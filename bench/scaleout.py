"""Scale-out: append throughput of two server processes over one PostgreSQL, divided by one.

Two wrk generators (8 connections each, 16 in all) append to two conversations. In the
one-process rounds both target the same server; in the two-process rounds each targets its
own. Rounds alternate, and the figure is the median of the per-round ratios. On a 2-core
machine the load generators, PostgreSQL and the servers share the cores, so the ratio says
how much a second replica helps *here*, not on separate hosts.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg

from .load import run_wrk
from .peers.run_peers import make_messages
from .report import Figure, median
from .servers import PYTHON, ROOT, Client, Process, append_body, check_data, free_port
from .servers import graphql_body as _body

ADMIN_URL = os.environ.get(
    "CONVOGRAPH_BENCH_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
CREATE = "mutation { createConversation(input: {}) { conversation { id } userErrors { code } } }"


async def _admin(sql: str) -> None:
    conn = await asyncpg.connect(ADMIN_URL.replace("postgresql+asyncpg", "postgresql"), timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


class Replica:
    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.port = free_port()
        argv = [PYTHON, "-m", "graph", "serve", "--no-migrate", "--port", str(self.port)]
        self.process = Process(argv, env, workdir / f"replica-{self.port}.log", self.port)
        self.process.wait_listening()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/graphql"


def _cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [PYTHON, "-m", "graph", *args], env=env, cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {done.stderr}")
    return done.stdout


def run(workdir: Path, *, rounds: int, seconds: float) -> Figure:
    name = f"convograph_bench_{uuid.uuid4().hex[:8]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as exc:
        return Figure("scaleout_ratio", 0, "report", True, f"skipped: no PostgreSQL ({exc})")
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "CONVOGRAPH_DATABASE_URL": ADMIN_URL.rsplit("/", 1)[0] + f"/{name}",
        "CONVOGRAPH_SECRET": "bench",
        "CONVOGRAPH_SWEEP_INTERVAL_SECONDS": "0",
    }
    replicas: list[Replica] = []
    try:
        _cli(env, "migrate")
        token = _cli(env, "token", "create", "--workspace", "site:1", "--owner", "user:bench")
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token.strip().splitlines()[-1]}",
        }
        replicas = [Replica(env, workdir), Replica(env, workdir)]
        return _measure(replicas, headers, rounds=rounds, seconds=seconds)
    finally:
        for replica in replicas:
            replica.process.stop()
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _measure(
    replicas: list[Replica], headers: dict[str, str], *, rounds: int, seconds: float
) -> Figure:
    client = Client(replicas[0].port, {"Authorization": headers["Authorization"]})
    bodies = []
    for _ in range(2):
        status, answer, _ = client.post("/graphql", _body(CREATE, {}))
        cid = check_data(status, answer)["createConversation"]["conversation"]["id"]
        bodies.append(append_body(cid, make_messages(1)))
    client.close()

    def load(targets: list[Replica], secs: float) -> float:
        with ThreadPoolExecutor(2) as pool:
            results: list[dict[str, Any]] = list(
                pool.map(
                    lambda pair: run_wrk(
                        url=pair[0].url,
                        body=pair[1],
                        headers=headers,
                        seconds=secs,
                        connections=8,
                        threads=1,
                    ),
                    zip(targets, bodies, strict=True),
                )
            )
        if any(r["non_2xx"] for r in results):
            raise RuntimeError(f"non-2xx answers during the scale-out load: {results}")
        return sum(r["requests_per_sec"] for r in results)

    one, two = replicas[0], replicas[1]
    load([one, one], 1)
    load([one, two], 1)
    singles, doubles = [], []
    for _ in range(rounds):
        singles.append(load([one, one], seconds))
        doubles.append(load([one, two], seconds))
    ratios = [d / s for s, d in zip(singles, doubles, strict=True)]
    ratio = round(median(ratios), 3)
    return Figure(
        name="scaleout_ratio",
        value=ratio,
        target="report (2 cores shared by wrk, PostgreSQL and the servers)",
        met=True,
        detail=(
            f"two replicas {median(doubles):.0f} req/s vs one {median(singles):.0f} req/s "
            f"(appendMessages over PostgreSQL, 2 wrk x 8 connections, two conversations, "
            f"medians of {rounds} alternating {seconds:g}s rounds)"
        ),
        data={"ratios": [round(r, 4) for r in ratios], "one": singles, "two": doubles},
    )
