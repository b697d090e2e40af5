"""Counts the HTTP requests being answered, for the SQLite writer's group commit.

A write leaves its transaction open for others to join only while other requests are under
way (store/db.py, SQLiteWriter); one client's requests one after another then commit at once.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from graph.store.db import InFlight


class InFlightMiddleware:
    def __init__(self, app: ASGIApp, *, in_flight: InFlight) -> None:
        self.app = app
        self.in_flight = in_flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.in_flight.requests += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight.requests -= 1
