"""convograph in this process: a fresh migrated SQLite file, the real app, a token, a client.

GraphQL goes through httpx's ASGITransport (no sockets), as in tests/conftest.py; the storage
figures use the same services directly, through the unit of work the mutations use
(`services.uow`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette

from graph.api.context import Context
from graph.app import create_app
from graph.domain.principal import SYSTEM, OwnerType, Principal, Scope
from graph.server import heap
from graph.services import Services, build_services
from graph.settings import Settings
from graph.store.migrate import upgrade
from graph.store.repository import Repository


def bench_settings(workdir: Path) -> Settings:
    workdir.mkdir(parents=True, exist_ok=True)
    return Settings(
        database_url=f"sqlite+aiosqlite:///{workdir / 'db.sqlite'}",
        secret="bench",
        sweep_interval_seconds=0,
    )


async def _token(services: Services) -> tuple[str, Principal]:
    async with services.uow.write(SYSTEM) as repo:
        _, token = await repo.tokens.create(
            workspace=("site", "1"), owner=(OwnerType.USER, "bench"), scope_=Scope.WRITE
        )
    principal = await services.uow.authenticate(token)
    assert principal is not None
    return token, principal


def bench_context(services: Services, principal: Principal) -> Context:
    """The GraphQL context a request of `principal` gets (no HTTP request behind it)."""
    return Context(services=services, request_id="bench", principal_=principal)


@dataclass
class Storage:
    """The store as one principal sees it: its units of work."""

    services: Services
    principal: Principal

    def write(self) -> AbstractAsyncContextManager[Repository]:
        return self.services.uow.write(self.principal)

    def read(self) -> AbstractAsyncContextManager[Repository]:
        return self.services.uow.read(self.principal)


@dataclass
class App:
    app: Starlette
    services: Services
    http: httpx.AsyncClient
    principal: Principal

    async def post(self, query: str, variables: dict[str, Any] | None = None) -> httpx.Response:
        return await self.http.post("/graphql", json={"query": query, "variables": variables})

    async def gql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.post(query, variables)
        body = response.json()
        if response.status_code != 200 or body.get("errors"):
            raise RuntimeError(f"HTTP {response.status_code}: {body}")
        for payload in body["data"].values():
            if isinstance(payload, dict) and payload.get("userErrors"):
                raise RuntimeError(f"userErrors: {payload['userErrors']}")
        return body["data"]


@asynccontextmanager
async def app_client(workdir: Path, **changes: Any) -> AsyncIterator[App]:
    """The real Starlette app on a fresh database, with a client holding a WRITE token;
    `changes` are settings over the bench's own."""
    settings = bench_settings(workdir)
    if changes:
        settings = settings.replace(**changes)
    await upgrade(settings)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        heap.settle()  # as `convograph serve` leaves the collector
        services: Services = app.state.services
        token, principal = await _token(services)
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers
        ) as http:
            yield App(app, services, http, principal)


@asynccontextmanager
async def storage(workdir: Path, settings: Settings | None = None) -> AsyncIterator[Storage]:
    """The storage layer without HTTP or GraphQL: the unit of work the resolvers use (on a
    fresh SQLite file in `workdir`, or on the database `settings` name)."""
    settings = settings or bench_settings(workdir)
    await upgrade(settings)
    services = build_services(settings)
    await services.start()
    try:
        _, principal = await _token(services)
        yield Storage(services, principal)
    finally:
        await services.stop()
