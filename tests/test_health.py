"""/healthz says the process is up and how the database is; /readyz says "send me traffic"
only when the database answers and is migrated to the newest revision."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from alembic import command
from sqlalchemy import pool, text
from sqlalchemy.ext.asyncio import create_async_engine

from graph.app import create_app
from graph.server.schema_gate import NOT_MIGRATED
from graph.settings import Settings
from graph.store.db import Database
from graph.store.migrate import upgrade, upgrade_blocking
from graph.store.migration_state import AT_HEAD, MigrationState
from tests.conftest import PG_URL, GraphQLClient, Server, _pg_admin, _with_db
from tests.migrations import columns_after
from tests.operations import APPEND, CREATE
from tests.pg_databases import admin
from tests.tcp_proxy import in_front_of
from tests.test_http import serving

VIEWER = "{ viewer { workspace { key } } }"


@pytest.fixture
def empty_database_url(tmp_path: Path) -> Iterator[str]:
    """A database nobody has migrated: an empty SQLite file, or an empty PostgreSQL database."""
    if not PG_URL:
        yield f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
        return
    name = f"cg_empty_{uuid.uuid4().hex[:12]}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    yield _with_db(PG_URL, name)
    _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class App:
    settings: Settings
    http: httpx.AsyncClient


@pytest.fixture
async def unmigrated(empty_database_url: str, tmp_path: Path) -> AsyncIterator[App]:
    settings = Settings(
        database_url=empty_database_url,
        secret="test-secret",
        sweep_interval_seconds=0,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            yield App(settings, http)


async def upgrade_to(settings: Settings, revision: str) -> None:
    await columns_after(settings, "message", lambda config: command.upgrade(config, revision))


async def test_a_migrated_database_is_healthy_and_ready(
    anon: GraphQLClient, database_url: str
) -> None:
    health = await anon.http.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {
        "status": "ok",
        "database": "up",
        "migrations": "head",
        "storage": "ok",
        # PostgreSQL brings events over its LISTEN connection; SQLite needs none.
        "events": "local" if database_url.startswith("sqlite") else "listening",
    }
    ready = await anon.http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "storage": "ok"}


async def test_an_unmigrated_database_is_healthy_but_not_ready_until_migrated(
    unmigrated: App,
) -> None:
    settings, http = unmigrated.settings, unmigrated.http
    ready = await http.get("/readyz")
    assert ready.status_code == 503
    assert "not migrated" in ready.json()["status"]
    health = await http.get("/healthz")
    assert health.status_code == 200
    assert health.json() == {
        "status": "ok",
        "database": "up",
        "migrations": "behind",
        "storage": "ok",
        "events": "local" if settings.is_sqlite else "listening",
    }

    # An older revision is not enough either.
    await upgrade_to(settings, "0001")
    assert (await http.get("/readyz")).status_code == 503

    await upgrade(settings)
    ready = await http.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert (await http.get("/healthz")).json()["migrations"] == "head"


async def test_graphql_on_an_unmigrated_database_says_so_with_503_until_it_is_migrated(
    unmigrated: App,
) -> None:
    # What /readyz says, not 500 "Unexpected error." from code meeting missing tables.
    settings, http = unmigrated.settings, unmigrated.http
    headers = {"Authorization": "Bearer cvg_" + "x" * 43}
    for revision in (None, "0001"):  # nothing at all, then an older schema
        if revision is not None:
            await upgrade_to(settings, revision)
        answer = await http.post("/graphql", json={"query": VIEWER}, headers=headers)
        assert answer.status_code == 503, answer.text
        assert answer.json()["errors"][0]["message"] == (
            "database not migrated: run `convograph migrate`"
        )
        assert answer.headers["retry-after"]
    await upgrade(settings)
    answer = await http.post("/graphql", json={"query": VIEWER}, headers=headers)
    assert answer.status_code == 401, answer.text  # served again: an unknown token


async def test_a_server_with_quotas_starts_on_an_unmigrated_database_and_counts_once_migrated(
    empty_database_url: str,
) -> None:
    """A replica started (--no-migrate) before `convograph migrate` waits for it; with
    workspace quotas on, its start-up count of every workspace met the missing tables and
    stopped it ('Application startup failed', exit 1). It counts before its first write."""
    settings = Settings(
        database_url=empty_database_url,
        secret="test-secret",
        sweep_interval_seconds=0,
        workspace_max_messages=2,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            ready = await http.get("/readyz")
            assert ready.status_code == 503 and "not migrated" in ready.json()["status"]
            await upgrade(settings)
            assert (await http.get("/readyz")).status_code == 200
            gql = GraphQLClient(http, await Server(app, settings).token())
            cid = (await gql(CREATE))["createConversation"]["conversation"]["id"]
            messages = [{"role": "user", "content": c} for c in "ab"]
            appended = (await gql(APPEND, {"id": cid, "m": messages}))["appendMessages"]
            assert appended["userErrors"] == []
            more = {"id": cid, "m": [{"role": "user", "content": "c"}]}
            refused = (await gql(APPEND, more))["appendMessages"]
            assert [e["code"] for e in refused["userErrors"]] == ["STORAGE_FULL"]


async def test_graphiql_opens_before_the_database_is_migrated(unmigrated: App) -> None:
    # The page reads nothing; the queries it sends then say what is wrong.
    http = unmigrated.http
    page = await http.get("/graphql", headers={"Accept": "text/html"})
    assert page.status_code == 200, page.text
    assert page.headers["content-type"].startswith("text/html")
    answer = await http.get("/graphql", params={"query": VIEWER}, headers={"Accept": "text/html"})
    assert answer.status_code == 503, answer.text
    assert answer.json()["errors"][0]["message"] == NOT_MIGRATED
    # With a token, authentication would look it up in a table that is not there (500
    # INTERNAL, a traceback): gated as any other request.
    token = {"Accept": "text/html", "Authorization": "Bearer cvg_" + "x" * 43}
    page = await http.get("/graphql", headers=token)
    assert page.status_code == 503, page.text
    assert page.json()["errors"][0]["message"] == NOT_MIGRATED


async def test_a_database_back_from_an_outage_unmigrated_says_so_at_once(
    empty_database_url: str, tmp_path: Path
) -> None:
    """A replica started (--no-migrate) while its database was away: the first request after
    the database is back, not migrated yet, gets the 503 that says so, not the 500 of code
    meeting missing tables (a check that could not reach the database answered for every
    request of the next 2 seconds)."""
    if empty_database_url.startswith("sqlite"):
        pytest.skip("an embedded SQLite file cannot go away: PostgreSQL only")
    proxy, through = await in_front_of(empty_database_url)
    await proxy.refuse_new()
    settings = Settings(
        database_url=through,
        secret="test-secret",
        sweep_interval_seconds=0,
        pool_timeout_seconds=2,
    )
    app = create_app(settings)
    headers = {"Authorization": "Bearer cvg_" + "x" * 43}
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                away = await http.post("/graphql", json={"query": VIEWER}, headers=headers)
                assert away.status_code == 503, away.text
                assert away.json()["errors"][0]["extensions"]["code"] == "DATABASE_UNAVAILABLE"
                # GraphiQL's page reads nothing: it opens while the database is away.
                page = await http.get("/graphql", headers={"Accept": "text/html"})
                assert page.status_code == 200, page.text
                assert page.headers["content-type"].startswith("text/html")
                await proxy.start()  # back, on the same port: not migrated
                back = await http.post("/graphql", json={"query": VIEWER}, headers=headers)
                assert back.status_code == 503, back.text
                assert back.json()["errors"][0]["message"] == NOT_MIGRATED
    finally:
        await proxy.cut()


async def test_a_replica_started_before_its_database_was_made_waits_for_it() -> None:
    """`serve --no-migrate` on a PostgreSQL database that does not exist yet (made and
    migrated by the deploy after the replicas start) failed its start with a traceback;
    it starts, answers 503 until the database is there and migrated, then serves."""
    if not PG_URL:
        pytest.skip("a SQLite file is made by `serve`: PostgreSQL only")
    name = f"cg_later_{uuid.uuid4().hex[:12]}"
    settings = Settings(
        database_url=_with_db(PG_URL, name), secret="test-secret", sweep_interval_seconds=0
    )
    headers = {"Authorization": "Bearer cvg_" + "x" * 43}
    try:
        async with serving(settings) as (server, http):
            assert (await http.get("/readyz")).status_code == 503
            away = await http.post("/graphql", json={"query": VIEWER}, headers=headers)
            assert away.status_code == 503, away.text
            assert away.json()["errors"][0]["extensions"]["code"] == "DATABASE_UNAVAILABLE"
            await admin(PG_URL, f'CREATE DATABASE "{name}"')
            await upgrade(settings)
            # Ready once its event listener, retrying, has connected too.
            for _ in range(100):
                if (ready := await http.get("/readyz")).status_code == 200:
                    break
                await asyncio.sleep(0.1)
            assert ready.status_code == 200, ready.text
            gql = GraphQLClient(http, await server.token())
            created = (await gql(CREATE))["createConversation"]
            assert created["userErrors"] == [], created
    finally:
        await admin(PG_URL, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def test_a_database_a_later_release_migrated_is_ready_for_this_one(
    unmigrated: App,
) -> None:
    # A replica of this release (re)started while the next release rolls out: the database
    # is at a revision it does not know, and the previous release keeps working on it.
    settings, http = unmigrated.settings, unmigrated.http
    await upgrade(settings)
    engine = create_async_engine(settings.database_url, poolclass=pool.NullPool)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE alembic_version SET version_num = '9018'"))
    finally:
        await engine.dispose()
    ready = await http.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "storage": "ok"}
    assert (await http.get("/healthz")).json()["migrations"] == "ahead"


async def test_a_not_ready_answer_is_logged_at_debug_like_every_probe(
    unmigrated: App, caplog: pytest.LogCaptureFixture
) -> None:
    """A load balancer asks every few seconds while a database is away or behind: each 503
    of /readyz is its answer, not an error to log."""
    caplog.set_level(logging.DEBUG, logger="convograph.access")
    assert (await unmigrated.http.get("/readyz")).status_code == 503
    levels = [r.levelno for r in caplog.records if r.name == "convograph.access"]
    assert levels == [logging.DEBUG]


async def test_health_endpoints_need_no_token_and_graphql_still_does(
    anon: GraphQLClient,
) -> None:
    assert (await anon.http.get("/readyz")).status_code == 200
    refused = await anon.post(VIEWER)
    assert refused.status_code == 401


async def test_requests_to_an_unmigrated_database_are_refused_and_counted(
    unmigrated: App,
) -> None:
    refused = await unmigrated.http.post(
        "/graphql", json={"query": VIEWER}, headers={"Authorization": "Bearer cvg_anything"}
    )
    # 503 saying what /readyz says (not 500 INTERNAL from code meeting missing tables:
    # test_graphql_on_an_unmigrated_database_says_so_with_503_until_it_is_migrated).
    assert refused.status_code == 503
    assert refused.json()["errors"][0]["extensions"]["code"] == "DATABASE_UNAVAILABLE"
    assert "api_token" not in refused.text and "alembic_version" not in refused.text

    metrics = (await unmigrated.http.get("/metrics")).text
    backend = "sqlite" if unmigrated.settings.is_sqlite else "postgresql"
    counted = [
        line
        for line in metrics.splitlines()
        if line.startswith(f'convograph_db_errors_total{{backend="{backend}"')
    ]
    assert counted and float(counted[0].rsplit(" ", 1)[1]) >= 1, metrics
    assert 'route="/graphql",status="503"' in metrics


async def test_upgrades_started_together_run_one_after_another(
    empty_database_url: str, tmp_path: Path
) -> None:
    """Replicas started together, each migrating on start (the default), all come up: the
    first upgrades, the others find the database at the newest revision."""
    settings = Settings(database_url=empty_database_url, secret="t")

    def together() -> None:
        with concurrent.futures.ThreadPoolExecutor(3) as threads:
            for started in [threads.submit(upgrade_blocking, settings) for _ in range(3)]:
                started.result()  # raises what an upgrade raised

    await asyncio.to_thread(together)
    db = Database(settings)
    try:
        assert await MigrationState(db).current() == AT_HEAD
    finally:
        await db.dispose()
