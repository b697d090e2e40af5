"""What each request did, for operators: a log line per request and the request metrics.

`ObservabilityMiddleware` times every HTTP request, records its metrics and writes one
log line for it when it ends (probes at debug level). The `OperationObserver` (called by
the operation hooks in operation_hooks.py) learns what the middleware cannot see: each
GraphQL operation's name, type and outcome (ok, user_error, error) and the codes of its
user errors; it counts the operation and leaves it in the request's `Observation` for the
log line. A WebSocket carries many operations over a long time, so each operation on it
gets its own log line when it ends.

The log line names the principal by workspace and owner type only: never the token, never
the owner key.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLSyntaxError,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    get_operation_ast,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from strawberry.exceptions import MissingQueryError
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types import ExecutionContext

from .masking import is_expected, is_unavailable
from .metrics import Metrics, method_label, route_label
from .principal import Principal

logger = logging.getLogger("convograph.access")

STATE_KEY = "observation"
PROBES = frozenset({"/healthz", "/readyz", "/metrics"})

OK, USER_ERROR, ERROR = "ok", "user_error", "error"
_RANK = {OK: 0, USER_ERROR: 1, ERROR: 2}
# Codes of errors that the server, not the client, is to blame for (see masking.py).
INTERNAL_CODES = frozenset({"INTERNAL", "DATABASE_UNAVAILABLE"})
# What a GraphQL operation name may be (capped); anything else a client sends is "invalid".
OPERATION_NAME = re.compile(r"[_A-Za-z][_0-9A-Za-z]{0,99}")
# Raised out of an operation when the request itself is wrong (no query, a mutation over GET).
REQUEST_ERRORS = (MissingQueryError, CannotGetOperationTypeError, InvalidOperationTypeError)


@dataclass
class OperationRecord:
    name: str | None
    type: str
    outcome: str
    user_errors: list[str]
    duration: float


@dataclass
class Observation:
    """Put in `scope["state"]` by the middleware; the extension adds what the request ran."""

    metrics: Metrics
    request_id: str
    principal: Principal | None = None
    operations: list[OperationRecord] = field(default_factory=list)


def _principal_fields(principal: Principal | None) -> dict[str, Any]:
    if principal is None:
        return {}
    return {"workspace": principal.workspace_key, "owner_type": principal.owner_type.value.lower()}


def printable(text: str) -> str:
    """`text` with control characters escaped: a path must not forge lines in a text log."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


def _worst(outcomes: Iterable[str]) -> str:
    return max(outcomes, key=_RANK.__getitem__, default=OK)


class ObservabilityMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        state = scope.setdefault("state", {})
        observation = Observation(self.metrics, state.get("request_id", "-"))
        state[STATE_KEY] = observation
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def send_and_see(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_see)
        finally:
            self._done(scope, observation, status, time.perf_counter() - started)

    def _done(self, scope: Scope, observation: Observation, status: int, seconds: float) -> None:
        path, method = scope["path"], scope["method"]
        route = route_label(path)
        self.metrics.http_requests.labels(route, method_label(method), str(status)).inc()
        self.metrics.http_seconds.labels(route).observe(seconds)

        if status >= 500:
            outcome, level = ERROR, logging.ERROR
        else:
            ops = observation.operations
            fallback = USER_ERROR if status >= 400 else OK
            outcome = _worst([fallback, *(op.outcome for op in ops)])
            level = logging.ERROR if outcome == ERROR else logging.INFO
            if path in PROBES or route == "/graphiql-assets":
                level = logging.DEBUG
        if not logger.isEnabledFor(level):
            return
        principal = observation.principal or scope["state"].get("principal")
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
            fields["user_errors"] = [c for op in observation.operations for c in op.user_errors]
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


# -- the operation hooks -------------------------------------------------------


def _observation(execution_context: ExecutionContext) -> Observation | None:
    request = getattr(execution_context.context, "request", None)
    scope = getattr(request, "scope", None) or {}
    found = scope.get("state", {}).get(STATE_KEY)
    return found if isinstance(found, Observation) else None


def classify(error: GraphQLError) -> tuple[str, str]:
    """(outcome, code) of one GraphQL error, masked or not."""
    original = error.original_error
    if original is not None and not is_expected(error):
        return ERROR, "DATABASE_UNAVAILABLE" if is_unavailable(original) else "INTERNAL"
    code = (error.extensions or {}).get("code")
    if code in INTERNAL_CODES:
        return ERROR, str(code)
    if isinstance(code, str):
        return USER_ERROR, code
    # No code: graphql-core refused the request itself (syntax, validation, variables).
    if isinstance(error, GraphQLSyntaxError):
        return USER_ERROR, "GRAPHQL_PARSE_FAILED"
    return USER_ERROR, "GRAPHQL_VALIDATION_FAILED"


def _fields(
    selection_set: SelectionSetNode | None, fragments: dict[str, FragmentDefinitionNode]
) -> Iterator[FieldNode]:
    """The fields of a selection set, with its fragments' fields in place."""
    for selection in selection_set.selections if selection_set else ():
        if isinstance(selection, FieldNode):
            yield selection
        elif isinstance(selection, InlineFragmentNode):
            yield from _fields(selection.selection_set, fragments)
        elif isinstance(selection, FragmentSpreadNode) and selection.name.value in fragments:
            yield from _fields(fragments[selection.name.value].selection_set, fragments)


def _key(node: FieldNode) -> str:
    return node.alias.value if node.alias else node.name.value


def payload_error_codes(document: DocumentNode, operation_name: str | None, data: Any) -> list[str]:
    """The codes of the `userErrors` a mutation's payloads carry, as the client selected them.

    A client that does not select `userErrors` cannot see them either; then none are counted.
    """
    operation = get_operation_ast(document, operation_name)
    if not isinstance(data, dict) or not isinstance(operation, OperationDefinitionNode):
        return []
    if operation.operation != OperationType.MUTATION:
        return []
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    codes: list[str] = []
    for root in _fields(operation.selection_set, fragments):
        payload = data.get(_key(root))
        if not isinstance(payload, dict):
            continue
        # A field selected twice (directly and through a fragment) is one field of the result.
        selected = {
            _key(f): f
            for f in _fields(root.selection_set, fragments)
            if f.name.value == "userErrors"
        }
        for key, errors_field in selected.items():
            code_keys = [
                _key(f)
                for f in _fields(errors_field.selection_set, fragments)
                if f.name.value == "code"
            ]
            for item in payload.get(key) or ():
                code = item.get(code_keys[0]) if code_keys and isinstance(item, dict) else None
                codes.append(code if isinstance(code, str) else "UNKNOWN")
    return codes


class OperationObserver:
    """Counts and describes one operation; see the module docstring. The operation hooks
    (graph/operation_hooks.py) call it, before errors are masked."""

    def __init__(self, execution_context: ExecutionContext) -> None:
        self.execution_context = execution_context
        # None when the schema is used outside the app (e.g. a script): nothing to record.
        self.observation = _observation(execution_context)
        self.started = time.perf_counter()
        self._outcomes: list[str] = []
        self._codes: list[str] = []
        self.streamed = False
        self._subscribed = False

    def executing(self) -> None:
        observation = self.observation
        if observation is not None and self._type() == "subscription":
            observation.metrics.active_subscriptions.inc()
            self._subscribed = True

    def stream_result(self, result: Any) -> None:
        # WebSocket operations deliver their results here.
        self.streamed = True
        self._tally(result)

    def end(self, failure: Exception | None) -> None:
        if self.observation is not None:
            self._finish(self.observation, time.perf_counter() - self.started, failure)

    def _type(self) -> str:
        try:
            return self.execution_context.operation_type.value
        except RuntimeError:  # the document did not parse, or names no such operation
            return "unknown"

    def _tally(self, result: Any) -> None:
        for error in getattr(result, "errors", None) or ():
            outcome, code = classify(error)
            self._outcomes.append(outcome)
            self._codes.append(code)
        document = self.execution_context.graphql_document
        if document is not None:
            data = getattr(result, "data", None)
            codes = payload_error_codes(document, self.execution_context.operation_name, data)
            self._outcomes.extend(USER_ERROR for _ in codes)
            self._codes.extend(codes)

    def _finish(self, observation: Observation, seconds: float, failure: Exception | None) -> None:
        context = self.execution_context
        if not self.streamed:
            self._tally(context.result)
        if failure is not None:
            # Raised out of the operation: a syntax error (OperationHooks parses as a stage), a
            # request that is wrong as a whole (a mutation over GET), or a bug.
            if isinstance(failure, GraphQLError):
                outcome, code = classify(failure)
            elif isinstance(failure, REQUEST_ERRORS):
                outcome, code = USER_ERROR, "BAD_REQUEST"
            else:
                outcome, code = ERROR, "INTERNAL"
            self._outcomes.append(outcome)
            self._codes.append(code)
        name = context.operation_name
        if name is not None and not OPERATION_NAME.fullmatch(name):
            name = "invalid"
        record = OperationRecord(
            name=name,
            type=self._type(),
            outcome=_worst(self._outcomes),
            user_errors=[c for c in self._codes if c not in INTERNAL_CODES],
            duration=seconds,
        )
        metrics = observation.metrics
        label = metrics.operation_label(record.name)
        metrics.operations.labels(label, record.type, record.outcome).inc()
        if self._subscribed:
            metrics.active_subscriptions.dec()
        else:
            metrics.operation_seconds.labels(label, record.type).observe(seconds)
        for code in self._codes:
            counter = metrics.internal_errors if code in INTERNAL_CODES else metrics.user_errors
            counter.labels(code).inc()

        principal = getattr(context.context, "principal_", None)
        observation.principal = principal or observation.principal
        request = getattr(context.context, "request", None)
        if getattr(request, "scope", {}).get("type") == "websocket":
            self._log_websocket_operation(observation, record)
        else:
            observation.operations.append(record)

    @staticmethod
    def _log_websocket_operation(observation: Observation, record: OperationRecord) -> None:
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
            observation.request_id,
            extra={
                "request_id": observation.request_id,
                "path": "/graphql",
                "operation": name,
                "operation_type": record.type,
                "outcome": record.outcome,
                "user_errors": record.user_errors,
                "duration_ms": round(record.duration * 1000, 3),
                **_principal_fields(observation.principal),
            },
        )
