"""convograph in this process: a fresh migrated SQLite file, the real app, a token, a client.

GraphQL goes through httpx's ASGITransport (no sockets), as in tests/conftest.py; the storage
figures use the same services directly, with the unit of work the mutations use
(`graph.context.Context.write()`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette

from graph.app import build_services, create_app
from graph.context import Context, Services
from graph.migrate import upgrade
from graph.principal import OwnerType, Principal, Scope
from graph.settings import Settings
from graph.tokens import authenticate, create_token


def bench_settings(workdir: Path) -> Settings:
    workdir.mkdir(parents=True, exist_ok=True)
    return Settings(
        database_url=f"sqlite+aiosqlite:///{workdir / 'db.sqlite'}",
        secret="bench",
        secret_file=str(workdir / "secret"),
        sweep_interval_seconds=0,
        log_level="warning",
    )


async def _token(services: Services) -> tuple[str, Principal]:
    async with services.db.write() as conn:
        _, token = await create_token(
            conn,
            keyring=services.keyring,
            workspace=("site", "1"),
            owner=(OwnerType.USER, "bench"),
            scope=Scope.WRITE,
        )
    async with services.db.read() as conn:
        principal = await authenticate(conn, keyring=services.keyring, token=token)
    assert principal is not None
    return token, principal


def bench_context(services: Services, principal: Principal) -> Context:
    """A Context as a request would get it, with no HTTP request behind it."""
    return Context(
        services=services,
        request=None,  # type: ignore[arg-type]
        response=None,
        request_id="bench",
        principal_=principal,
    )


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
        return body["data"]  # type: ignore[no-any-return]


@asynccontextmanager
async def app_client(workdir: Path) -> AsyncIterator[App]:
    """The real Starlette app on a fresh database, with a client holding a WRITE token."""
    settings = bench_settings(workdir)
    await upgrade(settings)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        services: Services = app.state.services
        token, principal = await _token(services)
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", headers=headers
        ) as http:
            yield App(app, services, http, principal)


@asynccontextmanager
async def storage(workdir: Path) -> AsyncIterator[Context]:
    """The storage layer without HTTP or GraphQL: a Context whose write()/read() are the
    unit of work and the read path the resolvers use."""
    settings = bench_settings(workdir)
    await upgrade(settings)
    services = build_services(settings)
    await services.broker.start()
    try:
        _, principal = await _token(services)
        yield bench_context(services, principal)
    finally:
        await services.broker.stop()
        await services.search_index.stop()
        await services.db.dispose()
