"""SIGTERM against a real server process: a graceful stop.

The server stops listening, lets the requests in flight finish (within
CONVOGRAPH_SHUTDOWN_TIMEOUT_SECONDS), closes open subscriptions with 1001 (going away) and
exits 0; nothing acknowledged is lost, and no write is cut in half.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sqlite3
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import httpx
import pytest
import websockets

from graph.services import BACKGROUND_STOP_SECONDS
from tests.http_clients import http_client
from tests.test_concurrency import APPEND, CREATE, REPLACE, tagged_transcript, turn
from tests.test_crash import Ledger, appender, call, clients, verify_appends
from tests.ws import connect, subscribed

if TYPE_CHECKING:
    from tests.live_server import LiveServer, LiveServers

pytest_plugins = ["tests.live_server"]

APPENDERS = 5
# Generous: the machine may be loaded (a full test run beside this one).
SLACK = 20.0
PROMPTLY = 5.0


async def terminate(server: LiveServer, sig: signal.Signals = signal.SIGTERM) -> float:
    """SIGTERM (or `sig`); the time it was sent (loop time)."""
    assert server.process is not None
    server.process.send_signal(sig)
    return asyncio.get_running_loop().time()


async def exit_status(server: LiveServer, within: float) -> int:
    assert server.process is not None
    try:
        return await asyncio.wait_for(server.process.wait(), within)
    except TimeoutError:
        raise AssertionError(f"still running {within}s after SIGTERM:\n{server.logs()}") from None


async def refused(server: LiveServer) -> bool:
    """A new connection is refused (nobody listens on the port any more)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", server.port), 5)
    except (ConnectionRefusedError, OSError):
        return True
    writer.close()
    with contextlib.suppress(Exception):
        await writer.wait_closed()
    return False


async def until_refused(server: LiveServer, within: float = PROMPTLY * 2) -> None:
    deadline = time.monotonic() + within
    while not await refused(server):
        assert time.monotonic() < deadline, "still accepting connections after SIGTERM"
        await asyncio.sleep(0.02)


async def test_sigterm_under_write_load_loses_nothing_acknowledged(
    live_servers: LiveServers, database_url: str
) -> None:
    timeout = 5.0
    server = await live_servers.start(
        database_url, env={"CONVOGRAPH_SHUTDOWN_TIMEOUT_SECONDS": str(timeout)}
    )
    token = await server.token()
    ledger = Ledger()
    async with server.client(token) as client:
        cids = [
            (await call(client, CREATE, {"title": f"load-{n}"}))["createConversation"][
                "conversation"
            ]["id"]
            for n in range(APPENDERS)
        ]
    async with clients(server, token, APPENDERS) as pool:
        # Each appender writes batches of 1 to 3 numbered messages and records the acked ones.
        tasks = [
            asyncio.create_task(appender(pool[n], cids[n], f"a{n}", ledger))
            for n in range(APPENDERS)
        ]
        for _ in range(400):
            if ledger.acknowledged >= 30:
                break
            await asyncio.sleep(0.05)
        assert ledger.acknowledged >= 30, "the load never got going"
        sent = await terminate(server)
        status = await exit_status(server, timeout + SLACK)
        took = asyncio.get_running_loop().time() - sent
        results = await asyncio.gather(*tasks, return_exceptions=True)
    assert status == 0, server.logs()
    assert took < timeout + SLACK
    for result in results:
        # Each appender stops because the server went away under it, for no other reason
        # (an answer it did get was a whole one: `call` checks each).
        assert isinstance(result, httpx.TransportError), repr(result)
    assert "Traceback" not in server.logs(), server.logs()

    server = await live_servers.restart(server)
    async with server.client(token) as client:
        for cid in cids:
            # Every acknowledged batch at its seq; one in flight whole or not at all.
            await verify_appends(client, cid, ledger)
    print(f"acknowledged appends: {ledger.acknowledged}, lost: 0")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
async def test_an_open_subscription_is_closed_1001_promptly(
    live_servers: LiveServers, database_url: str, sig: signal.Signals
) -> None:
    timeout = 30.0
    server = await live_servers.start(
        database_url, env={"CONVOGRAPH_SHUTDOWN_TIMEOUT_SECONDS": str(timeout)}
    )
    async with server.client(await server.token()) as gql:
        cid = (await gql(CREATE, {"title": "watched"}))["createConversation"]["conversation"]["id"]
        async with subscribed(server, gql, cid) as socket:
            sent = await terminate(server, sig)
            code = await asyncio.wait_for(socket.close_code(), PROMPTLY)
            closed_after = asyncio.get_running_loop().time() - sent
        assert code == 1001
        assert closed_after < PROMPTLY
        # Well before the timeout: an open subscription does not hold the shutdown up.
        assert await exit_status(server, timeout / 2) == 0, server.logs()
    assert "Traceback" not in server.logs(), server.logs()


@contextlib.asynccontextmanager
async def held_replace(
    server: LiveServer, token: str, cid: str, length: int
) -> AsyncIterator[tuple[asyncio.Event, asyncio.Task[httpx.Response]]]:
    """A large replaceTranscript whose body is sent in two halves: it is in flight (the
    server has its headers and half its body) until the event is set."""
    body = httpx.Request(
        "POST",
        server.http_url,
        json={"query": REPLACE, "variables": {"id": cid, "m": big(length), "v": None}},
    ).read()
    release = asyncio.Event()
    started = asyncio.Event()

    async def halves() -> AsyncIterator[bytes]:
        yield body[: len(body) // 2]
        started.set()
        await release.wait()
        yield body[len(body) // 2 :]

    async with http_client(timeout=60) as http:
        task = asyncio.create_task(
            http.post(
                server.http_url,
                content=halves(),
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
        )
        await asyncio.wait_for(started.wait(), 10)
        await asyncio.sleep(0.2)  # the first half reaches the server
        try:
            yield release, task
        finally:
            release.set()
            with contextlib.suppress(Exception):
                await task


def big(length: int) -> list[dict[str, str]]:
    return tagged_transcript([turn("system prompt")], "held", length)


async def test_a_request_in_flight_completes_and_new_connections_are_refused(
    live_servers: LiveServers, database_url: str
) -> None:
    server = await live_servers.start(
        database_url, env={"CONVOGRAPH_SHUTDOWN_TIMEOUT_SECONDS": "30"}
    )
    token = await server.token()
    async with server.client(token) as gql:
        cid = (await gql(CREATE, {"title": "held"}))["createConversation"]["conversation"]["id"]
    length = 900
    async with held_replace(server, token, cid, length) as (release, task):
        await terminate(server)
        # Stopped listening: a new connection, HTTP or WebSocket, is refused ...
        await until_refused(server)
        try:
            async with connect(server, token=token):
                raise AssertionError("a WebSocket connected after SIGTERM")
        except (OSError, websockets.InvalidHandshake):
            pass
        # ... while the request that came before is still being served.
        assert server.running
        release.set()
        response = await asyncio.wait_for(task, 30)
    assert response.status_code == 200, response.text
    payload = response.json()["data"]["replaceTranscript"]
    assert payload["userErrors"] == [], payload
    assert payload["conversation"]["messageCount"] == length + 1
    assert await exit_status(server, SLACK) == 0, server.logs()

    server = await live_servers.restart(server)
    async with server.client(token) as gql:
        stored = await gql(
            "query($id: ID!) { conversation(id: $id) { messageCount transcript } }", {"id": cid}
        )
    assert stored["conversation"]["messageCount"] == length + 1
    assert stored["conversation"]["transcript"] == big(length)


async def test_nothing_new_runs_after_sigterm(live_servers: LiveServers, database_url: str) -> None:
    """A keep-alive connection that was idle at SIGTERM is closed: no request runs on it."""
    server = await live_servers.start(database_url)
    token = await server.token()
    async with server.client(token) as gql:
        cid = (await gql(CREATE, {"title": "idle"}))["createConversation"]["conversation"]["id"]
        async with held_replace(server, token, cid, 10) as (release, task):
            await terminate(server)
            await until_refused(server)
            try:
                response = await gql.post(APPEND, {"id": cid, "m": [turn("late")]})
            except httpx.TransportError:
                pass
            else:
                raise AssertionError(f"a request ran after SIGTERM: {response.text}")
            release.set()
            assert (await asyncio.wait_for(task, 30)).status_code == 200
    assert await exit_status(server, SLACK) == 0, server.logs()
    server = await live_servers.restart(server)
    async with server.client(token) as gql:
        stored = await gql("query($id: ID!) { conversation(id: $id) { transcript } }", {"id": cid})
    assert turn("late") not in stored["conversation"]["transcript"]


async def test_shutdown_does_not_wait_on_a_write_lock_held_elsewhere(
    live_servers: LiveServers, database_url: str
) -> None:
    """Another process (a backup, `sqlite3` in a shell) holds SQLite's write lock at
    SIGTERM: the search index's last batch waits for it no longer than the background work
    gets (BACKGROUND_STOP_SECONDS), not the lock's busy timeout (10 s)."""
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's write lock; PostgreSQL's writers do not wait on one another")
    server = await live_servers.start(
        database_url, env={"CONVOGRAPH_SHUTDOWN_TIMEOUT_SECONDS": "1"}
    )
    token = await server.token()
    async with server.client(token) as gql:
        cid = (await gql(CREATE, {"title": "waiting"}))["createConversation"]["conversation"]["id"]
        await gql(APPEND, {"id": cid, "m": [turn("to index")]})  # leaves a batch waiting
    holder = sqlite3.connect(database_url.split("///", 1)[1], isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # the write lock, held
        sent = await terminate(server)
        assert await exit_status(server, SLACK) == 0, server.logs()
        took = asyncio.get_running_loop().time() - sent
    finally:
        holder.close()
    assert took < 1 + BACKGROUND_STOP_SECONDS + 3, (took, server.logs())
