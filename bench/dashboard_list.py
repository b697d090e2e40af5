"""A dashboard's list at 20,000 conversations: each with its delegations and last message.

    python -m bench.dashboard_list                      # SQLite, in a temporary directory
    python -m bench.dashboard_list --database-url postgresql+asyncpg://postgres@127.0.0.1:5432/postgres

The database is filled in bulk with SQL as bench/figures_plans.py fills it (20,000
conversations of 50 messages in the measured workspace, a delegation per second
conversation). The real app, in this process, then answers `conversations(first: 50)` with
each conversation's `delegations(first: 10)` and `messages(last: 1)` for an ADMIN token, and
the same list without `messages` beside it, alternating, ROUNDS times each: the medians,
p99s, their ratio and the SQL statements of each.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.bulk import postgres_databases, sqlite_settings
from bench.figures_plans import fill_postgres, fill_sqlite
from bench.report import p99
from graph.app import create_app
from graph.domain.principal import SYSTEM, OwnerType, Scope
from graph.services import Services
from graph.settings import Settings
from graph.store.keyring import Keyring, load_secret
from graph.store.migrate import upgrade

ROUNDS = 60
WARMUP = 5
DELEGATIONS = (
    "delegations(first: 10) { nodes { status targetTier summary "
    "childConversation { messageCount } } }"
)
WITH_LAST = f"""{{ conversations(first: 50) {{ nodes {{ id title {DELEGATIONS}
  messages(last: 1) {{ nodes {{ seq content }} }} }} }} }}"""
WITHOUT_LAST = f"{{ conversations(first: 50) {{ nodes {{ id title {DELEGATIONS} }} }} }}"


async def measure(settings: Settings) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        services: Services = app.state.services
        async with services.uow.write(SYSTEM) as repo:
            _, admin = await repo.tokens.create(
                workspace=("site", "1"), owner=(OwnerType.SYSTEM, "ops"), scope_=Scope.ADMIN
            )
        statements: dict[str, int] = {}
        times: dict[str, list[float]] = {"with messages(last: 1)": [], "without": []}
        queries = {"with messages(last: 1)": WITH_LAST, "without": WITHOUT_LAST}
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {admin}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers
        ) as http:
            for i in range(WARMUP + ROUNDS):
                for name, query in queries.items() if i % 2 else reversed(queries.items()):
                    seen: list[str] = []

                    def record(sql: str, _params: Any, seen: list[str] = seen) -> None:
                        if sql.lstrip().upper().startswith("SELECT") and "api_token" not in sql:
                            seen.append(sql)

                    stop = services.db.on_statement(record)
                    started = time.perf_counter()
                    response = await http.post("/graphql", json={"query": query})
                    elapsed = time.perf_counter() - started
                    stop()
                    body: dict[str, Any] = response.json()
                    assert "errors" not in body, body
                    assert len(body["data"]["conversations"]["nodes"]) == 50
                    statements[name] = len(seen)
                    if i >= WARMUP:
                        times[name].append(elapsed)
        medians = {name: statistics.median(t) for name, t in times.items()}
        for name, t in times.items():
            print(
                f"{name:>24}: p50 {medians[name] * 1000:.1f} ms, p99 {p99(t) * 1000:.1f} ms, "
                f"{statements[name]} SELECT statements"
            )
        ratio = medians["with messages(last: 1)"] / medians["without"]
        print(f"{'ratio':>24}: {ratio:.2f} ({ROUNDS} alternating rounds each, in process)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=None, help="PostgreSQL (default: SQLite)")
    parser.add_argument("--keep", default=None, help="SQLite: build the file here and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.database_url is None:
            path = Path(args.keep) if args.keep else Path(tmp) / "dashboard.db"
            settings = sqlite_settings(path, Path(tmp))
            if not path.exists():
                await upgrade(settings)
                fill_sqlite(path, Keyring(load_secret(settings)))
            await measure(settings)
            return
        async with postgres_databases(args.database_url, "cg_dashboard") as (settings,):
            await upgrade(settings)
            await fill_postgres(settings, Keyring(load_secret(settings)))
            await measure(settings)


if __name__ == "__main__":
    asyncio.run(main())
