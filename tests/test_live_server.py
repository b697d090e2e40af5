"""The live-server harness itself: a test gets the server it started, never another's.

Servers of parallel pytest workers pick free ports on one machine: a port can be taken by
another worker's server between the pick and the bind. The server that lost the race
exits, while its port still answers `/healthz`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx
import pytest

from tests.http_clients import http_client
from tests.ports import free_port, holds_port

if TYPE_CHECKING:
    from tests.live_server import LiveServers

pytest_plugins = ["tests.live_server"]


async def test_a_port_another_server_holds_is_not_taken_for_this_one(
    database_url: str, live_servers: LiveServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = await live_servers.start(database_url)
    picks = iter([other.port, free_port()])
    monkeypatch.setattr("tests.live_server.free_port", lambda: next(picks))

    mine = await live_servers.start(database_url)

    assert mine.port != other.port and mine.running
    await other.stop()
    async with http_client() as http:
        assert (await http.get(f"{mine.base_url}/healthz")).status_code == 200
        # The refused start shared the other's files, and its exit was taken for the other's:
        # the stop did nothing, and the other served on after the test.
        with pytest.raises(httpx.ConnectError):
            await http.get(f"{other.base_url}/healthz")


def test_a_log_says_whether_its_server_holds_the_port() -> None:
    started = "INFO uvicorn.error: Application startup complete.\n"
    running = "INFO uvicorn.error: Uvicorn running on http://127.0.0.1:8123 (Press CTRL+C)\n"
    lost = "ERROR uvicorn.error: [Errno 98] error while attempting to bind on address "
    lost += "('127.0.0.1', 8123): address already in use\n"
    assert holds_port(started, 8123) is None
    assert holds_port(started + running, 8123) is True
    assert holds_port(started + running, 812) is None
    assert holds_port(started + lost, 8123) is False
