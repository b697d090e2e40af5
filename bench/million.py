"""A million messages: reads and an append at that size, on SQLite and on PostgreSQL.

    python -m bench.million                      # SQLite, in a temporary directory
    python -m bench.million --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/postgres

The database is migrated, then filled in bulk with SQL (not through HTTP, so that the
bench stays short): one owner holds CONVERSATIONS conversations of MESSAGES messages each
(1,000,000), plus one of BIG messages. One message in a million holds a rare word, one in
a hundred a common one; SQLite's full-text index is built from the rows, PostgreSQL's GIN
index as they are copied in. On SQLite the messages are stored as the server stores them:
the first thousand as text, the rest compressed with a dictionary learnt from those. The
real app, in this process, then answers each read ROUNDS times, the reads interleaved: p50
and p99 of the first page of conversations, a page 1,000 pages deep (by its keyset
cursor), a search for the rare and for the common word, the `transcript` of the BIG-
message conversation and `totalCount`. An append into a conversation of this database is
timed against the same append into an empty database, alternating between the two apps.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.bulk import load_postgres, load_sqlite, postgres_databases, sqlite_settings
from bench.figures_plans import CONVERSATION_COLUMNS
from bench.report import p99
from graph.app import create_app
from graph.domain import cursors
from graph.domain.principal import SYSTEM, OwnerType, Scope
from graph.services import Services
from graph.settings import Settings
from graph.store.compression import Compression
from graph.store.dictionary_training import TRAIN_AT, train
from graph.store.keyring import Keyring, load_secret
from graph.store.migrate import upgrade

CONVERSATIONS = 100_000
MESSAGES = 10
BIG = 10_000
PAGE = 50
DEEP = 1000  # pages
ROUNDS = 30
RARE, COMMON = "zanzibarite", "ochre"
OWNER = (OwnerType.USER, "million")
MESSAGE_COLUMNS = "conversation_id, seq, role, data, digest, search_text, created_at"

FIRST_PAGE = f"{{ conversations(first: {PAGE}) {{ nodes {{ id title }} }} }}"
AFTER = f"""query($after: String) {{ conversations(first: {PAGE}, after: $after) {{
  nodes {{ id title }} }} }}"""
SEARCH = f"""query($q: String!) {{ conversations(first: {PAGE}, filter: {{search: $q}}) {{
  nodes {{ id }} }} }}"""
TRANSCRIPT = "query($id: ID!) { conversation(id: $id) { transcript } }"
TOTAL = "{ conversations { totalCount } }"
CREATE = 'mutation { createConversation(input: {title: "append"}) { conversation { id } } }'
APPEND = """mutation($id: ID!) { appendMessages(input: {conversationId: $id,
  messages: [{role: "user", content: "one more turn"}]}) { userErrors { code } } }"""


def rows(keyring: Keyring, *, sqlite: bool) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """("conversation"|"message", row): the owner's conversations, oldest first. (SQLite's
    index reads a message's words from its JSON: its search_text column stays NULL.)"""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    digest = keyring.owner_digest(OWNER[1])
    counter = 0
    for c in range(CONVERSATIONS + 1):
        size = BIG if c == CONVERSATIONS else MESSAGES
        cid = str(uuid.uuid4())
        at = base + timedelta(seconds=c)
        yield (
            "conversation",
            (cid, "site", "1", OWNER[0].value, digest, f"c{c}", "", "chat", "{}",
             1, size, 0, "", at, at),
        )  # fmt: skip
        for m in range(size):
            counter += 1
            words = f"turn {m} of conversation {c}"
            if counter % 100 == 0:
                words += f" {COMMON}"
            if counter == 500_000:
                words += f" {RARE}"
            data = json.dumps({"role": "user", "content": words}, separators=(",", ":"))
            hashed = hashlib.blake2b(data.encode(), digest_size=16).hexdigest()
            yield "message", (cid, m + 1, "user", data, hashed, None if sqlite else words, at)


def compressed(
    found: Iterator[tuple[str, tuple[Any, ...]]],
) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """SQLite: the rows as a server stores them (store/compression.py): the first TRAIN_AT
    messages as text, a dictionary learnt from them, every message after compressed."""
    compression = Compression(None, enabled=True)
    sample: list[str] = []
    for table, row in found:
        if table == "message" and not compression.compressing:
            sample.append(row[3])
            if len(sample) == TRAIN_AT:
                made = train(sample, ident=1)
                assert made is not None
                compression.learn([(1, made)])
                yield "message_dictionary", (1, made, datetime.now(UTC))
        elif table == "message":
            data = compression.stored(row[3], row[3].encode())
            row = (*row[:3], data, *row[4:])
        yield table, row


def batches(
    keyring: Keyring, *, sqlite: bool, text: bool = False
) -> Iterator[dict[str, list[tuple[Any, ...]]]]:
    def empty() -> dict[str, list[tuple[Any, ...]]]:
        return {"conversation": [], "message": [], "message_dictionary": []}

    found = rows(keyring, sqlite=sqlite)
    batch = empty()
    for table, row in compressed(found) if sqlite and not text else found:
        batch[table].append(row)
        if len(batch["message"]) >= 50_000:
            yield batch
            batch = empty()
    yield batch


COLUMNS = {
    "conversation": CONVERSATION_COLUMNS,
    "message": MESSAGE_COLUMNS,
    "message_dictionary": "id, data, created_at",
}


def fill_sqlite(path: Path, keyring: Keyring, *, text: bool = False) -> None:
    # The full-text index as the server's batches would have built it, in one pass.
    load_sqlite(
        path,
        batches(keyring, sqlite=True, text=text),
        COLUMNS,
        then=(
            "INSERT INTO message_fts(rowid, search_text) "
            "SELECT id, search_text FROM message_search WHERE search_text IS NOT NULL",
            "UPDATE message_fts_mark SET upto = (SELECT coalesce(max(id), 0) FROM message)",
        ),
    )


@asynccontextmanager
async def app_for(settings: Settings) -> AsyncIterator[tuple[Services, httpx.AsyncClient]]:
    """The app over `settings`' database, and a client holding the owner's WRITE token."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        services: Services = app.state.services
        async with services.uow.write(SYSTEM) as repo:
            _, token = await repo.tokens.create(
                workspace=("site", "1"), owner=OWNER, scope_=Scope.WRITE
            )
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers, timeout=60
        ) as http:
            yield services, http


async def timed(http: httpx.AsyncClient, query: str, variables: dict[str, Any]) -> float:
    started = time.perf_counter()
    response = await http.post("/graphql", json={"query": query, "variables": variables})
    elapsed = time.perf_counter() - started
    body = response.json()
    assert response.status_code == 200 and "errors" not in body, body
    return elapsed


def line(name: str, samples: list[float]) -> str:
    return (
        f"{name:>34}: p50 {statistics.median(samples) * 1000:7.2f} ms, "
        f"p99 {p99(samples) * 1000:7.2f} ms"
    )


async def measure(full: Settings, empty: Settings) -> None:
    async with app_for(full) as (services, http):
        deep_cursor = await deep_page_cursor(services)
        big = await biggest(services)
        reads: dict[str, tuple[str, dict[str, Any]]] = {
            "first page of conversations": (FIRST_PAGE, {}),
            f"a page {DEEP:,} pages deep": (AFTER, {"after": deep_cursor}),
            "search, a rare word (1 message)": (SEARCH, {"q": RARE}),
            "search, a common word (1% of them)": (SEARCH, {"q": COMMON}),
            f"transcript of {BIG:,} messages": (TRANSCRIPT, {"id": big}),
            "totalCount": (TOTAL, {}),
        }
        samples: dict[str, list[float]] = {name: [] for name in reads}
        for query, variables in reads.values():  # warm-up
            await timed(http, query, variables)
        for _ in range(ROUNDS):
            for name, (query, variables) in reads.items():
                samples[name].append(await timed(http, query, variables))
        for name, values in samples.items():
            print(line(name, values))
        target = await created(http)
        async with app_for(empty) as (_, fresh):
            target_empty = await created(fresh)
            appends: dict[str, list[float]] = {"full": [], "empty": []}
            for i in range(20 + ROUNDS * 2):
                order = [("full", http, target), ("empty", fresh, target_empty)]
                for side, client, cid in order if i % 2 else reversed(order):
                    elapsed = await timed(client, APPEND, {"id": cid})
                    if i >= 20:
                        appends[side].append(elapsed)
        print(line(f"append at {CONVERSATIONS * MESSAGES + BIG:,} messages", appends["full"]))
        print(line("the same append, empty database", appends["empty"]))
        ratio = statistics.median(appends["full"]) / statistics.median(appends["empty"])
        print(f"{'growth (medians)':>34}: {ratio:.2f}")


async def created(http: httpx.AsyncClient) -> str:
    response = await http.post("/graphql", json={"query": CREATE})
    cid: str = response.json()["data"]["createConversation"]["conversation"]["id"]
    return cid


async def deep_page_cursor(services: Services) -> str:
    """The keyset cursor after which the list's page DEEP + 1 starts (newest first)."""
    from sqlalchemy import select

    from graph.store.tables import conversation as C

    async with services.uow.read(SYSTEM) as repo:
        found = await repo.sql.rows(
            select(C.c.created_at, C.c.id)
            .order_by(C.c.created_at.desc(), C.c.id.desc())
            .offset(PAGE * DEEP - 1)
            .limit(1)
        )
    created_at, cid = found.values[0]
    return cursors.encode_keyset(created_at, cid)


async def biggest(services: Services) -> str:
    from sqlalchemy import select

    from graph.store.tables import conversation as C

    async with services.uow.read(SYSTEM) as repo:
        found = await repo.sql.rows(select(C.c.id).order_by(C.c.message_count.desc()).limit(1))
    cid: str = found.values[0][0]
    return cid


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="PostgreSQL (default: SQLite)")
    parser.add_argument("--keep", default=None, help="SQLite: build the file here and keep it")
    parser.add_argument(
        "--text", action="store_true", help="SQLite: store every message as text (uncompressed)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.database_url is None:
            path = Path(args.keep) if args.keep else Path(tmp) / "million.db"
            full = sqlite_settings(path, Path(tmp))
            empty = sqlite_settings(Path(tmp) / "empty.db", Path(tmp))
            await upgrade(empty)
            if not path.exists():
                await upgrade(full)
                started = time.perf_counter()
                fill_sqlite(path, Keyring(load_secret(full)), text=args.text)
                print(f"filled in {time.perf_counter() - started:.0f} s")
            await measure(full, empty)
            return
        async with postgres_databases(args.database_url, "cg_million", 2) as (full, empty):
            await upgrade(full)
            await upgrade(empty)
            started = time.perf_counter()
            await load_postgres(full, batches(Keyring(load_secret(full)), sqlite=False), COLUMNS)
            print(f"filled in {time.perf_counter() - started:.0f} s")
            await measure(full, empty)


if __name__ == "__main__":
    asyncio.run(main())
