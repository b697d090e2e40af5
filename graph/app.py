"""The composition root: the services, the ASGI app, and what runs while it serves."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from graph.api.schema import build_schema
from graph.server.access_log import AccessLog
from graph.server.auth import OWNER_HEADER, TokenBackend, refusal
from graph.server.endpoint import GraphQLEndpoint
from graph.server.errors import http_exception
from graph.server.health import Health
from graph.server.ide import ASSET_HEADERS, ASSETS_DIR
from graph.server.in_flight import InFlightMiddleware
from graph.server.inspector.routes import routes as inspector_routes
from graph.server.metrics import (
    EventsCollector,
    LimitsCollector,
    Metrics,
    StorageCollector,
    metrics_endpoint,
)
from graph.server.request_id import RequestIdMiddleware
from graph.server.schema_gate import SchemaGate
from graph.server.sockets import OpenSockets
from graph.server.static_files import StaticFilesWithHeaders
from graph.services import BACKGROUND_STOP_SECONDS, Services, build_services
from graph.settings import Settings, cors_origins
from graph.store.migration_state import MigrationState
from graph.store.retention import sweep_forever

__all__ = ["build_services", "create_app"]

GRAPHQL_PATH = "/graphql"


def create_app(
    settings: Settings | None = None,
    services: Services | None = None,
    sockets: OpenSockets | None = None,
) -> Starlette:
    """The ASGI app: /graphql (HTTP + WebSocket), /healthz, /readyz, /metrics, GraphiQL's
    assets, and the inspector at /ui. `sockets` are its open WebSockets, for a shutdown to
    close."""
    settings = settings or Settings.from_env()
    services = services or build_services(settings)
    backend = TokenBackend(services.uow)
    endpoint = GraphQLEndpoint(services, backend, sockets, schema=build_schema(settings))
    # One answer for /readyz and for the gate in front of /graphql.
    migrations = MigrationState(services.db)
    health = Health(services.db, services.broker, migrations)
    metrics = Metrics(
        services.db,
        collectors=[
            StorageCollector(services.db, services.uow.quotas),
            LimitsCollector(endpoint.rate_limit, endpoint.subscription_slots),
            EventsCollector(services.broker),
        ],
    )
    authenticated = [
        # Before authentication: looking a token up reads a table that may not be there yet.
        Middleware(SchemaGate, migrations=migrations, graphiql=settings.graphiql),
        Middleware(AuthenticationMiddleware, backend=backend, on_error=refusal),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await services.start()
        stopping = asyncio.Event()
        sweeper = asyncio.create_task(
            sweep_forever(services.uow, settings.sweep_interval_seconds, stopping)
        )
        try:
            yield
        finally:
            # A sweep under way commits whole, or is cancelled (rolled back) if it outlasts
            # what the background work gets at shutdown; the next start sweeps again.
            within = min(settings.shutdown_timeout_seconds, BACKGROUND_STOP_SECONDS)
            stopping.set()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                async with asyncio.timeout(within):
                    await sweeper
            await services.stop(within=within)

    app = Starlette(
        routes=[
            Route(GRAPHQL_PATH, endpoint, methods=["GET", "POST"], middleware=authenticated),
            WebSocketRoute(GRAPHQL_PATH, endpoint, middleware=authenticated),
            Route("/healthz", health.healthz),
            Route("/readyz", health.readyz),
            Route("/metrics", metrics_endpoint(settings, metrics, backend)),
            Mount(
                "/graphiql-assets",
                StaticFilesWithHeaders(directory=ASSETS_DIR, headers=ASSET_HEADERS),
                name="graphiql-assets",
            ),
            *inspector_routes(),
        ],
        middleware=[
            Middleware(InFlightMiddleware, in_flight=services.db.in_flight),
            Middleware(RequestIdMiddleware),
            Middleware(AccessLog, metrics=metrics),
            *cors(settings),
        ],
        exception_handlers={HTTPException: http_exception},
        lifespan=lifespan,
    )
    app.state.services = services
    return app


def cors(settings: Settings) -> list[Middleware]:
    """Starlette's CORS middleware for CONVOGRAPH_CORS_ORIGINS, if any, on /graphql alone: a
    browser page of those origins may call the API with a bearer token (no cookies:
    credentials stay off); /metrics, the health checks and the pages stay the server's own.
    Inside the access log, so that a preflight is logged and has its request id."""
    origins = cors_origins(settings.cors_origins)
    if not origins:
        return []
    return [Middleware(GraphQLOnly, origins=origins)]


class GraphQLOnly:
    """CORSMiddleware for the requests to /graphql; every other path passes by it. (As a
    route's own middleware it would come after the route's method check, which refuses a
    preflight's OPTIONS first.)"""

    def __init__(self, app: ASGIApp, *, origins: list[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", OWNER_HEADER, "X-Request-Id"],
            expose_headers=["Retry-After", "WWW-Authenticate", "X-Request-Id"],
            max_age=600,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == GRAPHQL_PATH:
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
