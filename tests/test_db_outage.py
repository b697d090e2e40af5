"""A PostgreSQL that goes away and comes back: clear errors meanwhile, service after,
without restarting the server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from graph.app import create_app
from graph.settings import Settings
from tests.conftest import GraphQLClient, Server
from tests.operations import CREATE
from tests.tcp_proxy import TcpProxy


@pytest.fixture
async def proxied(database_url: str, tmp_path) -> AsyncIterator[tuple[TcpProxy, Server]]:  # type: ignore[no-untyped-def]
    if database_url.startswith("sqlite"):
        pytest.skip("an embedded SQLite file cannot go away: PostgreSQL only")
    parts = urlsplit(database_url)
    proxy = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    netloc = (
        f"{parts.username}@127.0.0.1:{proxy.port}"
        if parts.username
        else (f"127.0.0.1:{proxy.port}")
    )
    settings = Settings(
        database_url=urlunsplit(parts._replace(netloc=netloc)),
        secret="test-secret",
        sweep_interval_seconds=0,
        pool_timeout_seconds=2,
        statement_timeout_seconds=5,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield proxy, Server(app, settings)
    await proxy.cut()


async def test_requests_fail_clearly_while_the_database_is_away_and_recover_after(
    proxied: tuple[TcpProxy, Server],
) -> None:
    proxy, server = proxied
    token = await server.token()
    transport = httpx.ASGITransport(app=server.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        gql = GraphQLClient(http, token)
        assert (await gql(CREATE))["createConversation"]["conversation"]["id"]

        await proxy.cut()
        away = await gql.post(CREATE)
        assert away.status_code == 503, away.text
        assert "database" in away.text.lower() and "Traceback" not in away.text
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        health = await http.get("/healthz")
        assert health.status_code == 200 and health.json()["database"] == "down"

        await proxy.start()
        back = await gql(CREATE)
        assert back["createConversation"]["conversation"]["id"]
        assert (await http.get("/readyz")).status_code == 200
