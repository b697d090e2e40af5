"""Figure 5: reading a 1,000-message transcript, in process.

The figure is the `transcript` query executed by the schema in this process (the GraphQL
execution a server does: cached document, loaders, the query's snapshot, resolvers, the
response body encoded) over a raw SELECT of the same rows encoded into the same document.

Compared, interleaved in every repetition:
- that query through the schema;
- `transcript` through the whole app (httpx ASGITransport: httpx's client, the HTTP request,
  the token lookup, GraphQL, the JSON response), reported beside it;
- the same messages through `messages(first: 100)`, all 10 pages;
- the floor: one raw SELECT of the same rows on the server's own pooled aiosqlite connection,
  encoded into the same response document (stored JSON text embedded as is, as
  orjson.Fragment); and the same with the stdlib sqlite3 module on this thread, no hop at all;
- two references that locate the cost: the storage layer's own transcript read (the loader's
  query and join, no GraphQL) and a trivial authenticated query (`viewer`) through the app.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterable
from contextlib import closing
from pathlib import Path
from typing import Any

import orjson

from graph.api.execution.error_log import Schema
from graph.api.schema import build_schema
from graph.domain import jsoncodec
from graph.domain.jsoncodec import RawJSONArray

from .inprocess import App, app_client, bench_context
from .peers.run_peers import make_messages
from .report import Figure, median, ms, ms_list

TARGET = 1.5
SIZE = 1000
PAGE = 100

CREATE = """
mutation { createConversation(input: {title: "transcript"}) { conversation { id } } }"""
APPEND = """
mutation($id: ID!, $messages: [JSON!]!) {
  appendMessages(input: {conversationId: $id, messages: $messages}) {
    conversation { messageCount } userErrors { code message }
  }
}"""
TRANSCRIPT = "query($id: ID!) { conversation(id: $id) { transcript } }"
PAGE_QUERY = """
query($id: ID!, $after: String) {
  conversation(id: $id) {
    messages(first: 100, after: $after) { nodes { seq data } pageInfo { hasNextPage endCursor } }
  }
}"""
VIEWER = "{ viewer { ownerKey } }"
RAW = "SELECT data FROM message WHERE conversation_id = ? ORDER BY seq"


async def _transcript(app: App, cid: str) -> bytes:
    # Timed up to the response bytes, like the raw side: a client's own decoding is not counted.
    return (await app.post(TRANSCRIPT, {"id": cid})).content


async def _pages(app: App, cid: str) -> list[Any]:
    out: list[Any] = []
    after = None
    while True:
        response = await app.post(PAGE_QUERY, {"id": cid, "after": after})
        page = orjson.loads(response.content)["data"]["conversation"]["messages"]
        out += [node["data"] for node in page["nodes"]]
        if not page["pageInfo"]["hasNextPage"]:
            return out
        after = page["pageInfo"]["endCursor"]


def _document(rows: Iterable[Any]) -> bytes:
    transcript = [orjson.Fragment(row[0]) for row in rows]
    return orjson.dumps({"data": {"conversation": {"transcript": transcript}}})


async def _raw(app: App, cid: str) -> bytes:
    # The server's own pooled SQLite connection (same thread, same pragmas), used directly:
    # no SQLAlchemy statement, no BEGIN, no scoping, no GraphQL, no HTTP.
    async with app.services.db.reader.connect() as conn:
        driver = (await conn.get_raw_connection()).driver_connection
        assert driver is not None
        cursor = await driver.execute(RAW, (cid,))
        rows = await cursor.fetchall()
        await cursor.close()
        return _document(rows)


def _raw_sync(db: sqlite3.Connection, cid: str) -> bytes:
    return _document(db.execute(RAW, (cid,)).fetchall())


async def _async(call: Callable[..., Any], *args: Any) -> Any:
    return call(*args)


def _transcript_of(body: bytes) -> list[Any]:
    return orjson.loads(body)["data"]["conversation"]["transcript"]


async def _storage(app: App, cid: str) -> bytes:
    # What the `transcript` resolver does below GraphQL: the loader's batch query, encoded
    # into the response document as the view encodes it.
    async with app.services.uow.read(app.principal) as repo:
        conversation = await repo.conversations.get(cid)
        assert conversation is not None
        texts = (await repo.transcripts.texts([(conversation, 1)]))[(cid, 1)]
    return jsoncodec.dumps({"data": {"conversation": {"transcript": RawJSONArray(texts)}}})


async def _schema_read(schema: Schema, app: App, cid: str) -> bytes:
    # The `transcript` query executed by the schema in this process, encoded as the HTTP
    # view encodes it: GraphQL without HTTP (no request parsing, no token lookup).
    context = bench_context(app.services, app.principal)
    result = await schema.execute(TRANSCRIPT, variable_values={"id": cid}, context_value=context)
    if result.errors:
        raise RuntimeError(str(result.errors))
    return jsoncodec.dumps({"data": result.data})


async def _interleaved(
    ways: dict[str, Callable[[], Awaitable[Any]]], reps: int
) -> dict[str, list[float]]:
    """`reps` seconds per way, each round in a rotated order; two warm-up rounds are dropped."""
    samples: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for i in range(reps + 2):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = time.perf_counter()
            await ways[name]()
            if i >= 2:
                samples[name].append(time.perf_counter() - start)
    return samples


async def run(workdir: Path, *, reps: int) -> Figure:
    async with app_client(workdir) as app:
        schema = build_schema(app.services.settings)
        cid = (await app.gql(CREATE))["createConversation"]["conversation"]["id"]
        await app.gql(APPEND, {"id": cid, "messages": make_messages(SIZE)})
        path = app.services.settings.sqlite_path
        assert path is not None
        with closing(sqlite3.connect(path)) as db:
            # The ways must return the same transcript before their times compare.
            whole = _transcript_of(await _transcript(app, cid))
            others = [
                await _pages(app, cid),
                _transcript_of(await _raw(app, cid)),
                _transcript_of(_raw_sync(db, cid)),
                _transcript_of(await _schema_read(schema, app, cid)),
                _transcript_of(await _storage(app, cid)),
            ]
            if len(whole) != SIZE or any(other != whole for other in others):
                raise RuntimeError("the ways of reading the transcript disagree")
            samples = await _interleaved(
                {
                    "transcript": lambda: _transcript(app, cid),
                    "pages": lambda: _pages(app, cid),
                    "raw": lambda: _raw(app, cid),
                    "raw_sync": lambda: _async(_raw_sync, db, cid),
                    "storage": lambda: _storage(app, cid),
                    "schema": lambda: _schema_read(schema, app, cid),
                    "viewer": lambda: app.post(VIEWER),
                },
                reps,
            )

    med = {name: ms(median(values)) for name, values in samples.items()}
    ratio = round(med["schema"] / med["raw"], 3)
    pages_ratio = med["pages"] / med["transcript"]
    return Figure(
        name="transcript_read",
        value=ratio,
        target=f"transcript query < {TARGET}x raw",
        met=ratio < TARGET,
        detail=(
            f"the transcript query executed by the schema {med['schema']:.2f} ms vs raw "
            f"SELECT+encode {med['raw']:.2f} ms on the server's pooled connection, "
            f"{med['raw_sync']:.2f} ms on sqlite3 directly "
            f"({med['schema'] / med['raw_sync']:.2f}x); storage-layer read "
            f"{med['storage']:.2f} ms = {med['storage'] / med['raw']:.2f}x raw; through the "
            f"whole app with httpx {med['transcript']:.2f} ms = "
            f"{med['transcript'] / med['raw']:.2f}x raw, where a trivial `viewer` query costs "
            f"{med['viewer']:.2f} ms; 10 pages of messages(first: 100) {med['pages']:.2f} ms = "
            f"{pages_ratio:.1f}x the transcript through the app "
            f"({SIZE:,} messages, medians of {reps} interleaved rounds)"
        ),
        data={
            "pages_over_transcript": round(pages_ratio, 3),
            "storage_over_raw": round(med["storage"] / med["raw"], 3),
            "app_over_raw": round(med["transcript"] / med["raw"], 3),
            "medians_ms": med,
            **{f"{name}_ms": ms_list(values) for name, values in samples.items()},
        },
    )
