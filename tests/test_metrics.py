"""/metrics: Prometheus text with what an operator watches (operations by name and outcome,
latency, user errors by code, live subscriptions, pool use, database errors), open on
loopback and behind an ADMIN token from anywhere else, as the settings say."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from graph.app import create_app
from graph.server.metrics import MAX_OPERATION_NAMES
from graph.settings import Settings, SettingsError
from tests.conftest import GraphQLClient, Server
from tests.http_clients import http_client
from tests.operations import WATCH
from tests.tcp_proxy import in_front_of
from tests.ws import session

if TYPE_CHECKING:
    from tests.live_server import LiveServer

pytest_plugins = ["tests.live_server"]

VIEWER = "query Me { viewer { workspace { key } } }"
MISSING = str(uuid.UUID(int=1))
APPEND = """mutation Append($id: ID!) {
  appendMessages(input: {conversationId: $id, messages: [{role: "user", content: "hi"}]}) {
    conversation { id } userErrors { code field } } }"""
# The same failure, with the userErrors aliased, selected directly and again in a fragment.
APPEND_ALIASED = """mutation AppendAliased($id: ID!) {
  first: appendMessages(input: {conversationId: $id, messages: [{role: "user"}]}) {
    problems: userErrors { what: code } ...Problems }
}
fragment Problems on AppendMessagesPayload { problems: userErrors { what: code } }"""
CREATE = """mutation Create { createConversation(input: {title: "t"}) {
  conversation { id } userErrors { code } } }"""

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 when the series does not exist (yet)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(http: httpx.AsyncClient, **headers: str) -> Samples:
    response = await http.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse(response.text)


# -- what is counted -----------------------------------------------------------


async def test_operations_are_counted_by_name_type_and_outcome(gql: GraphQLClient) -> None:
    for _ in range(2):
        assert (await gql(VIEWER))["viewer"]["workspace"]["key"] == "site:1"
    refused = await gql(APPEND, {"id": MISSING})
    assert refused["appendMessages"]["userErrors"][0]["code"] == "NOT_FOUND"
    assert (await gql(CREATE))["createConversation"]["userErrors"] == []
    invalid = (await gql.post("query Broken { nope }")).json()
    assert invalid["errors"]

    samples = await scrape(gql.http)
    ops = "convograph_graphql_operations_total"
    assert value(samples, ops, operation="Me", type="query", outcome="ok") == 2
    assert value(samples, ops, operation="Append", type="mutation", outcome="user_error") == 1
    assert value(samples, ops, operation="Create", type="mutation", outcome="ok") == 1
    assert value(samples, ops, operation="Broken", type="query", outcome="user_error") == 1
    errors = "convograph_graphql_user_errors_total"
    assert value(samples, errors, code="NOT_FOUND") == 1
    assert value(samples, errors, code="GRAPHQL_VALIDATION_FAILED") == 1
    latency = "convograph_graphql_operation_duration_seconds"
    assert value(samples, f"{latency}_count", operation="Me", type="query") == 2
    assert value(samples, f"{latency}_sum", operation="Me", type="query") > 0
    assert value(samples, f"{latency}_bucket", operation="Me", type="query", le="+Inf") == 2


async def test_user_errors_are_counted_however_the_client_selected_them(
    gql: GraphQLClient,
) -> None:
    data = await gql(APPEND_ALIASED, {"id": MISSING})
    assert data["first"]["problems"] == [{"what": "NOT_FOUND"}]

    samples = await scrape(gql.http)
    assert value(samples, "convograph_graphql_user_errors_total", code="NOT_FOUND") == 1
    assert (
        value(
            samples,
            "convograph_graphql_operations_total",
            operation="AppendAliased",
            type="mutation",
            outcome="user_error",
        )
        == 1
    )


async def test_http_requests_are_counted_by_route_and_status(gql: GraphQLClient) -> None:
    assert (await gql.post(VIEWER, token="cvg_not_a_token")).status_code == 401
    assert (await gql.http.get("/healthz")).status_code == 200

    samples = await scrape(gql.http)
    requests = "convograph_http_requests_total"
    assert value(samples, requests, route="/graphql", method="POST", status="401") == 1
    assert value(samples, requests, route="/healthz", method="GET", status="200") == 1
    assert value(samples, "convograph_http_request_duration_seconds_count", route="/healthz") == 1


async def test_pool_use_is_reported_per_pool(server: Server, anon: GraphQLClient) -> None:
    db = server.services.db
    pools = ["writer", "reader"] if server.settings.is_sqlite else ["shared"]
    idle = await scrape(anon.http)
    for pool in pools:
        assert value(idle, "convograph_db_pool_checked_out", pool=pool) == 0
    assert value(idle, "convograph_db_pool_size", pool=pools[-1]) == server.settings.pool_size

    async with db.read():
        busy = await scrape(anon.http)
    assert value(busy, "convograph_db_pool_checked_out", pool=pools[-1]) == 1


async def test_operation_names_past_the_cap_count_as_other(gql: GraphQLClient) -> None:
    for i in range(MAX_OPERATION_NAMES + 3):
        await gql(f"query Q{i} {{ viewer {{ ownerType }} }}")

    samples = await scrape(gql.http)
    ops = "convograph_graphql_operations_total"
    assert value(samples, ops, operation="Q0", type="query", outcome="ok") == 1
    assert value(samples, ops, operation="other", type="query", outcome="ok") == 3


# -- who may read it -----------------------------------------------------------

ClientFactory = Callable[..., AbstractAsyncContextManager[tuple[httpx.AsyncClient, Server]]]


@pytest.fixture
def metrics_client(settings: Settings) -> ClientFactory:
    """An app with `metrics=mode`, and an HTTP client that connects from `client_ip`."""

    @asynccontextmanager
    async def make(
        mode: str, client_ip: str = "127.0.0.1"
    ) -> AsyncIterator[tuple[httpx.AsyncClient, Server]]:
        app = create_app(settings.replace(metrics=mode))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, client=(client_ip, 40000))
            base = "http://127.0.0.1:8000"  # the Host a scraper on this machine sends
            async with httpx.AsyncClient(transport=transport, base_url=base) as http:
                yield http, Server(app, settings)

    return make


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("client_ip", ["127.0.0.1", "::1"])
async def test_loopback_reads_metrics_without_a_token(
    metrics_client: ClientFactory, client_ip: str
) -> None:
    async with metrics_client("loopback", client_ip) as (http, _):
        response = await http.get("/metrics")
        assert response.status_code == 200
        assert "convograph_graphql_active_subscriptions 0.0" in response.text


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("localhost:8000", 200),
        ("LOCALHOST.", 200),
        ("localhost.localdomain:9000", 200),
        ("ip6-localhost", 200),
        (f"{socket.gethostname()}:8000", 200),  # a scraper on this machine, by its name
        ("[::1]:8000", 200),
        ("127.0.0.2", 200),
        ("rebind.example:8000", 401),
        ("0.0.0.0:8000", 401),
    ],
)
async def test_loopback_is_open_only_to_a_host_that_names_loopback(
    metrics_client: ClientFactory, host: str, status: int
) -> None:
    """A page of another site whose name was pointed at 127.0.0.1 (DNS rebinding) reaches the
    server from loopback, its Host that site's: it read the metrics without a token."""
    async with metrics_client("loopback") as (http, _):
        response = await http.get("/metrics", headers={"Host": host})
        assert response.status_code == status, response.text
        assert ("convograph_" in response.text) == (status == 200)


async def test_other_addresses_need_an_admin_token(metrics_client: ClientFactory) -> None:
    async with metrics_client("loopback", "203.0.113.9") as (http, server):
        anonymous = await http.get("/metrics")
        assert anonymous.status_code == 401
        assert "convograph_" not in anonymous.text
        writer = await http.get("/metrics", headers=bearer(await server.token(scope="write")))
        assert writer.status_code == 403
        assert "convograph_" not in writer.text
        admin = await http.get("/metrics", headers=bearer(await server.token(scope="admin")))
        assert admin.status_code == 200
        assert "convograph_http_requests_total" in admin.text


async def test_token_mode_asks_loopback_for_a_token_too(metrics_client: ClientFactory) -> None:
    async with metrics_client("token") as (http, server):
        assert (await http.get("/metrics")).status_code == 401
        admin = await http.get("/metrics", headers=bearer(await server.token(scope="admin")))
        assert admin.status_code == 200


async def test_open_and_closed_modes(metrics_client: ClientFactory) -> None:
    async with metrics_client("open", "203.0.113.9") as (http, _):
        assert (await http.get("/metrics")).status_code == 200
    async with metrics_client("closed") as (http, server):
        admin = await http.get("/metrics", headers=bearer(await server.token(scope="admin")))
        assert admin.status_code == 404


@pytest.mark.parametrize(("mode", "status"), [("open", 200), ("loopback", 200), ("closed", 404)])
async def test_the_mode_decides_before_any_token_is_looked_up(
    metrics_client: ClientFactory, mode: str, status: int
) -> None:
    """A scraper's stale token does not turn an open or loopback scrape into a refusal,
    nor a closed one into a 401; nor, as no token is looked up, does the database that
    holds the tokens being away."""
    async with metrics_client(mode) as (http, _):
        stale = await http.get("/metrics", headers=bearer("cvg_not-a-token"))
        assert stale.status_code == status


def test_an_unknown_mode_is_refused_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVOGRAPH_METRICS", "public")
    with pytest.raises(SettingsError, match="CONVOGRAPH_METRICS"):
        Settings.from_env()


# -- a real server: subscriptions, database errors ---------------------------------


async def live_samples(server: LiveServer) -> Samples:
    async with http_client(base_url=server.base_url, timeout=10) as http:
        return await scrape(http)


async def wait_for_gauge(server: LiveServer, expected: float) -> Samples:
    for _ in range(100):
        samples = await live_samples(server)
        if value(samples, "convograph_graphql_active_subscriptions") == expected:
            return samples
        await asyncio.sleep(0.05)
    raise AssertionError(f"active subscriptions never reached {expected}")


async def test_active_subscriptions_rise_and_fall(live_server: LiveServer) -> None:
    token = await live_server.token()
    async with live_server.client(token) as gql:
        created = await gql(CREATE)
    conversation_id = created["createConversation"]["conversation"]["id"]

    variables = {"id": conversation_id}
    async with session(live_server, token) as socket:
        await socket.subscribe(WATCH, variables)
        await wait_for_gauge(live_server, 1)
        await socket.complete()
        await wait_for_gauge(live_server, 0)

        # Two at once, then the client goes away without completing them.
        await socket.subscribe(WATCH, variables, op="2")
        await socket.subscribe(WATCH, variables, op="3")
        await wait_for_gauge(live_server, 2)
    samples = await wait_for_gauge(live_server, 0)

    ops = "convograph_graphql_operations_total"
    assert value(samples, ops, operation="Watch", type="subscription", outcome="ok") == 3


async def test_database_errors_are_counted_while_postgresql_is_away(
    database_url: str, settings: Settings
) -> None:
    if database_url.startswith("sqlite"):
        pytest.skip("an embedded SQLite file cannot go away: PostgreSQL only")
    proxy, through = await in_front_of(database_url)
    proxied = settings.replace(
        database_url=through,
        pool_timeout_seconds=2,
    )
    app = create_app(proxied)
    try:
        async with app.router.lifespan_context(app):
            token = await Server(app, proxied).token()
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                gql = GraphQLClient(http, token)
                assert (await gql(CREATE))["createConversation"]["userErrors"] == []
                before = await scrape(http)

                await proxy.cut()
                assert (await gql.post(CREATE)).status_code == 503
                during = await scrape(http)
                await proxy.start()
    finally:
        await proxy.cut()

    def errors(samples: Samples) -> float:
        return sum(
            v
            for (name, labels), v in samples.items()
            if name == "convograph_db_errors_total" and ("backend", "postgresql") in labels
        )

    assert errors(during) > errors(before)
    assert (
        value(
            during, "convograph_http_requests_total", route="/graphql", method="POST", status="503"
        )
        == 1
    )
