"""/graphql refused with 503 while the database is behind this release's migrations.

A replica started with `--no-migrate` before anyone ran `convograph migrate` is kept out of
rotation by /readyz, but a client that reaches it directly was answered by code meeting
tables and columns that are not there yet: 500 "Unexpected error." (INTERNAL), a traceback
logged per request, and reads from a schema the code does not describe. It is answered
what /readyz says instead, until the migration has run. Once the schema matched (or a later
release migrated it: see migration_state.py), a request costs one attribute check.

GraphiQL's page is let through unasked: it reads nothing, and the queries it then sends
meet the gate and say what is wrong, as they would once the gate has settled. Not with an
Authorization header, though: authentication would look the token up in a table that may
not be there (500 INTERNAL and a traceback), so such a request is gated as any other.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from graph.server.denial import refuse
from graph.server.errors import internal_error
from graph.server.ide import asks_for_page
from graph.server.request_id import request_id_of
from graph.store.errors import is_unavailable
from graph.store.migration_state import BEHIND, MigrationState

NOT_MIGRATED = "database not migrated: run `convograph migrate`"


def not_migrated() -> JSONResponse:
    # Retry-After: the migration is an operator's step of seconds to minutes.
    body = {"errors": [{"message": NOT_MIGRATED, "extensions": {"code": "DATABASE_UNAVAILABLE"}}]}
    return JSONResponse(body, 503, headers={"Retry-After": "5"})


class SchemaGate:
    def __init__(self, app: ASGIApp, migrations: MigrationState, *, graphiql: bool) -> None:
        self.app = app
        self.migrations = migrations
        self.graphiql = graphiql

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Once the schema is known to be this release's (or a later one's), a plain method that
        # hands back the inner app's awaitable: a WebSocket keeps no frame of this layer alive
        # for as long as it is open (see in_flight.py).
        if self.migrations.settled or self._page_unasked(scope):
            return self.app(scope, receive, send)
        return self._gated(scope, receive, send)

    def _page_unasked(self, scope: Scope) -> bool:
        """GraphiQL's page, asked for without a token: nothing behind the gate reads the
        database for it."""
        if not self.graphiql:
            return False
        request = HTTPConnection(scope)
        return asks_for_page(request) and "authorization" not in request.headers

    async def _gated(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            behind = await self.migrations.current() == BEHIND
        except Exception as exc:
            if is_unavailable(exc):
                # Unreachable: answered here with the outage the request would meet, after one
                # wait for the database, not two. Not remembered: the next request asks again,
                # so one that comes once the database is back finds out whether it is behind
                # (a request let through unasked then met missing tables: 500 INTERNAL).
                unavailable = internal_error(exc, request_id_of(scope))
                await refuse(scope, receive, send, unavailable, "database unavailable")
                return
            behind = False  # not the gate's to answer: the request goes on as it would
        if not behind:
            await self.app(scope, receive, send)
            return
        await refuse(scope, receive, send, not_migrated(), "database not migrated")
