"""Prometheus metrics and the /metrics endpoint.

Each app has its own CollectorRegistry: tests build many apps in one process, and the
default global registry would refuse the second set of metrics with the same names.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from sqlalchemy import event
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import QueuePool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .auth import principal_for
from .context import Services
from .db import Database

# No `*_created` series: they double the output and Prometheus does not need them.
disable_created_metrics()

# Who may read /metrics (CONVOGRAPH_METRICS).
ACCESS_MODES = ("loopback", "token", "open", "closed")

# Operation names come from clients: past this many distinct ones, new names count as "other"
# so that a client inventing names cannot grow the registry without bound.
MAX_OPERATION_NAMES = 200

# Seconds; GraphQL operations here take from a fraction of a millisecond to a few seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# Paths that are labelled as themselves; anything else is "other" (bounded cardinality).
ROUTES = ("/graphql", "/healthz", "/readyz", "/metrics")
ASSETS_PREFIX = "/graphiql-assets"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str) -> str:
    return method if method in METHODS else "OTHER"


def route_label(path: str) -> str:
    if path in ROUTES:
        return path
    if path.startswith(ASSETS_PREFIX + "/"):
        return ASSETS_PREFIX
    return "other"


def _engines(db: Database) -> list[tuple[str, AsyncEngine]]:
    """The database's pools by name: SQLite has a writer and a reader, PostgreSQL one pool."""
    if db.writer is db.reader:
        return [("shared", db.writer)]
    return [("writer", db.writer), ("reader", db.reader)]


class PoolCollector(Collector):
    """Connection pool use, read from the SQLAlchemy pools at scrape time."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[Metric]:
        checked_out = GaugeMetricFamily(
            "convograph_db_pool_checked_out",
            "Database connections in use, by pool",
            labels=["pool"],
        )
        size = GaugeMetricFamily(
            "convograph_db_pool_size",
            "Connections a pool keeps (PostgreSQL may open as many again as overflow)",
            labels=["pool"],
        )
        for name, engine in _engines(self.db):
            pool = engine.pool
            if isinstance(pool, QueuePool):
                in_use = self.db.writer_in_use() if name == "writer" else None
                checked_out.add_metric([name], pool.checkedout() if in_use is None else in_use)
                size.add_metric([name], pool.size())
        yield checked_out
        yield size


class Metrics:
    """The metrics of one app, and the helpers that record into them."""

    def __init__(self, db: Database) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.operations = Counter(
            "convograph_graphql_operations",
            "GraphQL operations by name, type and outcome (ok, user_error, error)",
            ["operation", "type", "outcome"],
            registry=r,
        )
        self.operation_seconds = Histogram(
            "convograph_graphql_operation_duration_seconds",
            "Time to answer a query or mutation (subscriptions are not timed)",
            ["operation", "type"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.user_errors = Counter(
            "convograph_graphql_user_errors",
            "Expected failures returned to clients (userErrors, GraphQL errors), by code",
            ["code"],
            registry=r,
        )
        self.internal_errors = Counter(
            "convograph_graphql_errors",
            "Unexpected failures (masked for clients, logged), by code",
            ["code"],
            registry=r,
        )
        self.active_subscriptions = Gauge(
            "convograph_graphql_active_subscriptions",
            "Subscriptions currently streaming",
            registry=r,
        )
        self.http_requests = Counter(
            "convograph_http_requests",
            "HTTP requests by route, method and status",
            ["route", "method", "status"],
            registry=r,
        )
        self.http_seconds = Histogram(
            "convograph_http_request_duration_seconds",
            "Time to answer an HTTP request, by route",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.database_errors = Counter(
            "convograph_db_errors",
            "Errors raised by the database driver, by backend and kind",
            ["backend", "kind"],
            registry=r,
        )
        r.register(PoolCollector(db))
        ProcessCollector(registry=r)
        self._watch_database_errors(db)
        self._operation_names: set[str] = set()

    def _watch_database_errors(self, db: Database) -> None:
        backend = "sqlite" if db.is_sqlite else "postgresql"

        def on_error(context: ExceptionContext) -> None:
            if context.is_disconnect:
                kind = "disconnect"
            else:
                wrapped = context.sqlalchemy_exception or context.original_exception
                kind = type(wrapped).__name__
            self.database_errors.labels(backend, kind).inc()

        for _, engine in _engines(db):
            event.listen(engine.sync_engine, "handle_error", on_error)

    def operation_label(self, name: str | None) -> str:
        if not name:
            return "anonymous"
        if name not in self._operation_names:
            if len(self._operation_names) >= MAX_OPERATION_NAMES:
                return "other"
            self._operation_names.add(name)
        return name

    def render(self, accept: str | None) -> Response:
        encode, content_type = choose_encoder(accept or "")
        return Response(encode(self.registry), headers={"Content-Type": content_type})


def is_loopback(host: str | None) -> bool:
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def metrics_endpoint(services: Services, metrics: Metrics) -> Any:
    """The /metrics handler, guarded as `settings.metrics` says."""
    mode = services.settings.metrics.strip().lower()
    if mode not in ACCESS_MODES:
        raise ValueError(f"CONVOGRAPH_METRICS must be one of {', '.join(ACCESS_MODES)}: {mode!r}")

    async def refusal(request: Request) -> Response | None:
        if mode == "open":
            return None
        if mode == "closed":
            return JSONResponse({"errors": [{"message": "metrics are disabled"}]}, 404)
        client = request.client.host if request.client else None
        if mode == "loopback" and is_loopback(client):
            return None
        principal = await principal_for(services, request.headers.get("authorization"))
        if principal is None:
            return JSONResponse(
                {"errors": [{"message": "metrics need an ADMIN bearer token from this address"}]},
                401,
                headers={"WWW-Authenticate": 'Bearer realm="convograph"'},
            )
        if not principal.is_admin:
            return JSONResponse({"errors": [{"message": "metrics need ADMIN scope"}]}, 403)
        return None

    async def endpoint(request: Request) -> Response:
        return await refusal(request) or metrics.render(request.headers.get("accept"))

    return endpoint
