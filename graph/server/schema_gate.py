"""/graphql refused with 503 while the database is behind this release's migrations.

A replica started with `--no-migrate` before anyone ran `convograph migrate` is kept out of
rotation by /readyz, but a client that reaches it directly was answered by code meeting
tables and columns that are not there yet: 500 "Unexpected error." (INTERNAL), a traceback
logged per request, and reads from a schema the code does not describe. It is answered
what /readyz says instead, until the migration has run. Once the schema matched (or a later
release migrated it: see migration_state.py), a request costs one attribute check.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from graph.store.migration_state import BEHIND, MigrationState

NOT_MIGRATED = "database not migrated: run `convograph migrate`"
# How long a migration check that found the database unreachable stands for the requests after.
RECHECK_SECONDS = 2.0


def not_migrated() -> JSONResponse:
    # Retry-After: the migration is an operator's step of seconds to minutes.
    body = {"errors": [{"message": NOT_MIGRATED, "extensions": {"code": "DATABASE_UNAVAILABLE"}}]}
    return JSONResponse(body, 503, headers={"Retry-After": "5"})


class SchemaGate:
    def __init__(self, app: ASGIApp, migrations: MigrationState) -> None:
        self.app = app
        self.migrations = migrations
        # Until when a check that could not reach the database is not made again.
        self._unreachable_until = 0.0

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Once the schema is known to be this release's (or a later one's), a plain method that
        # hands back the inner app's awaitable: a WebSocket keeps no frame of this layer alive
        # for as long as it is open (see in_flight.py).
        if self.migrations.settled:
            return self.app(scope, receive, send)
        return self._gated(scope, receive, send)

    async def _gated(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await self._behind():
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            ws = WebSocket(scope, receive, send)
            if "websocket.http.response" in scope.get("extensions", {}):
                await ws.send_denial_response(not_migrated())
            else:
                await ws.close(code=1013, reason="database not migrated")
            return
        await not_migrated()(scope, receive, send)

    async def _behind(self) -> bool:
        if time.monotonic() < self._unreachable_until:
            return False
        try:
            return await self.migrations.current() == BEHIND
        except Exception:
            # Unreachable, or no connection to be had: the request meets the outage as any
            # other does (DATABASE_UNAVAILABLE). Not asked again at once: against a database
            # that does not answer, each request would wait out its connection timeout twice.
            self._unreachable_until = time.monotonic() + RECHECK_SECONDS
            return False
