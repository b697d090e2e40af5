"""Counts the HTTP requests being answered, for the SQLite writer's group commit.

A write leaves its transaction open for others to join only while other requests are under
way (store/db.py, SQLiteWriter); one client's requests one after another then commit at once.
A request counts from its first turn of the event loop, and then gives the loop back once:
requests that arrived together (their tasks made in one turn) all count before any of them
goes on. Without that turn the first would run through to its COMMIT before the others
started whenever nothing on its way suspends (a SQLite read does not), and no write would
ever find another under way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from starlette.types import ASGIApp, Receive, Scope, Send

from graph.store.db import InFlight


class InFlightMiddleware:
    def __init__(self, app: ASGIApp, *, in_flight: InFlight) -> None:
        self.app = app
        self.in_flight = in_flight

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # A plain method that hands back the inner app's awaitable for what it does not count:
        # a WebSocket then keeps no frame of this layer alive for as long as it is open (one
        # per subscriber; access_log.py and request_id.py do the same).
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        return self._counted(scope, receive, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.in_flight.requests += 1
        try:
            await asyncio.sleep(0)
            await self.app(scope, receive, send)
        finally:
            self.in_flight.requests -= 1
