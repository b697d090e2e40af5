"""create_app(settings) -> the Starlette application."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from . import retention
from .context import Services
from .crypto import Keyring, load_secret
from .db import Database
from .events import EventBroker
from .health import Health
from .http import GraphQLEndpoint
from .ide import ASSETS_DIR
from .metrics import Metrics, metrics_endpoint
from .notify import PostgresBroker
from .observability import ObservabilityMiddleware
from .request_id import RequestIdMiddleware
from .schema import build_schema
from .search_index import SearchIndex
from .settings import Settings

logger = logging.getLogger("convograph")


def build_services(settings: Settings) -> Services:
    db = Database(settings)
    return Services(
        settings=settings,
        db=db,
        keyring=Keyring(load_secret(settings)),
        broker=broker_for(db),
        search_index=SearchIndex(db),
    )


def broker_for(db: Database) -> EventBroker:
    """In-process on SQLite; on PostgreSQL, NOTIFY that every replica LISTENs to."""
    settings = db.settings
    return EventBroker() if settings.is_sqlite else PostgresBroker(db, settings.asyncpg_dsn)


def create_app(settings: Settings | None = None) -> Starlette:
    """The ASGI app: /graphql (HTTP + WebSocket), /healthz, /readyz, /metrics, GraphiQL's assets."""
    settings = settings or Settings.from_env()
    services = build_services(settings)
    endpoint = GraphQLEndpoint(services, schema=build_schema(settings))
    health = Health(services.db)
    metrics = Metrics(services.db)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await services.broker.start()
        sweeper = asyncio.create_task(retention.sweep_forever(services))
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await services.broker.stop()
            await services.search_index.stop()
            await services.db.dispose()

    app = Starlette(
        routes=[
            Route("/graphql", endpoint, methods=["GET", "POST"]),
            WebSocketRoute("/graphql", endpoint),
            Route("/healthz", health.healthz),
            Route("/readyz", health.readyz),
            Route("/metrics", metrics_endpoint(services, metrics)),
            Mount("/graphiql-assets", StaticFiles(directory=ASSETS_DIR), name="graphiql-assets"),
        ],
        middleware=[
            Middleware(RequestIdMiddleware),
            Middleware(ObservabilityMiddleware, metrics=metrics),
        ],
        lifespan=lifespan,
    )
    app.state.services = services
    return app
