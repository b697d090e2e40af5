"""What each request did, for operators: a log line per request and the request metrics.

`AccessLog` times every HTTP request, records its metrics and writes one log line for it
when it ends (probes at debug level). What it cannot see inside GraphQL (each operation's
name, type, outcome and error codes) the schema's Observer extension hands to the
request's `Observation`, which counts the operation and keeps it for the log line. A
WebSocket carries many operations over a long time, so each operation on it gets its own
log line when it ends.

The log line names the principal by workspace and owner type only (and, for a SERVICE token
acting for an owner, the service token's id): never the token, never the owner key.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graph.api.context import OperationRecord
from graph.api.execution.observer import ERROR, INTERNAL_CODES, OK, USER_ERROR, worst
from graph.domain.principal import Principal
from graph.server.metrics import ASSET_PREFIXES, Metrics, method_label, route_label
from graph.server.request_id import request_id_of

logger = logging.getLogger("convograph.access")

STATE_KEY = "observation"
# nginx's status for a request whose client closed the connection before it was answered:
# no response went out, and the metrics count it apart from the server's own 5xx.
CLIENT_CLOSED_REQUEST = 499
CLIENT_CLOSED = "client_closed"
PROBES = frozenset({"/healthz", "/readyz", "/metrics"})


@dataclass
class Observation:
    """Put in `scope["state"]` by AccessLog; the schema's Observer tells it each operation
    (it is the context's OperationLog)."""

    metrics: Metrics
    request_id: str
    websocket: bool = False
    principal: Principal | None = None
    operations: list[OperationRecord] = field(default_factory=list)
    # Set by the endpoint when the client closed its connection before its body was whole.
    client_gone: bool = False

    def subscription_started(self) -> None:
        self.metrics.active_subscriptions.inc()

    def operation_finished(self, record: OperationRecord, *, subscription: bool) -> None:
        metrics = self.metrics
        label = metrics.operation_label(record.name)
        metrics.operations(label, record.type, record.outcome).inc()
        if subscription:
            metrics.active_subscriptions.dec()
        else:
            metrics.operation_seconds(label, record.type).observe(record.duration)
        for code in record.codes:
            counter = metrics.internal_errors if code in INTERNAL_CODES else metrics.user_errors
            counter(code).inc()
        self.principal = record.principal or self.principal
        if self.websocket:
            self._log_websocket_operation(record)
        else:
            self.operations.append(record)

    def _log_websocket_operation(self, record: OperationRecord) -> None:
        level = logging.ERROR if record.outcome == ERROR else logging.INFO
        if not logger.isEnabledFor(level):
            return
        name = record.name or "anonymous"
        logger.log(
            level,
            "WebSocket %s %s %s after %.1f ms (request %s)",
            record.type,
            name,
            record.outcome,
            record.duration * 1000,
            self.request_id,
            extra={
                "request_id": self.request_id,
                "path": "/graphql",
                "operation": name,
                "operation_type": record.type,
                "outcome": record.outcome,
                "user_errors": _user_errors(record),
                "duration_ms": round(record.duration * 1000, 3),
                **_principal_fields(self.principal),
            },
        )


def _user_errors(record: OperationRecord) -> list[str]:
    return [c for c in record.codes if c not in INTERNAL_CODES]


def observation_of(scope: Scope) -> Observation | None:
    found = scope.get("state", {}).get(STATE_KEY)
    return found if isinstance(found, Observation) else None


def _principal_fields(principal: Principal | None) -> dict[str, Any]:
    """Who asked, without any secret: the workspace, the owner's type and, when a SERVICE
    token acts for an owner, the service token's id (never an owner key)."""
    if principal is None:
        return {}
    fields = {
        "workspace": principal.workspace_key,
        "owner_type": principal.owner_type.value.lower(),
    }
    if principal.acting_service is not None:
        fields["service_token"] = principal.token_id
    return fields


def printable(text: str) -> str:
    """`text` with control characters escaped: a path must not forge lines in a text log."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


class AccessLog:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        # Not a coroutine: a WebSocket keeps no frame of it alive (see in_flight.py).
        if scope["type"] not in ("http", "websocket"):
            return self.app(scope, receive, send)
        state = scope.setdefault("state", {})
        observation = Observation(
            self.metrics, request_id_of(scope), websocket=scope["type"] == "websocket"
        )
        state[STATE_KEY] = observation
        if scope["type"] == "websocket":
            return self.app(scope, receive, send)
        return self._logged(scope, receive, send, observation)

    async def _logged(
        self, scope: Scope, receive: Receive, send: Send, observation: Observation
    ) -> None:
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def send_and_see(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_see)
            if observation.client_gone:
                # The client hung up before its request was whole (the endpoint, reading the
                # body, said so) and nobody was answered: not the server's fault.
                status = CLIENT_CLOSED_REQUEST
        finally:
            self._done(scope, observation, status, time.perf_counter() - started)

    def _done(self, scope: Scope, observation: Observation, status: int, seconds: float) -> None:
        path, method = scope["path"], scope["method"]
        route = route_label(path)
        self.metrics.http_requests(route, method_label(method), str(status)).inc()
        self.metrics.http_seconds(route).observe(seconds)

        if status == CLIENT_CLOSED_REQUEST:
            # A client that goes away is routine (a tab closed, a timeout of its own): a line
            # to follow its request by, neither an error nor a warning.
            outcome, level = CLIENT_CLOSED, logging.INFO
        elif status >= 500:
            outcome, level = ERROR, logging.ERROR
        else:
            ops = observation.operations
            fallback = USER_ERROR if status >= 400 else OK
            outcome = worst([fallback, *(op.outcome for op in ops)])
            level = logging.ERROR if outcome == ERROR else logging.INFO
        # Probes and assets at debug, a probe's 503 too: it is how /readyz says "not ready"
        # (the outage is logged where it happens), every few seconds while it lasts.
        if (path in PROBES and status != 500) or route in ASSET_PREFIXES:
            level = logging.DEBUG
        if not logger.isEnabledFor(level):
            return
        user = scope.get("user")
        principal = observation.principal or getattr(user, "principal", None)
        fields: dict[str, Any] = {
            "request_id": observation.request_id,
            "method": printable(method),
            "path": printable(path),
            "status": status,
            "outcome": outcome,
            "duration_ms": round(seconds * 1000, 3),
            **_principal_fields(principal),
        }
        described = ""
        if observation.operations:
            names = [op.name or "anonymous" for op in observation.operations]
            fields["operation"] = ",".join(names)
            fields["operation_type"] = ",".join(op.type for op in observation.operations)
            fields["user_errors"] = [c for op in observation.operations for c in _user_errors(op)]
            described = f" {fields['operation_type']} {fields['operation']}"
        logger.log(
            level,
            "%s %s %s%s %s in %.1f ms (request %s)",
            fields["method"],
            fields["path"],
            status,
            described,
            outcome,
            seconds * 1000,
            observation.request_id,
            extra=fields,
        )
