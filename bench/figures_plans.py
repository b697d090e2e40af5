"""The query plans and times of `workspaceFigures` and of the ownerType filter at a million
messages, on SQLite and on PostgreSQL.

    python -m bench.figures_plans                      # SQLite, in a temporary directory
    python -m bench.figures_plans --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/postgres

A fresh database (PostgreSQL: a new database beside the one named, dropped afterwards) is
migrated, then filled in bulk with SQL: workspace site:1 holds OWNERS owners (users and
runtimes) of CONVERSATIONS conversations each, MESSAGES messages per conversation (half of
them with a token_count) and a delegation per DELEGATE_EVERY conversations; workspace
site:2 holds a tenth as much. The real app then answers the queries through GraphQL (in
process) for one owner's token and for an ADMIN token; every statement it runs is recorded
and explained (SQLite: EXPLAIN QUERY PLAN; PostgreSQL: EXPLAIN ANALYZE) with its own
parameters, and each query is timed (the median of ROUNDS).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench.bulk import load_postgres, load_sqlite, postgres_databases, sqlite_settings
from graph.app import create_app
from graph.domain.principal import SYSTEM, OwnerType, Scope
from graph.services import Services
from graph.settings import Settings
from graph.store.keyring import Keyring, load_secret
from graph.store.migrate import upgrade

OWNERS = 200
CONVERSATIONS = 100  # per owner
MESSAGES = 50  # per conversation: 200 x 100 x 50 = 1,000,000 in site:1
DELEGATE_EVERY = 2
ROUNDS = 5
STATUSES = ("RUNNING", "COMPLETED", "FAILED", "PENDING")

FIGURES = "{ workspaceFigures { conversations messages tokenCount delegations { status count } } }"
LIST = """query($t: OwnerType) { conversations(filter: {ownerType: $t}, first: 50) {
  totalCount nodes { id } } }"""


def owner_of(i: int) -> tuple[OwnerType, str]:
    return (OwnerType.RUNTIME if i % 10 == 0 else OwnerType.USER), f"o{i}"


def rows(keyring: Keyring, workspace: str, share: int) -> Iterator[tuple[str, Any]]:
    """("conversation"|"message"|"delegation", row) for one workspace, `share` of the size."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for o in range(OWNERS // share):
        owner_type, key = owner_of(o)
        digest = keyring.owner_digest(key)
        previous: str | None = None
        for c in range(CONVERSATIONS):
            cid = str(uuid.uuid4())
            at = base + timedelta(minutes=o * CONVERSATIONS + c)
            tokens = sum(10 + m for m in range(0, MESSAGES, 2))
            yield (
                "conversation",
                (cid, "site", workspace, owner_type.value, digest, f"c{c}", "", "chat", "{}",
                 1, MESSAGES, tokens, "", at, at),
            )  # fmt: skip
            for m in range(MESSAGES):
                message: dict[str, Any] = {"role": "user", "content": f"message {m}"}
                if m % 2 == 0:
                    message["token_count"] = 10 + m
                data = json.dumps(message, separators=(",", ":"))
                digest_m = hashlib.blake2b(data.encode(), digest_size=16).hexdigest()
                yield "message", (cid, m + 1, "user", data, digest_m, at)
            if previous is not None and c % DELEGATE_EVERY == 0:
                status = STATUSES[c % len(STATUSES)]
                yield (
                    "delegation",
                    (str(uuid.uuid4()), "site", workspace, owner_type.value, digest, previous,
                     cid, "lead", "worker", "task", status, at),
                )  # fmt: skip
            previous = cid


CONVERSATION_COLUMNS = (
    "id, workspace_type, workspace_id, owner_type, owner_digest, title, agent_slug, context, "
    "metadata, version, message_count, token_count, ancestry, created_at, updated_at"
)
MESSAGE_COLUMNS = "conversation_id, seq, role, data, digest, created_at"
DELEGATION_COLUMNS = (
    "id, workspace_type, workspace_id, owner_type, owner_digest, parent_conversation_id, "
    "child_conversation_id, delegating_tier, target_tier, task, status, created_at"
)
COLUMNS = {
    "conversation": CONVERSATION_COLUMNS,
    "message": MESSAGE_COLUMNS,
    "delegation": DELEGATION_COLUMNS,
}


def batches(keyring: Keyring) -> Iterator[dict[str, list[Any]]]:
    batch: dict[str, list[Any]] = {table: [] for table in COLUMNS}
    for workspace, share in (("1", 1), ("2", 10)):
        for table, row in rows(keyring, workspace, share):
            batch[table].append(row)
            if len(batch["message"]) >= 50_000:
                yield batch
                batch = {table: [] for table in COLUMNS}
    yield batch


def fill_sqlite(path: Path, keyring: Keyring) -> None:
    load_sqlite(path, batches(keyring), COLUMNS)


async def fill_postgres(settings: Settings, keyring: Keyring) -> None:
    await load_postgres(settings, batches(keyring), COLUMNS)


async def measure(settings: Settings, explain: Any) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        services: Services = app.state.services
        async with services.uow.write(SYSTEM) as repo:
            _, owner = await repo.tokens.create(
                workspace=("site", "1"), owner=owner_of(1), scope_=Scope.WRITE
            )
            _, admin = await repo.tokens.create(
                workspace=("site", "1"), owner=(OwnerType.SYSTEM, "ops"), scope_=Scope.ADMIN
            )
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as http:
            for who, token in (("owner user:o1", owner), ("ADMIN", admin)):
                for name, query, variables in (
                    ("workspaceFigures", FIGURES, {}),
                    ("conversations(ownerType: RUNTIME)", LIST, {"t": "RUNTIME"}),
                ):
                    seen: list[tuple[str, Any]] = []

                    def record(sql: str, params: Any, seen: list[tuple[str, Any]] = seen) -> None:
                        if "api_token" not in sql and sql.lstrip().upper().startswith("SELECT"):
                            seen.append((sql, params))

                    stop = services.db.on_statement(record)
                    times = []
                    body: dict[str, Any] = {}
                    for _ in range(ROUNDS):
                        seen.clear()
                        started = time.perf_counter()
                        response = await http.post(
                            "/graphql",
                            json={"query": query, "variables": variables},
                            headers={"Authorization": f"Bearer {token}"},
                        )
                        times.append(time.perf_counter() - started)
                        body = response.json()
                        assert "errors" not in body, body
                    stop()
                    print(f"\n== {name} as {who}: median {statistics.median(times) * 1000:.1f} ms")
                    print(json.dumps(body["data"])[:300])
                    for sql, params in seen:
                        print("--", " ".join(sql.split())[:400])
                        for line in await explain(sql, params):
                            print("   ", line)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="PostgreSQL (default: SQLite)")
    parser.add_argument(
        "--keep", default=None, help="SQLite: build the file here and keep it (or reuse it)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.database_url is None:
            path = Path(args.keep) if args.keep else Path(tmp) / "figures.db"
            settings = sqlite_settings(path, Path(tmp), log_level="warning")
            if not path.exists():
                await upgrade(settings)
                started = time.perf_counter()
                fill_sqlite(path, Keyring(load_secret(settings)))
                print(f"filled in {time.perf_counter() - started:.0f} s")

            async def explain_sqlite(sql: str, params: Any) -> list[str]:
                db = sqlite3.connect(path)
                try:
                    plan = db.execute(f"EXPLAIN QUERY PLAN {sql}", list(params)).fetchall()
                finally:
                    db.close()
                return [str(row[-1]) for row in plan]

            await measure(settings, explain_sqlite)
            return
        async with postgres_databases(args.database_url, "cg_figures", log_level="warning") as (
            settings,
        ):
            await upgrade(settings)
            started = time.perf_counter()
            await fill_postgres(settings, Keyring(load_secret(settings)))
            print(f"filled in {time.perf_counter() - started:.0f} s")
            db = await asyncpg.connect(settings.asyncpg_dsn)

            async def explain_postgres(sql: str, params: Any) -> list[str]:
                plan = await db.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *params)
                return [row[0] for row in plan]

            try:
                await measure(settings, explain_postgres)
            finally:
                await db.close()


if __name__ == "__main__":
    asyncio.run(main())
