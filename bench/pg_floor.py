"""PostgreSQL's floor: the cheapest server that does convograph's core write on PostgreSQL.

One POST route; per request, in one transaction on a pooled asyncpg connection: the
conversation's row lock and counter (one UPDATE … RETURNING takes both), one INSERT, COMMIT.
No GraphQL, ORM, auth or event log. Whatever convograph on PostgreSQL measures above this is
the price of its own layers (see bench/pg_throughput.py).

Run:  FLOOR_DSN=postgresql://postgres@127.0.0.1:5432/db python -m uvicorn bench.pg_floor:app
Call: POST /append  {"conversation_id": "c1", "message": {"role": "user", "content": "hi"}}
      -> {"seq": 1}
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .floor import BAD_BODY, read_append

# As many connections as a convograph process keeps (CONVOGRAPH_POOL_SIZE's default).
POOL_SIZE = 10

SCHEMA = """
CREATE TABLE IF NOT EXISTS floor_conversation (
    id TEXT PRIMARY KEY,
    message_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS floor_message (
    id BIGSERIAL PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES floor_conversation (id),
    seq INTEGER NOT NULL,
    role TEXT,
    data TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    UNIQUE (conversation_id, seq)
);
"""

BUMP = (
    "UPDATE floor_conversation SET message_count = message_count + 1 "
    "WHERE id = $1 RETURNING message_count"
)
INSERT = (
    "INSERT INTO floor_message (conversation_id, seq, role, data, created_at) "
    "VALUES ($1, $2, $3, $4, $5)"
)


async def append(request: Request) -> JSONResponse:
    found = await read_append(request)
    if found is None:
        return BAD_BODY
    conversation_id, message = found
    data = json.dumps(message, separators=(",", ":"))
    pool: asyncpg.Pool = request.app.state.pool
    async with pool.acquire() as conn, conn.transaction():
        seq = await conn.fetchval(BUMP, conversation_id)
        if seq is None:
            return JSONResponse({"error": "no such conversation"}, status_code=404)
        await conn.execute(
            INSERT, conversation_id, seq, message.get("role"), data, datetime.now(UTC)
        )
    return JSONResponse({"seq": seq})


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    dsn = os.environ["FLOOR_DSN"]
    pool = await asyncpg.create_pool(dsn, min_size=POOL_SIZE, max_size=POOL_SIZE)
    try:
        async with pool.acquire() as conn:
            await conn.execute(SCHEMA)
            await conn.execute(
                "INSERT INTO floor_conversation (id) VALUES ('c1') ON CONFLICT DO NOTHING"
            )
        app.state.pool = pool
        yield
    finally:
        await pool.close()


app = Starlette(routes=[Route("/append", append, methods=["POST"])], lifespan=lifespan)
