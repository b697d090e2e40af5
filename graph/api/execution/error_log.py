"""The schema class: strawberry's, with a faster extension runner (runner.py), logging only
the errors nobody expected.

Strawberry logs every error of a result (`Schema.process_errors`); bad input and other
expected failures are answers, not incidents. Unexpected ones are logged with the request
id that the client sees in its masked error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import strawberry
from graphql import GraphQLError, MiddlewareManager
from strawberry.extensions import SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.schema.schema import DEFAULT_ALLOWED_OPERATION_TYPES
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType

from graph.api.execution import outage_log
from graph.api.execution.masking import is_expected
from graph.api.execution.runner import Runner
from graph.store.errors import is_unavailable

logger = logging.getLogger("convograph.errors")

# Resolvers run unwrapped unless an extension wraps them (SchemaExtension.resolve): with
# none, one empty manager (it keeps no state of a request) serves every operation.
_NO_MIDDLEWARE = MiddlewareManager()
_WRAPS_RESOLVERS: dict[tuple[type[SchemaExtension], ...], bool] = {}


class Schema(strawberry.Schema):
    async def execute(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        # A subscription is served over a WebSocket (Schema.subscribe). Executed once, as
        # Strawberry would over HTTP, its resolver's stream is no value: the client got a
        # masked INTERNAL. Refused instead (InvalidOperationTypeError, said by the endpoint).
        allowed = set(allowed_operation_types or DEFAULT_ALLOWED_OPERATION_TYPES)
        allowed.discard(OperationType.SUBSCRIPTION)
        return await super().execute(
            query,
            variable_values,
            context_value,
            root_value,
            operation_name,
            allowed,
            operation_extensions,
        )

    def create_extensions_runner(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension]
    ) -> SchemaExtensionsRunner:
        # The same extensions, run with their hooks looked up once per class (runner.py).
        return Runner(execution_context, extensions)

    def _get_middleware_manager(self, extensions: list[SchemaExtension]) -> MiddlewareManager:
        # Strawberry builds a manager per operation and asks every extension whether it
        # wraps resolvers; the answer depends on the classes only (private API: checked by
        # tests/unit/test_extension_runner.py).
        classes: tuple[type[SchemaExtension], ...] = tuple(map(type, extensions))
        wraps = _WRAPS_RESOLVERS.get(classes)
        if wraps is None:
            wraps = _WRAPS_RESOLVERS[classes] = any(c._implements_resolve() for c in classes)
        return super()._get_middleware_manager(extensions) if wraps else _NO_MIDDLEWARE

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        context: Any = execution_context.context if execution_context else None
        request_id = getattr(context, "request_id", "-")
        for error in errors:
            if is_expected(error):
                continue
            if is_unavailable(error.original_error):
                outage_log.unavailable(logger, request_id, error.original_error)
            else:
                logger.error(
                    "unexpected error (request %s) at %s",
                    request_id,
                    error.path,
                    exc_info=error.original_error,
                )
