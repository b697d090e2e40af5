"""Prometheus metrics and the /metrics endpoint.

Each app has its own CollectorRegistry: tests build many apps in one process, and the
default global registry would refuse the second set of metrics with the same names.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from starlette.authentication import AuthenticationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from graph.server.auth import Caller, TokenBackend, refusal
from graph.server.rate_limit import RateLimit
from graph.server.subscription_cap import SubscriptionSlots
from graph.settings import Settings
from graph.store.db import Database
from graph.store.events import EventBroker
from graph.store.quotas import Quotas

# No `*_created` series: they double the output and Prometheus does not need them.
disable_created_metrics()  # type: ignore[no-untyped-call]

# Who may read /metrics (CONVOGRAPH_METRICS).
ACCESS_MODES = ("loopback", "token", "open", "closed")

# Operation names come from clients: past this many distinct ones, new names count as "other"
# so that a client inventing names cannot grow the registry without bound.
MAX_OPERATION_NAMES = 200

# Seconds; GraphQL operations here take from a fraction of a millisecond to a few seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# Paths that are labelled as themselves; anything else is "other" (bounded cardinality).
ROUTES = ("/graphql", "/healthz", "/readyz", "/metrics", "/ui")
# Static files: labelled by their folder, never by file.
ASSET_PREFIXES = ("/graphiql-assets", "/ui/assets")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


M = TypeVar("M", Counter, Histogram)


class Labelled(Generic[M]):
    """A metric's children by label values, each made once: prometheus_client's `labels()`
    converts, checks and locks on every call, and the access log asks for four per request.
    Every label here has a bounded set of values (routes, methods, statuses, outcomes,
    operation names past MAX_OPERATION_NAMES counted as "other")."""

    def __init__(self, metric: M) -> None:
        self.metric: M = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.metric.labels(*values)
        return child


def method_label(method: str) -> str:
    return method if method in METHODS else "OTHER"


def route_label(path: str) -> str:
    if path in ROUTES:
        return path
    for prefix in ASSET_PREFIXES:
        if path.startswith(prefix + "/"):
            return prefix
    return "other"


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
        for name, (in_use, kept) in self.db.pool_stats().items():
            checked_out.add_metric([name], in_use)
            size.add_metric([name], kept)
        yield checked_out
        yield size


class StorageCollector(Collector):
    """Writes refused for want of space (the database's, or a workspace quota's), and on
    SQLite how many writes shared each COMMIT."""

    def __init__(self, db: Database, quotas: Quotas) -> None:
        self.db = db
        self.quotas = quotas

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "convograph_quota_refusals",
            "Writes answered STORAGE_FULL: they would have passed a workspace quota",
            value=self.quotas.refused,
        )
        full_disk = self.db.full_disk
        yield CounterMetricFamily(
            "convograph_storage_full_refusals",
            "Writes answered STORAGE_FULL: the database had no space left",
            value=full_disk.refused,
        )
        yield GaugeMetricFamily(
            "convograph_storage_full",
            "1 while the database refuses writes for want of space (until one succeeds)",
            value=int(full_disk.is_full),
        )
        commits = self.db.group_commits()
        if commits is not None:
            writes, fsyncs = commits
            yield CounterMetricFamily(
                "convograph_sqlite_writes",
                "Write transactions committed (SQLite)",
                value=writes,
            )
            yield CounterMetricFamily(
                "convograph_sqlite_commits",
                "COMMITs that made them durable: concurrent writes share one (group commit)",
                value=fsyncs,
            )


class EventsCollector(Collector):
    """Whether the broker hears events (PostgreSQL's LISTEN connection), read at scrape time."""

    def __init__(self, broker: EventBroker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        down_for = self.broker.listener_down_for()
        if down_for is None:  # SQLite: no connection to lose
            return
        yield GaugeMetricFamily(
            "convograph_event_listener_up",
            "1 while the LISTEN connection that brings every replica's events is up",
            value=int(down_for == 0),
        )
        yield CounterMetricFamily(
            "convograph_event_listener_connections_lost",
            "LISTEN connections lost (ended, or silent past their ping); each is followed by "
            "a catch-up of every live stream from the event log",
            value=self.broker.connections_lost,
        )


class LimitsCollector(Collector):
    """Requests and subscriptions refused by the per-token limits, read at scrape time."""

    def __init__(self, rate_limit: RateLimit, slots: SubscriptionSlots) -> None:
        self.rate_limit = rate_limit
        self.slots = slots

    def collect(self) -> Iterator[Metric]:
        yield CounterMetricFamily(
            "convograph_rate_limit_refusals",
            "Requests refused because their token was over its rate limit (HTTP 429, or a "
            "RATE_LIMITED error for a WebSocket operation)",
            value=self.rate_limit.refused,
        )
        yield CounterMetricFamily(
            "convograph_subscription_cap_refusals",
            "WebSocket operations refused because their token ran as many as its cap "
            "(a LIMIT_EXCEEDED error for the operation)",
            value=self.slots.refused,
        )
        yield CounterMetricFamily(
            "convograph_socket_operation_cap_refusals",
            "WebSocket operations refused because their socket ran as many as one socket may "
            "(100; a LIMIT_EXCEEDED error for the operation)",
            value=self.slots.refused_on_a_socket,
        )


class Metrics:
    """The metrics of one app, and the helpers that record into them."""

    def __init__(self, db: Database, *, collectors: Iterable[Collector] = ()) -> None:
        """`collectors` read counters that other parts keep (StorageCollector, LimitsCollector)."""
        self.registry = CollectorRegistry()
        r = self.registry
        self.operations = Labelled(
            Counter(
                "convograph_graphql_operations",
                "GraphQL operations by name, type and outcome (ok, user_error, error)",
                ["operation", "type", "outcome"],
                registry=r,
            )
        )
        self.operation_seconds = Labelled(
            Histogram(
                "convograph_graphql_operation_duration_seconds",
                "Time to answer a query or mutation (subscriptions are not timed)",
                ["operation", "type"],
                buckets=LATENCY_BUCKETS,
                registry=r,
            )
        )
        self.user_errors = Labelled(
            Counter(
                "convograph_graphql_user_errors",
                "Expected failures returned to clients (userErrors, GraphQL errors), by code",
                ["code"],
                registry=r,
            )
        )
        self.internal_errors = Labelled(
            Counter(
                "convograph_graphql_errors",
                "Unexpected failures (masked for clients, logged), by code",
                ["code"],
                registry=r,
            )
        )
        self.active_subscriptions = Gauge(
            "convograph_graphql_active_subscriptions",
            "Subscriptions currently streaming",
            registry=r,
        )
        self.http_requests = Labelled(
            Counter(
                "convograph_http_requests",
                "HTTP requests by route, method and status",
                ["route", "method", "status"],
                registry=r,
            )
        )
        self.http_seconds = Labelled(
            Histogram(
                "convograph_http_request_duration_seconds",
                "Time to answer an HTTP request, by route",
                ["route"],
                buckets=LATENCY_BUCKETS,
                registry=r,
            )
        )
        self.database_errors = Counter(
            "convograph_db_errors",
            "Errors raised by the database driver, by backend and kind",
            ["backend", "kind"],
            registry=r,
        )
        r.register(PoolCollector(db))
        for collector in collectors:
            r.register(collector)
        ProcessCollector(registry=r)
        self._watch_database_errors(db)
        self._operation_names: set[str] = set()

    def _watch_database_errors(self, db: Database) -> None:
        def on_error(error: BaseException, is_disconnect: bool) -> None:
            kind = "disconnect" if is_disconnect else type(error).__name__
            self.database_errors.labels(db.backend, kind).inc()

        db.on_error(on_error)

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


# The names systems give loopback in /etc/hosts (Debian, Red Hat).
_LOOPBACK_NAMES = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "localhost4",
        "localhost6",
        "ip6-localhost",
        "ip6-loopback",
    }
)


@functools.cache
def _own_names() -> frozenset[str]:
    return frozenset(n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n)


def names_loopback(hostname: str | None) -> bool:
    """Whether a request's Host names this machine: loopback's addresses or names, or the
    machine's own name (a scraper on it may use either). A page of another site whose name
    was made to point to 127.0.0.1 (DNS rebinding) sends that site's name, and would
    otherwise read what loopback may."""
    name = (hostname or "").rstrip(".").lower()
    return name in _LOOPBACK_NAMES or name in _own_names() or is_loopback(name)


def metrics_endpoint(settings: Settings, metrics: Metrics, backend: TokenBackend) -> Any:
    """The /metrics handler, guarded as `settings.metrics` says. The mode decides first: a
    token is looked up only where the mode asks for one, so that an open or loopback scrape
    goes on while the database (which holds the tokens) is away."""
    mode = settings.metrics

    async def refused(request: Request) -> Response | None:
        if mode == "open":
            return None
        if mode == "closed":
            return JSONResponse({"errors": [{"message": "metrics are disabled"}]}, 404)
        client = request.client.host if request.client else None
        if mode == "loopback" and is_loopback(client) and names_loopback(request.url.hostname):
            return None
        try:
            found = await backend.authenticate(request)
        except AuthenticationError as exc:
            return refusal(request, exc)
        user = found[1] if found is not None else None
        if not isinstance(user, Caller):
            return JSONResponse(
                {"errors": [{"message": "metrics need an ADMIN bearer token from this address"}]},
                401,
                headers={"WWW-Authenticate": 'Bearer realm="convograph"'},
            )
        if not user.principal.is_admin:
            return JSONResponse({"errors": [{"message": "metrics need ADMIN scope"}]}, 403)
        return None

    async def endpoint(request: Request) -> Response:
        return await refused(request) or metrics.render(request.headers.get("accept"))

    return endpoint
