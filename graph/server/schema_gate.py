"""/graphql refused with 503 while the database is behind this release's migrations.

A replica started with `--no-migrate` before anyone ran `convograph migrate` is kept out of
rotation by /readyz, but a client that reaches it directly was answered by code meeting
tables and columns that are not there yet: 500 "Unexpected error." (INTERNAL), a traceback
logged per request, and reads from a schema the code does not describe. It is answered
what /readyz says instead, until the migration has run. Once the schema matched (or a later
release migrated it: see migration_state.py), a request costs one attribute check.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from graph.store.migration_state import BEHIND, MigrationState

NOT_MIGRATED = "database not migrated: run `convograph migrate`"


def not_migrated() -> JSONResponse:
    # Retry-After: the migration is an operator's step of seconds to minutes.
    body = {"errors": [{"message": NOT_MIGRATED, "extensions": {"code": "DATABASE_UNAVAILABLE"}}]}
    return JSONResponse(body, 503, headers={"Retry-After": "5"})


class SchemaGate:
    def __init__(self, app: ASGIApp, migrations: MigrationState) -> None:
        self.app = app
        self.migrations = migrations

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.migrations.settled or not await self._behind():
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
        try:
            return await self.migrations.current() == BEHIND
        except Exception:
            # Unreachable, or no connection to be had: the request meets the outage as any
            # other does (DATABASE_UNAVAILABLE), and asks again next time.
            return False
