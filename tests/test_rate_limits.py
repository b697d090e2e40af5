"""Per-token rate limits and the cap on subscriptions per token, against a real server.

Each test starts a server process with the settings it needs (CONVOGRAPH_RATE_LIMIT_*,
CONVOGRAPH_MAX_SUBSCRIPTIONS_PER_TOKEN) over its own database (SQLite, or PostgreSQL under
CONVOGRAPH_TEST_DATABASE_URL) and talks GraphQL over HTTP and graphql-transport-ws to it.
Where a test needs a bucket that does not refill while it runs, the rate is 0.01 per second:
then of any number of requests sent at once exactly `burst` get through, however slow the
machine. Only the refill test depends on time, and it bounds its counts by the time it
measured.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import websockets

from graph.settings import Settings, SettingsError
from tests.http_clients import http_client
from tests.operations import CONVERSATION_EVENTS, CREATE, DELETE, TOUCH, VIEWER
from tests.ws import RECEIVE_TIMEOUT, Session, session

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

RATE = "CONVOGRAPH_RATE_LIMIT_PER_SECOND"
BURST = "CONVOGRAPH_RATE_LIMIT_BURST"
CAP = "CONVOGRAPH_MAX_SUBSCRIPTIONS_PER_TOKEN"
# A bucket that gains one request every 100 s: nothing refills during a test.
NO_REFILL = "0.01"

TITLES = "{ conversations(first: 100) { nodes { title } } }"
CAP_REASON = "too many subscriptions for this token (limit {})"
# Strawberry's default for the operations one WebSocket runs at once.
PER_SOCKET = 100
PER_SOCKET_REASON = "too many operations on this WebSocket (limit {}): open another one"


# -- HTTP ------------------------------------------------------------------------------------


@asynccontextmanager
async def http(server: LiveServer) -> AsyncIterator[httpx.AsyncClient]:
    async with http_client(base_url=server.base_url, timeout=30) as client:
        yield client


def bearer(token: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


async def post(
    client: httpx.AsyncClient,
    token: str,
    query: str = VIEWER,
    variables: dict[str, Any] | None = None,
    *,
    acting_for: str | None = None,
) -> httpx.Response:
    headers = bearer(token)
    if acting_for is not None:
        headers["Convograph-Owner"] = acting_for
    return await client.post(
        "/graphql", json={"query": query, "variables": variables or {}}, headers=headers
    )


async def data(client: httpx.AsyncClient, token: str, query: str, **variables: Any) -> Any:
    response = await post(client, token, query, variables)
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    return body["data"]


async def new_conversation(client: httpx.AsyncClient, token: str, title: str) -> str:
    created = (await data(client, token, CREATE, title=title))["createConversation"]
    assert created["userErrors"] == []
    return str(created["conversation"]["id"])


async def statuses(responses: Iterable[Any]) -> list[int]:
    return [r.status_code for r in await asyncio.gather(*responses)]


def rate_limited_error(rate: str, burst: int, seconds: int) -> dict[str, Any]:
    """The error a refused request gets, in full."""
    return {
        "message": (
            f"rate limit exceeded for this token: {rate} requests per second, burst {burst}; "
            f"retry after {seconds} s"
        ),
        "extensions": {"code": "RATE_LIMITED", "retryAfterSeconds": seconds},
    }


async def metric(client: httpx.AsyncClient, name: str) -> float:
    """One sample of /metrics (open from loopback)."""
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    found = re.search(rf"^{name} (\S+)$", response.text, re.MULTILINE)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


async def start(live_servers: LiveServers, database_url: str, **env: str) -> LiveServer:
    return await live_servers.start(database_url, env=env)


# -- WebSockets ------------------------------------------------------------------------------


async def subscribe(socket: Session, op: str, cid: str, query: str = CONVERSATION_EVENTS) -> None:
    await socket.subscribe(query, {"id": cid}, op=op)


async def all_live(
    client: httpx.AsyncClient, writer: str, cid: str, streams: dict[Session, set[str]]
) -> None:
    """Write to `cid` until every operation in `streams` (socket -> ids) delivered the same
    event: then each of them is registered and streaming."""
    for _ in range(30):
        version = (await data(client, writer, TOUCH, id=cid))["updateConversation"]
        version = version["conversation"]["version"]
        waiting = {socket: set(ops) for socket, ops in streams.items()}
        try:
            for socket, ops in waiting.items():
                while ops:
                    message = await socket.receive(within=0.5)
                    assert message["type"] == "next", message
                    event = message["payload"]["data"]["conversationEvents"]
                    if event["version"] == version:
                        ops.discard(message["id"])
            return
        except TimeoutError:
            continue
    raise AssertionError(f"not every subscription delivered: {waiting}")


async def ended(socket: Session, op: str) -> list[dict[str, Any]]:
    """The messages of operation `op` until the server ends it (`complete` or `error`)."""
    received = []
    while True:
        message = await socket.receive()
        if message.get("id") != op:
            continue
        received.append(message)
        if message["type"] in ("complete", "error"):
            return received


# -- off by default --------------------------------------------------------------------------


async def test_nothing_is_limited_without_the_settings(live_server: LiveServer) -> None:
    token = await live_server.token()
    async with http(live_server) as client:
        assert set(await statuses(post(client, token) for _ in range(60))) == {200}
        cid = await new_conversation(client, token, "t")
        async with session(live_server, token) as socket:
            ops = {str(n) for n in range(8)}
            for op in sorted(ops):
                await subscribe(socket, op, cid)
            await all_live(client, token, cid, {socket: ops})
        assert await metric(client, "convograph_rate_limit_refusals_total") == 0
        assert await metric(client, "convograph_subscription_cap_refusals_total") == 0


# -- the rate limit over HTTP ----------------------------------------------------------------


async def test_over_the_rate_a_request_is_429_with_retry_after_and_a_json_body(
    live_servers: LiveServers, database_url: str
) -> None:
    server = await start(live_servers, database_url, **{RATE: NO_REFILL, BURST: "3"})
    token = await server.token()
    async with http(server) as client:
        # Refused before the limit: not counted against any bucket.
        anonymous = await client.post("/graphql", json={"query": VIEWER})
        unknown = await post(client, "cvg_no-such-token")
        assert (anonymous.status_code, unknown.status_code) == (401, 401)

        assert await statuses(post(client, token) for _ in range(3)) == [200, 200, 200]
        refused = await post(client, token)
        assert refused.status_code == 429, refused.text
        seconds = int(refused.headers["retry-after"])
        # One request comes back every 100 s; the last one went a moment ago.
        assert 90 <= seconds <= 100
        assert refused.headers["content-type"] == "application/json"
        assert refused.json() == {"errors": [rate_limited_error(NO_REFILL, 3, seconds)]}

        # GET is limited alike, and answers in the media type asked for.
        got = await client.get(
            "/graphql",
            params={"query": VIEWER},
            headers=bearer(token, Accept="application/graphql-response+json"),
        )
        assert got.status_code == 429
        assert got.headers["content-type"].startswith("application/graphql-response+json")
        assert got.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"

        # What is not an operation is not limited, even with the spent token.
        for path, accept in [
            ("/healthz", "*/*"),
            ("/readyz", "*/*"),
            ("/metrics", "*/*"),
            ("/graphql", "text/html"),  # GraphiQL
            ("/ui", "text/html"),
        ]:
            page = await client.get(path, headers=bearer(token, Accept=accept))
            assert page.status_code == 200, (path, page.status_code)
        assert await metric(client, "convograph_rate_limit_refusals_total") == 2


async def test_a_refused_mutation_writes_nothing(
    live_servers: LiveServers, database_url: str
) -> None:
    # No burst set: twice the rate rounded up, so 1 here.
    server = await start(live_servers, database_url, **{RATE: NO_REFILL})
    spent, reader = await server.token(label="spent"), await server.token(label="reader")
    async with http(server) as client:
        assert (await data(client, spent, CREATE, title="kept"))["createConversation"][
            "userErrors"
        ] == []
        refused = await post(client, spent, CREATE, {"title": "refused"})
        assert refused.status_code == 429
        (error,) = refused.json()["errors"]
        assert error == rate_limited_error(NO_REFILL, 1, int(refused.headers["retry-after"]))
        # The same owner's other token has a bucket of its own, and sees one conversation.
        titles = (await data(client, reader, TITLES))["conversations"]["nodes"]
    assert titles == [{"title": "kept"}]


async def test_of_many_requests_at_once_exactly_the_burst_gets_through(
    live_servers: LiveServers, database_url: str
) -> None:
    server = await start(live_servers, database_url, **{RATE: NO_REFILL, BURST: "10"})
    first, second = await server.token(label="first"), await server.token(label="second")
    service = await server.token(owner="system:app", scope="service", label="service")
    async with http(server) as client:
        sent = [post(client, token) for _ in range(50) for token in (first, second)]
        # A SERVICE token has one bucket, whichever owner it acts for.
        sent += [post(client, service, acting_for=f"user:u{n}") for n in range(50)]
        answered = await statuses(sent)
        assert set(answered) == {200, 429}
        assert answered[0:100:2].count(200) == 10  # first
        assert answered[1:100:2].count(200) == 10  # second
        assert answered[100:].count(200) == 10  # service
        assert await metric(client, "convograph_rate_limit_refusals_total") == 120


async def test_the_bucket_refills_at_the_rate(live_servers: LiveServers, database_url: str) -> None:
    rate, burst = 4.0, 4
    server = await start(live_servers, database_url, **{RATE: str(rate), BURST: str(burst)})
    token = await server.token()
    async with http(server) as client:
        for _ in range(2):
            started = time.perf_counter()
            answered = await statuses(post(client, token) for _ in range(40))
            took = time.perf_counter() - started
            # A full bucket, plus what flowed in while the requests were being answered.
            assert burst <= answered.count(200) <= burst + rate * took + 1, (answered, took)
            assert answered.count(200) + answered.count(429) == 40
            # Empty now; full again after burst / rate = 1 s.
            await asyncio.sleep(1.5)
        answers = await asyncio.gather(*(post(client, token) for _ in range(20)))
        waits = {r.headers["retry-after"] for r in answers if r.status_code == 429}
    assert waits <= {"1"}  # less than a second to wait, said in whole seconds


# -- the rate limit over WebSockets ----------------------------------------------------------


async def test_an_operation_over_a_websocket_is_charged_to_the_token_too(
    live_servers: LiveServers, database_url: str
) -> None:
    server = await start(live_servers, database_url, **{RATE: NO_REFILL, BURST: "2"})
    watcher, writer = await server.token(label="watcher"), await server.token(label="writer")
    async with http(server) as client:
        cid = await new_conversation(client, writer, "t")
        async with session(server, watcher) as socket:
            await subscribe(socket, "1", cid)
            await subscribe(socket, "2", cid)
            await subscribe(socket, "3", cid)
            (refused,) = await ended(socket, "3")
            # The socket stays open, and the two operations within the limit stream on.
            await all_live(client, writer, cid, {socket: {"1", "2"}})
        spent = await post(client, watcher)
    assert refused["type"] == "error"
    (error,) = refused["payload"]
    assert error == rate_limited_error(NO_REFILL, 2, error["extensions"]["retryAfterSeconds"])
    assert 90 <= error["extensions"]["retryAfterSeconds"] <= 100
    assert spent.status_code == 429  # one bucket for HTTP and WebSockets


# -- the cap on subscriptions ----------------------------------------------------------------


async def test_the_cap_counts_a_tokens_subscriptions_over_all_its_sockets(
    live_servers: LiveServers, database_url: str
) -> None:
    server = await start(live_servers, database_url, **{CAP: "3"})
    capped, other = await server.token(label="capped"), await server.token(label="other")
    async with http(server) as client:
        cid = await new_conversation(client, other, "t")
        async with session(server, capped) as a, session(server, capped) as b:
            await subscribe(a, "1", cid)
            await subscribe(a, "2", cid)
            await subscribe(b, "1", cid)
            await all_live(client, other, cid, {a: {"1", "2"}, b: {"1"}})

            async with session(server, capped) as c:
                await subscribe(c, "1", cid)
                assert await ended(c, "1") == [over_the_cap("1", 3)]
            # One too many on a socket that streams already: that operation is refused, the
            # socket and its operations go on (a close would have ended them all, and
            # graphql-ws clients do not reconnect after 4429).
            await subscribe(a, "4", cid)
            assert await ended(a, "4") == [over_the_cap("4", 3)]
            # Another token is not held back by this one's subscriptions.
            async with session(server, other) as d:
                await subscribe(d, "1", cid)
                await all_live(client, other, cid, {d: {"1"}})
            # Those that were under the cap stream on.
            await all_live(client, other, cid, {a: {"1", "2"}, b: {"1"}})

            # The client's `complete` gives its slot back at once: a `subscribe` right after
            # it on the same socket fits.
            await a.complete("2")
            await subscribe(a, "3", cid)
            await all_live(client, other, cid, {a: {"1", "3"}, b: {"1"}})
            async with session(server, capped) as e:
                await subscribe(e, "1", cid)
                assert await ended(e, "1") == [over_the_cap("1", 3)]
        assert await metric(client, "convograph_subscription_cap_refusals_total") == 3

        # Sockets that closed gave back all their slots (the server notices a moment later).
        await fits(server, client, capped, other, cid, ops=3)


def over_the_cap(op: str, cap: int) -> dict[str, Any]:
    """The `error` message that refuses operation `op` past a cap of `cap`."""
    error = {"message": CAP_REASON.format(cap), "extensions": {"code": "LIMIT_EXCEEDED"}}
    return {"id": op, "type": "error", "payload": [error]}


async def fits(
    server: LiveServer, client: httpx.AsyncClient, token: str, writer: str, cid: str, ops: int
) -> None:
    """`ops` subscriptions of `token` on one socket are accepted, within a few seconds."""
    deadline = time.perf_counter() + RECEIVE_TIMEOUT
    while True:
        async with session(server, token) as socket:
            for op in range(ops):
                await subscribe(socket, str(op), cid)
            try:
                await all_live(client, writer, cid, {socket: {str(op) for op in range(ops)}})
                return
            except AssertionError as refused:  # an `error` where `all_live` wanted a `next`
                assert "LIMIT_EXCEEDED" in str(refused), refused
                assert time.perf_counter() < deadline, "slots were not given back"
        await asyncio.sleep(0.1)


async def test_every_way_a_subscription_ends_gives_its_slot_back(
    live_servers: LiveServers, database_url: str
) -> None:
    server = await start(live_servers, database_url, **{CAP: "1"})
    token, writer = await server.token(label="capped"), await server.token(label="writer")
    async with http(server) as client:
        cid = await new_conversation(client, writer, "t")
        doomed = await new_conversation(client, writer, "doomed")
        async with session(server, token) as socket:
            # A document that does not validate: an `error` before it runs.
            await subscribe(socket, "invalid", cid, query="subscription { nope }")
            assert [m["type"] for m in await ended(socket, "invalid")] == ["error"]
            # A conversation that does not exist: the resolver fails.
            await subscribe(socket, "missing", str(uuid.uuid4()))
            assert (await ended(socket, "missing"))[-1]["type"] in ("complete", "error")
            # The server completes it: its conversation was deleted.
            await subscribe(socket, "deleted", doomed)
            await all_live(client, writer, doomed, {socket: {"deleted"}})
            await data(client, writer, DELETE, id=doomed)
            assert (await ended(socket, "deleted"))[-1]["type"] == "complete"
            # Each of those gave its slot back: the one slot is free.
            await subscribe(socket, "kept", cid)
            await all_live(client, writer, cid, {socket: {"kept"}})
        assert await metric(client, "convograph_subscription_cap_refusals_total") == 0
        # The socket closed: its slot comes back too.
        await fits(server, client, token, writer, cid, ops=1)


async def test_past_the_operations_one_socket_may_run_that_one_is_refused_with_a_code(
    live_server: LiveServer,
) -> None:
    """Strawberry's own cap of 100 operations per socket refused the 101st with a bare
    "Subscription limit reached", no `extensions.code`: a dashboard following 300 roots
    over one socket could not tell it from a failure."""
    token = await live_server.token()
    async with http(live_server) as client:
        cid = await new_conversation(client, token, "t")
        async with session(live_server, token) as socket:
            ops = {str(n) for n in range(PER_SOCKET)}
            for op in sorted(ops):
                await subscribe(socket, op, cid)
            await subscribe(socket, "over", cid)
            (refused,) = await ended(socket, "over")
            assert refused == {
                "id": "over",
                "type": "error",
                "payload": [
                    {
                        "message": PER_SOCKET_REASON.format(PER_SOCKET),
                        "extensions": {"code": "LIMIT_EXCEEDED"},
                    }
                ],
            }
            await all_live(client, token, cid, {socket: ops})  # the others stream on
            await socket.complete("0")
            await subscribe(socket, "next", cid)  # a place freed is taken at once
            await all_live(client, token, cid, {socket: ops - {"0"} | {"next"}})
        assert await metric(client, "convograph_socket_operation_cap_refusals_total") == 1


# -- settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        (RATE, "-1"),
        (RATE, "fast"),
        (RATE, "inf"),
        (RATE, "nan"),
        (BURST, "0"),
        (BURST, "2.5"),
        (CAP, "-1"),
        (CAP, "many"),
    ],
)
def test_a_bad_limit_setting_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=variable):
        Settings.from_env()


def test_the_burst_defaults_to_twice_the_rate() -> None:
    assert Settings().rate_limit_per_second == 0 and Settings().max_subscriptions_per_token == 0
    assert Settings(rate_limit_per_second=0.01).rate_limit_burst_size == 1
    assert Settings(rate_limit_per_second=2.5).rate_limit_burst_size == 5
    assert Settings(rate_limit_per_second=2.6).rate_limit_burst_size == 6
    assert Settings(rate_limit_per_second=2.5, rate_limit_burst=1).rate_limit_burst_size == 1


async def test_a_client_gone_as_the_cap_refuses_it_is_no_server_error(
    live_servers: LiveServers, database_url: str
) -> None:
    """Refusing the operation of a client that had already hung up (by closing its socket
    with 4429, as the cap did before) raised WebSocketDisconnect out of the app: a
    traceback logged at error level, per refusal."""
    server = await start(live_servers, database_url, **{CAP: "1"})
    capped, other = await server.token(label="capped"), await server.token(label="other")
    async with http(server) as client:
        cid = await new_conversation(client, other, "t")
        async with session(server, capped) as holder:
            await subscribe(holder, "1", cid)
            await all_live(client, other, cid, {holder: {"1"}})
            for _ in range(20):
                async with websockets.connect(
                    server.ws_url,
                    subprotocols=[websockets.Subprotocol("graphql-transport-ws")],
                    additional_headers={"Authorization": f"Bearer {capped}"},
                ) as ws:
                    await ws.send(json.dumps({"type": "connection_init"}))
                    await ws.recv()
                    subscribe_message = {"query": CONVERSATION_EVENTS, "variables": {"id": cid}}
                    await ws.send(
                        json.dumps({"id": "1", "type": "subscribe", "payload": subscribe_message})
                    )
                    ws.transport.abort()  # gone before the server refuses it
        await asyncio.sleep(0.5)
    assert "Exception in ASGI application" not in server.logs(), server.logs()[-3000:]
