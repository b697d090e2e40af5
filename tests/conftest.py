"""Every test gets its own database (a fresh SQLite file, or a fresh PostgreSQL database when
CONVOGRAPH_TEST_DATABASE_URL is set) and its own app, talked to over GraphQL-over-HTTP."""

from __future__ import annotations

import gc
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from graph.domain.principal import SYSTEM, Scope, parse_owner, parse_workspace

if TYPE_CHECKING:
    from graph.services import Services
    from graph.settings import Settings
    from tests.pg_databases import WorkerDatabase

# The shared helpers' asserts explain themselves as a test's own do.
pytest.register_assert_rewrite("tests.operations", "tests.ws", "tests.browser")

# The app, its settings and the migrations are imported by the fixtures that use them, not
# here: `pytest tests/unit` loads this file too, and needs none of them.

PG_URL = os.environ.get("CONVOGRAPH_TEST_DATABASE_URL")

# The files whose tests take longest each (a C++ build, PHP and Go programs, a wheel in a new
# virtualenv, a browser waiting out Retry-After; `pytest --durations`), longest first. They
# run first: pytest-xdist hands tests out in collection order, and one of them handed out
# last kept its worker busy while the others, done, left the cores idle.
LONG_FIRST = (
    "test_adapter_entropic.py",
    "test_adapter_wordpress.py",
    "test_container.py",
    "test_inspector_recovery_browser.py",
    "test_crash.py",
    "test_fuzz_graphql.py",
    "test_event_resume.py",
    "test_concurrency.py",
    "test_inspector_browser.py",
    "test_examples.py",
    "test_encryption_crash.py",
    "test_inspector_figures_browser.py",
    "test_graphiql_browser.py",
    "test_adapter_manglekit.py",
)


# What a long reliability variant may take (the quick tests' bound is pyproject.toml's
# `timeout`); tools/test_passes.sh also bounds each long pass as a whole.
SLOW_TEST_TIMEOUT = 1_200


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """LONG_FIRST's tests first, in its order; the rest as collected. Each long variant
    may take SLOW_TEST_TIMEOUT seconds, unless it says otherwise."""
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT))


# What a pytest process has imported and collected by now (the app, Hypothesis, schemathesis,
# Playwright, every test module) lives until it exits: each full garbage collection walked
# it all again, and the tests' many short-lived objects set one off every few tests. Frozen,
# it is left out of every collection; the young generation is also let grow larger between
# collections. (tests/fork_server.py freezes its heap before it forks servers, likewise.)
GC_THRESHOLDS = (50_000, 20, 100)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Migrated once; each test copies the file instead of migrating again."""
    from graph.settings import Settings
    from graph.store.migrate import upgrade_blocking

    path = tmp_path_factory.mktemp("template") / "template.db"
    upgrade_blocking(Settings(database_url=f"sqlite+aiosqlite:///{path}", secret="t"))
    return path


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str | None]:
    if not PG_URL:
        yield None
        return
    from graph.settings import Settings
    from graph.store.migrate import upgrade_blocking

    name = f"cg_template_{uuid.uuid4().hex[:8]}"
    _pg_admin(f'CREATE DATABASE "{name}"')
    upgrade_blocking(Settings(database_url=_with_db(PG_URL, name), secret="t"))
    yield name
    _pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg_admin(sql: str) -> None:
    """Run one statement outside a transaction (CREATE/DROP DATABASE) on the test server."""
    import asyncio

    from tests.pg_databases import admin

    asyncio.run(admin(PG_URL or "", sql))


def _with_db(url: str, name: str) -> str:
    from tests.pg_databases import database_on

    return database_on(url, name)


@pytest.fixture(scope="session")
def pg_worker_database(pg_template: str | None) -> Iterator[WorkerDatabase | None]:
    """This pytest worker's PostgreSQL database (see tests/pg_databases.py)."""
    if pg_template is None:
        yield None
        return
    from tests.pg_databases import WorkerDatabase

    database = WorkerDatabase(PG_URL or "", pg_template)
    yield database
    database.drop()


@pytest.fixture
def database_url(
    tmp_path: Path, sqlite_template: Path, pg_worker_database: WorkerDatabase | None
) -> Iterator[str]:
    """A migrated database of this test's own: a copy of the SQLite template, or this
    worker's PostgreSQL database, emptied."""
    if pg_worker_database is None:
        path = tmp_path / "convograph.db"
        shutil.copy(sqlite_template, path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    pg_worker_database.reset()
    yield pg_worker_database.database_url


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    from graph.settings import Settings

    return Settings(
        database_url=database_url,
        secret="test-secret",
        sweep_interval_seconds=0,
        **encryption_settings(),
    )


# CONVOGRAPH_TEST_ENCRYPTION=1 runs the tests that take the `settings` fixture with
# encryption at rest on (the at-rest and shredding tests turn it on by themselves).
TEST_ENCRYPTION = os.environ.get("CONVOGRAPH_TEST_ENCRYPTION") == "1"
TEST_MASTER_KEY = "dGVzdC1tYXN0ZXIta2V5LW9mLTMyLWJ5dGVzLWxvbmc="


def encryption_settings() -> dict[str, str]:
    return {"encryption_key": TEST_MASTER_KEY} if TEST_ENCRYPTION else {}


@dataclass
class GraphQLClient:
    http: httpx.AsyncClient
    token: str | None
    # The owner a SERVICE token acts for (the Convograph-Owner header), if any.
    acting_for: str | None = None

    async def post(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        *,
        token: str | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        return await self.http.post(
            "/graphql",
            json={"query": query, "variables": variables or {}},
            headers=self._headers(token),
            **kwargs,
        )

    async def post_body(self, body: bytes) -> httpx.Response:
        """POST `body` as it is: JSON the test wrote itself (malformed, or with bytes spliced
        in that a JSON encoder would not write), with this client's headers."""
        headers = {**self._headers(), "Content-Type": "application/json"}
        return await self.http.post("/graphql", content=body, headers=headers)

    def _headers(self, token: str | None = None) -> dict[str, str]:
        use = token if token is not None else self.token
        headers = {"Authorization": f"Bearer {use}"} if use else {}
        if self.acting_for is not None:
            headers["Convograph-Owner"] = self.acting_for
        return headers

    async def __call__(
        self, query: str, variables: dict[str, Any] | None = None, *, token: str | None = None
    ) -> dict[str, Any]:
        """Run an operation and return `data`, failing on any GraphQL error."""
        response = await self.post(query, variables, token=token)
        assert response.status_code == 200, response.text
        body = response.json()
        assert "errors" not in body, body["errors"]
        return body["data"]

    def as_(self, token: str, *, acting_for: str | None = None) -> GraphQLClient:
        return GraphQLClient(self.http, token, acting_for)


@dataclass
class Server:
    app: Any
    settings: Settings

    @property
    def services(self) -> Services:
        services: Services = self.app.state.services
        return services

    async def token(
        self, workspace: str = "site:1", owner: str = "user:alice", scope: str = "write"
    ) -> str:
        _, token = await self.token_with_id(workspace, owner, scope)
        return token

    async def token_with_id(
        self, workspace: str = "site:1", owner: str = "user:alice", scope: str = "write"
    ) -> tuple[str, str]:
        """A new token and its id, made as the CLI makes them."""
        async with self.services.uow.write(SYSTEM) as repo:
            return await repo.tokens.create(
                workspace=parse_workspace(workspace),
                owner=parse_owner(owner),
                scope_=Scope(scope.upper()),
            )

    async def revoke(self, token_id: str) -> bool:
        async with self.services.uow.write(SYSTEM) as repo:
            return await repo.tokens.revoke(token_id)

    @asynccontextmanager
    async def statements(self, keep: Callable[[str], bool]) -> AsyncIterator[list[str]]:
        """The SQL statements the app runs meanwhile that `keep` accepts."""
        seen: list[str] = []

        def record(statement: str, _parameters: Any) -> None:
            if keep(statement):
                seen.append(statement)

        stop = self.services.db.on_statement(record)
        try:
            yield seen
        finally:
            stop()


@pytest.fixture
async def server(settings: Settings) -> AsyncIterator[Server]:
    from graph.app import create_app

    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield Server(app, settings)


@pytest.fixture
async def anon(server: Server) -> AsyncIterator[GraphQLClient]:
    transport = httpx.ASGITransport(app=server.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        yield GraphQLClient(http, None)


@pytest.fixture
async def gql(server: Server, anon: GraphQLClient) -> GraphQLClient:
    """A client authenticated as a WRITE token of user:alice in workspace site:1."""
    return anon.as_(await server.token())
