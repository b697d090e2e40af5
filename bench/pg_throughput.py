"""Issue 13, item 4: append throughput of convograph on PostgreSQL against PostgreSQL's floor.

One convograph process (the default settings) over a fresh PostgreSQL database, and
bench/pg_floor.py under uvicorn over the same database (tables of its own): wrk at 16
connections appends one message per request to one conversation on each, alternately
(floor, convograph, …), and the figure is the median of the per-round ratios. Server CPU per
request is reported beside it (PostgreSQL's own CPU is not in it: it serves both alike).

    .venv/bin/python -m bench.pg_throughput [--rounds 7] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import orjson

from .peers.run_peers import make_messages
from .report import median
from .scaleout import ADMIN_URL, CREATE, Replica, _admin, _cli
from .servers import Client, Floor, append_body, check_data
from .servers import graphql_body as _body
from .throughput import _wrk

TARGET = 0.4


def run(workdir: Path, *, rounds: int, seconds: float) -> dict[str, Any]:
    name = f"convograph_bench_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    env = {
        **os.environ,
        "CONVOGRAPH_DATABASE_URL": url,
        "CONVOGRAPH_SECRET": "bench",
        "CONVOGRAPH_SWEEP_INTERVAL_SECONDS": "0",
    }
    server: Replica | None = None
    floor: Floor | None = None
    try:
        _cli(env, "migrate")
        token = _cli(env, "token", "create", "--workspace", "site:1", "--owner", "user:bench")
        auth = f"Bearer {token.strip().splitlines()[-1]}"
        server = Replica(env, workdir)
        floor = Floor(workdir, dsn=url.replace("postgresql+asyncpg", "postgresql"))
        client = Client(server.port, {"Authorization": auth})
        status, answer, _ = client.post("/graphql", _body(CREATE, {}))
        cid = check_data(status, answer)["createConversation"]["conversation"]["id"]
        client.close()
        message = make_messages(1)[0]
        conv_body = append_body(cid, [message])
        conv_headers = {"Content-Type": "application/json", "Authorization": auth}
        floor_body = orjson.dumps({"conversation_id": "c1", "message": message})
        floor_headers = {"Content-Type": "application/json"}

        def load_floor(secs: float) -> dict[str, Any]:
            assert floor is not None
            return _wrk(floor.process, floor.url, floor_body, floor_headers, secs)

        def load_convograph(secs: float) -> dict[str, Any]:
            assert server is not None
            return _wrk(server.process, server.url, conv_body, conv_headers, secs)

        load_floor(1)
        load_convograph(1)
        floors, convs = [], []
        for _ in range(rounds):
            floors.append(load_floor(seconds))
            convs.append(load_convograph(seconds))
    finally:
        for process in (server, floor):
            if process is not None:
                process.process.stop()
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    ratios = [
        c["requests_per_sec"] / f["requests_per_sec"] for f, c in zip(floors, convs, strict=True)
    ]
    return {
        "ratio": round(median(ratios), 3),
        "target": f">= {TARGET}",
        "ratios": [round(r, 3) for r in ratios],
        "convograph_rps": round(median([c["requests_per_sec"] for c in convs])),
        "floor_rps": round(median([f["requests_per_sec"] for f in floors])),
        "convograph_cpu_ms": median([c["server_cpu_ms_per_request"] for c in convs]),
        "floor_cpu_ms": median([f["server_cpu_ms_per_request"] for f in floors]),
        "convograph_p50_ms": median([c["latency_ms"]["p50"] for c in convs]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=5)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-pg-throughput-"))
    try:
        figures = run(workdir, rounds=args.rounds, seconds=args.seconds)
    except (OSError, asyncpg.PostgresError) as exc:
        raise SystemExit(f"no PostgreSQL at {ADMIN_URL}: {exc}") from None
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
