"""A PostgreSQL that goes away and comes back: clear errors meanwhile, service after,
without restarting the server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest

from graph.app import create_app
from graph.settings import Settings
from tests.conftest import GraphQLClient, Server
from tests.operations import CREATE
from tests.tcp_proxy import TcpProxy


@pytest.fixture(params=[5.0])
async def proxied(  # type: ignore[no-untyped-def]
    database_url: str, tmp_path, request
) -> AsyncIterator[tuple[TcpProxy, Server]]:
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
        pool_ping_idle_seconds=request.param,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        yield proxy, Server(app, settings)
    await proxy.cut()


@asynccontextmanager
async def clients(server: Server) -> AsyncIterator[tuple[httpx.AsyncClient, GraphQLClient]]:
    token = await server.token()
    transport = httpx.ASGITransport(app=server.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        yield http, GraphQLClient(http, token)


async def test_requests_fail_clearly_while_the_database_is_away_and_recover_after(
    proxied: tuple[TcpProxy, Server],
) -> None:
    proxy, server = proxied
    async with clients(server) as (http, gql):
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


@pytest.mark.parametrize("proxied", [0.3], indirect=True)
async def test_connections_cut_while_idle_are_replaced_before_a_request_gets_them(
    proxied: tuple[TcpProxy, Server],
) -> None:
    # A database restart (or a firewall's idle timeout) while the server had nothing to do:
    # every pooled connection is dead, and no request has failed to say so. The first
    # requests after it must not fail: idle connections are pinged before use.
    proxy, server = proxied
    async with clients(server) as (_http, gql):
        for _ in range(3):
            assert (await gql(CREATE))["createConversation"]["conversation"]["id"]
        await proxy.cut()
        await proxy.start()
        await asyncio.sleep(0.5)  # past pool_ping_idle_seconds
        for _ in range(3):
            answer = await gql.post(CREATE)
            assert answer.status_code == 200, answer.text
            assert answer.json()["data"]["createConversation"]["conversation"]["id"]
