"""A PostgreSQL that goes away and comes back: clear errors meanwhile, service after,
without restarting the server. Its LISTEN connection too: silenced, it is replaced and the
streams catch up; unable to come back, the replica is not ready. A session it ends whose
close comes late behind its last error is a disconnect too, whatever asyncpg raises for it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from httpx_ws import WebSocketUpgradeError

from graph.api.execution import outage_log
from graph.app import create_app
from graph.server import health
from graph.settings import Settings
from graph.store import events_postgres
from graph.store.repository.conversations import Conversations
from tests.conftest import GraphQLClient, Server
from tests.operations import CONVERSATION_EVENTS, CREATE, create, touch
from tests.tcp_proxy import TcpProxy, in_front_of
from tests.ws import connect_app, until_live

# The server's LISTEN connection, as PostgreSQL sees it.
LISTEN = """SELECT pid, client_port FROM pg_stat_activity
  WHERE datname = current_database() AND application_name = 'convograph events'"""


@pytest.fixture(params=[5.0])
async def proxied(  # type: ignore[no-untyped-def]
    database_url: str, tmp_path, request
) -> AsyncIterator[tuple[TcpProxy, Server]]:
    if database_url.startswith("sqlite"):
        pytest.skip("an embedded SQLite file cannot go away: PostgreSQL only")
    proxy, through = await in_front_of(database_url)
    settings = Settings(
        database_url=through,
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
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
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
        assert away.headers["retry-after"] == "1"  # when a client may ask again
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        health = await http.get("/healthz")
        assert health.status_code == 200 and health.json()["database"] == "down"

        await proxy.start()
        back = await gql(CREATE)
        assert back["createConversation"]["conversation"]["id"]
        assert (await http.get("/readyz")).status_code == 200


@pytest.mark.parametrize(
    ("sqlstate", "message"),
    [("53300", "sorry, too many clients already"), ("57P03", "the database system is starting up")],
)
async def test_a_database_refusing_new_sessions_is_unavailable_not_an_internal_error(
    proxied: tuple[TcpProxy, Server], sqlstate: str, message: str
) -> None:
    """PostgreSQL refuses a session when its connection slots are all taken (replicas times pool
    size past max_connections, as an operator who scales out meets it) or while it starts up
    after a restart. Neither message says "connect": a request got 500 INTERNAL ("Unexpected
    error.", which clients do not retry), and a replica started meanwhile exited."""
    proxy, server = proxied
    async with clients(server) as (_, gql):
        assert (await gql(CREATE))["createConversation"]["conversation"]["id"]
        await proxy.refuse_sessions(sqlstate, message)
        refused = await gql.post(CREATE)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["errors"][0]["extensions"]["code"] == "DATABASE_UNAVAILABLE"

        starting = create_app(server.settings)  # another replica, started meanwhile
        async with starting.router.lifespan_context(starting):
            transport = httpx.ASGITransport(app=starting)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
                other = GraphQLClient(http, gql.token)
                assert (await other.post(CREATE)).status_code == 503
                proxy.accept_sessions()
                assert (await other(CREATE))["createConversation"]["conversation"]["id"]
        assert (await gql(CREATE))["createConversation"]["conversation"]["id"]


async def test_a_websocket_whose_token_cannot_be_checked_is_told_to_retry(
    proxied: tuple[TcpProxy, Server],
) -> None:
    """The token's check could not reach the database: the upgrade was closed before it was
    accepted (uvicorn: a bare 403), which a client takes for a bad token and stops."""
    proxy, server = proxied
    async with clients(server) as (_, gql):
        await gql(CREATE)  # served once: the schema gate has settled, the token is asked
        token = gql.token
    await proxy.cut()

    async def as_uvicorn(scope: Any, receive: Any, send: Any) -> None:
        # uvicorn offers ASGI's denial response; httpx-ws's in-process transport does not.
        extensions = {**scope.get("extensions", {}), "websocket.http.response": {}}
        await server.app(scope | {"extensions": extensions}, receive, send)

    with pytest.raises(ExceptionGroup) as denied:  # raised in httpx-ws's task group
        async with connect_app(as_uvicorn, token=token):
            pass
    upgrade = denied.value.subgroup(WebSocketUpgradeError)
    assert upgrade is not None, denied.value
    answer = upgrade.exceptions[0].response  # type: ignore[union-attr]
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "1"
    assert answer.json()["errors"][0]["extensions"]["code"] == "DATABASE_UNAVAILABLE"

    async with connect_app(server.app, token=token) as socket:  # a server without denials
        code, reason = await socket.closed()
    assert code == 1013, reason  # try again later
    assert "database is unavailable" in reason

    async with connect_app(server.app) as socket:  # the token in connection_init (browsers)
        await socket.send_init(token)
        code, reason = await socket.closed()
    assert code == 1013, reason  # not 4403 (a bad token), nor a traceback and 1011
    assert "database is unavailable" in reason

    await proxy.start()
    async with connect_app(server.app, token=token) as socket:
        await socket.init()  # acknowledged: the same token, checked now
    async with connect_app(server.app) as socket:
        await socket.init(token)


@pytest.mark.parametrize("proxied", [0.3], indirect=True)
async def test_connections_cut_while_idle_are_replaced_before_a_request_gets_them(
    proxied: tuple[TcpProxy, Server],
) -> None:
    # A database restart (or a firewall's idle timeout) while the server had nothing to do:
    # every pooled connection is dead, and no request has failed to say so. The first
    # requests after it must not fail: idle connections are pinged before use.
    await _served_after_every_connection_ended(*proxied, idle=0.5)  # past the ping's 0.3 s


async def _served_after_every_connection_ended(
    proxy: TcpProxy, server: Server, *, idle: float
) -> None:
    """Three writes, every connection the server holds cut, `idle` seconds, and three more
    writes: each of those answered 200, none refused."""
    async with clients(server) as (_http, gql):
        for _ in range(3):
            assert (await gql(CREATE))["createConversation"]["conversation"]["id"]
        await proxy.cut()
        await proxy.start()
        await asyncio.sleep(idle)
        for _ in range(3):
            answer = await gql.post(CREATE)
            assert answer.status_code == 200, answer.text
            assert answer.json()["data"]["createConversation"]["conversation"]["id"]


async def _listen_backend(database_url: str) -> asyncpg.Record:
    admin = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        rows = await admin.fetch(LISTEN)
    finally:
        await admin.close()
    assert len(rows) == 1, rows
    return rows[0]


async def test_a_listen_connection_gone_silent_is_replaced_and_its_events_arrive(
    proxied: tuple[TcpProxy, Server], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A firewall that forgets the connection sends no reset: the connection stays open and
    # silent, and without a ping every event would wait for TCP's keepalive (hours).
    monkeypatch.setattr(events_postgres, "PING_SECONDS", 0.3)
    monkeypatch.setattr(events_postgres, "PING_TIMEOUT_SECONDS", 0.5)
    proxy, server = proxied
    async with clients(server) as (http, gql):
        root = await create(gql)
        async with connect_app(server.app) as socket:
            await socket.init(gql.token)
            await socket.subscribe(CONVERSATION_EVENTS, {"id": root})
            await until_live(socket, gql, root)
            silenced = await _listen_backend(database_url)
            proxy.silence(silenced["client_port"])
            written = [await touch(gql, root) for _ in range(3)]
            got = [(await socket.event(within=15))["version"] for _ in written]
            assert got == written
            assert (await _listen_backend(database_url))["pid"] != silenced["pid"]
            metrics = (await http.get("/metrics")).text
            assert "convograph_event_listener_up 1.0" in metrics
            assert "convograph_event_listener_connections_lost_total 1.0" in metrics


async def test_a_listen_connection_gone_silent_while_it_is_set_up_is_replaced_too(
    proxied: tuple[TcpProxy, Server], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events_postgres, "PING_TIMEOUT_SECONDS", 0.5)
    proxy, server = proxied
    async with clients(server) as (http, gql):
        root = await create(gql)
        proxy.silence_when(b"LISTEN")  # the next LISTEN's connection, once it sends it
        admin = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            await admin.execute(LISTEN.replace("pid, client_port", "pg_terminate_backend(pid)"))
        finally:
            await admin.close()
        async with connect_app(server.app) as socket:
            await socket.init(gql.token)
            await socket.subscribe(CONVERSATION_EVENTS, {"id": root})
            # Without a bound on the set-up this waited for TCP (minutes): nothing arrived.
            event = await socket.wait_until_live(
                lambda: touch(gql, root),
                lambda version, event: event["version"] == version,
                within=1.0,
                attempts=15,
            )
            assert event["conversationId"] == root
        assert (await http.get("/healthz")).json()["events"] == "listening"
    # The backend that went silent as it began to listen was ended, not left holding back
    # PostgreSQL's notification queue: one listener is left.
    await _listen_backend(database_url)


async def test_a_replica_that_cannot_listen_is_not_ready_until_it_listens_again(
    proxied: tuple[TcpProxy, Server], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "LISTENER_GRACE_SECONDS", 0.5)
    proxy, server = proxied
    async with clients(server) as (http, gql):
        root = await create(gql)
        assert (await http.get("/healthz")).json()["events"] == "listening"
        await proxy.refuse_new()  # the open connections go on; a new LISTEN cannot connect
        admin = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            await admin.execute(LISTEN.replace("pid, client_port", "pg_terminate_backend(pid)"))
        finally:
            await admin.close()
        await asyncio.sleep(1.0)
        ready = await http.get("/readyz")
        assert ready.status_code == 503, ready.text
        assert "event listener" in ready.json()["status"]
        assert (await http.get("/healthz")).json()["events"] == "down"
        assert "convograph_event_listener_up 0.0" in (await http.get("/metrics")).text
        await touch(gql, root)  # requests still work over the open connections

        await proxy.start()
        for _ in range(50):
            if (await http.get("/readyz")).status_code == 200:
                break
            await asyncio.sleep(0.1)
        assert (await http.get("/readyz")).status_code == 200
        assert (await http.get("/healthz")).json()["events"] == "listening"


async def test_connections_the_database_ended_just_after_use_cost_no_request(
    proxied: tuple[TcpProxy, Server],
) -> None:
    # A failover or a pooler's restart ends every connection while requests come and go: a
    # connection used a moment ago is not pinged (only idle ones are), and its first
    # statement finds it dead. That statement is the token's lookup, a read: asked again on
    # a new connection, the request is served instead of refused.
    await _served_after_every_connection_ended(*proxied, idle=0.0)


# -- a session the database ended, its close late behind its last error ---------------------

# The server's pool connections (not its LISTEN connection) that come through `proxy`.
POOL_BACKENDS = """SELECT pid FROM pg_stat_activity
  WHERE client_port = ANY($1::int[]) AND application_name <> 'convograph events'"""


async def _end_pool_sessions(proxy: TcpProxy, database_url: str) -> None:
    """End every session of the server's pool, as pg_terminate_backend (a failover, an
    idle_in_transaction_session_timeout) does: PostgreSQL sends a FATAL error and closes.
    The proxy passes the error on and holds the close back; returns once the error is sent."""
    proxy.close_late(0.5)
    admin = await asyncpg.connect(database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        pids = [r["pid"] for r in await admin.fetch(POOL_BACKENDS, list(proxy.upstream_ports))]
        assert pids
        closed = proxy.closed_late
        await admin.execute("SELECT pg_terminate_backend(p) FROM unnest($1::int[]) p", pids)
    finally:
        await admin.close()
    for _ in range(200):
        if proxy.closed_late - closed >= len(pids):
            break
        await asyncio.sleep(0.01)
    assert proxy.closed_late - closed >= len(pids), "a session did not end"
    await asyncio.sleep(0.1)  # the error read by the driver, the close still held back


def _driver_errors(server: Server) -> list[str]:
    """The driver errors of the statements that fail from now on, by type name."""
    seen: list[str] = []
    server.services.db.error_listeners.append(
        lambda error, _disconnect: seen.append(type(getattr(error, "orig", error)).__name__)
    )
    return seen


async def test_a_statement_on_a_session_ended_before_its_close_arrived_is_asked_again(
    proxied: tuple[TcpProxy, Server], database_url: str
) -> None:
    # asyncpg has read the FATAL error but not the close: the next statement fails with an
    # InternalClientError ("cannot switch to state 12; another operation (2) is in
    # progress", 11 or 15 for another kind of statement), not a ConnectionDoesNotExistError.
    # asyncpg aborts the connection as it raises it, so it is a disconnect: the token lookup
    # (a request's first statement) is asked again on a new connection, and it is served.
    proxy, server = proxied
    async with clients(server) as (_http, gql):
        assert (await gql(CREATE))["createConversation"]["conversation"]["id"]
        seen = _driver_errors(server)
        await _end_pool_sessions(proxy, database_url)
        answer = await gql.post(CREATE)
        assert answer.status_code == 200, answer.text
        assert answer.json()["data"]["createConversation"]["conversation"]["id"]
    assert "InternalClientError" in seen, seen


async def test_a_session_ended_mid_query_before_its_close_arrived_is_database_unavailable(
    proxied: tuple[TcpProxy, Server], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session ends between two statements of a query's read transaction: its answer
    # says DATABASE_UNAVAILABLE (retry), not INTERNAL, and the connection is not used again.
    proxy, server = proxied
    async with clients(server) as (_http, gql):
        cid = await create(gql)
        seen = _driver_errors(server)
        get_many = Conversations.get_many
        ended = False

        async def then_end(self: Conversations, given: Sequence[str]) -> Any:
            nonlocal ended
            found = await get_many(self, given)
            if not ended:
                ended = True
                await _end_pool_sessions(proxy, database_url)
            return found

        monkeypatch.setattr(Conversations, "get_many", then_end)
        read = "query($id: ID!) { conversation(id: $id) { id transcript } }"
        cut = (await gql.post(read, {"id": cid})).json()
        assert [e["extensions"]["code"] for e in cut["errors"]] == ["DATABASE_UNAVAILABLE"], cut
        assert "InternalClientError" in seen, seen
        again = await gql(read, {"id": cid})
        assert again["conversation"] == {"id": cid, "transcript": []}


async def test_an_outage_is_logged_in_a_line_now_and_then_not_a_traceback_per_request(
    proxied: tuple[TcpProxy, Server],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every request that failed on the database logged an ERROR with its whole traceback:
    under load, hundreds a second, burying the rest of the log."""
    monkeypatch.setattr(outage_log, "_outage", outage_log._Outage())  # this test's own
    proxy, server = proxied
    async with clients(server) as (_, gql):
        await create(gql)
        await proxy.cut()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="convograph"):
            # Each refused before GraphQL runs: its token cannot be checked.
            statuses = [(await gql.post(CREATE)).status_code for _ in range(12)]
        await proxy.start()
    assert set(statuses) == {503}, statuses
    # The access log's line per request (at ERROR for a 5xx) is the access log's business.
    mine = [
        r
        for r in caplog.records
        if r.name.startswith("convograph") and r.name != "convograph.access"
    ]
    assert not [r for r in mine if r.exc_info or r.levelno >= logging.ERROR], [
        (r.name, r.getMessage()) for r in mine
    ]
    noted = [r.getMessage() for r in mine if "database is unavailable" in r.getMessage()]
    assert len(noted) == 1, noted
    assert "request " in noted[0]


async def test_a_table_locked_past_the_statement_timeout_is_database_unavailable(
    settings: Settings,
) -> None:
    """Another session holds a table the request needs (`LOCK TABLE … IN ACCESS EXCLUSIVE
    MODE`): once PostgreSQL's statement_timeout cancels the wait, the client was told
    INTERNAL, "Unexpected error", as if the server were broken. It is the database's being
    busy: DATABASE_UNAVAILABLE, retry."""
    if settings.is_sqlite:
        pytest.skip("PostgreSQL's statement_timeout (SQLite's busy timeout: test_sqlite_lock)")
    from tests.test_http import serving

    async with serving(settings.replace(statement_timeout_seconds=1)) as (server, http):
        client = GraphQLClient(http, await server.token())
        await create(client)
        locker = await asyncpg.connect(settings.asyncpg_dsn)
        try:
            async with locker.transaction():
                await locker.execute("LOCK TABLE conversation IN ACCESS EXCLUSIVE MODE")
                response = await client.post(CREATE, {"title": "while locked"})
        finally:
            await locker.close()
        body = response.json()
        assert [e["extensions"]["code"] for e in body["errors"]] == ["DATABASE_UNAVAILABLE"], body
        # Served again once the lock is gone.
        await create(client)
