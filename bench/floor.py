"""The stack's floor: the cheapest server that does convograph's core write.

`/append`: one INSERT + COMMIT through aiosqlite per request, with the same SQLite pragmas
convograph uses, and no GraphQL, ORM or auth.  Whatever convograph measures above this number is
the price of its own layers; nothing built on Starlette + aiosqlite can go below it.

`/append-grouped`: the same INSERT, but concurrent requests share a COMMIT (group commit), and
each still answers only once a COMMIT that includes its INSERT has returned: the floor of a
server that shares its fsyncs, as convograph does on SQLite.

Run:  FLOOR_DB=/tmp/floor.sqlite python -m uvicorn bench.floor:app --port 8011
Call: POST /append  {"conversation_id": "c1", "message": {"role": "user", "content": "hi"}}
      -> {"seq": 1}
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import aiosqlite
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

# Same pragmas as convograph's engine, so the floor pays the same fsync cost per commit.
PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS message (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT,
    seq INTEGER,
    role TEXT,
    data TEXT,
    created_at TEXT
)
"""

INSERT = "INSERT INTO message (conversation_id, seq, role, data, created_at) VALUES (?, ?, ?, ?, ?)"


BAD_BODY = JSONResponse({"error": "expected {conversation_id, message}"}, status_code=400)


async def read_append(request: Request) -> tuple[str, dict[str, Any]] | None:
    """The conversation id and message of an append's body; None when it is not one."""
    try:
        body = await request.json()
        conversation_id = body["conversation_id"]
        message = body["message"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(conversation_id, str) or not isinstance(message, dict):
        return None
    return conversation_id, message


async def _insert(state: Any, conversation_id: str, message: dict[str, Any]) -> int:
    """With the lock held: the message's INSERT at the conversation's next seq."""
    seq = int(state.next_seq[conversation_id]) + 1
    data = json.dumps(message, separators=(",", ":"))
    now = datetime.now(UTC).isoformat()
    await state.db.execute(INSERT, (conversation_id, seq, message.get("role"), data, now))
    state.next_seq[conversation_id] = seq
    return seq


class _Batch:
    """Inserts waiting for the COMMIT that will include them."""

    def __init__(self) -> None:
        self.committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()


async def _append(request: Request, *, grouped: bool) -> JSONResponse:
    found = await read_append(request)
    if found is None:
        return BAD_BODY
    state = request.app.state
    # One shared connection: the lock keeps each request's INSERT and COMMIT a transaction of
    # its own (otherwise one request's commit would silently flush another's insert), or, with
    # `grouped`, the INSERTs of one batch apart from its COMMIT; and the seq counter race-free.
    async with state.lock:
        seq = await _insert(state, *found)
        if not grouped:
            await state.db.commit()
            return JSONResponse({"seq": seq})
        batch = state.batch
        if state.committer is None:
            state.committer = asyncio.create_task(_commit(state))
    await asyncio.shield(batch.committed)
    return JSONResponse({"seq": seq})


async def append(request: Request) -> JSONResponse:
    return await _append(request, grouped=False)


async def append_grouped(request: Request) -> JSONResponse:
    return await _append(request, grouped=True)


async def _commit(state: Any) -> None:
    # Queued on the lock behind the inserts under way: they join this COMMIT.
    async with state.lock:
        batch, state.batch, state.committer = state.batch, _Batch(), None
        await state.db.commit()
    batch.committed.set_result(None)


async def _load_counters(db: aiosqlite.Connection) -> defaultdict[str, int]:
    # Resume numbering when FLOOR_DB points at a database left by an earlier run.
    counters: defaultdict[str, int] = defaultdict(int)
    async with db.execute("SELECT conversation_id, MAX(seq) FROM message GROUP BY 1") as cur:
        async for conversation_id, seq in cur:
            counters[conversation_id] = seq or 0
    return counters


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    path = os.environ.get("FLOOR_DB")
    tmpdir = None
    if not path:
        tmpdir = tempfile.mkdtemp(prefix="floor-")
        path = os.path.join(tmpdir, "floor.sqlite")
    db = await aiosqlite.connect(path)
    try:
        for pragma in PRAGMAS:
            await db.execute(pragma)
        await db.execute(SCHEMA)
        await db.commit()
        app.state.db = db
        app.state.lock = asyncio.Lock()
        app.state.next_seq = await _load_counters(db)
        app.state.batch = _Batch()
        app.state.committer = None
        yield
    finally:
        await db.close()
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)


app = Starlette(
    routes=[
        Route("/append", append, methods=["POST"]),
        Route("/append-grouped", append_grouped, methods=["POST"]),
    ],
    lifespan=lifespan,
)
