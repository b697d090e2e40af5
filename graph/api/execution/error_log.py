"""The schema class: strawberry's, with a faster extension runner (runner.py), logging only
the errors nobody expected.

Strawberry logs every error of a result (`Schema.process_errors`); bad input and other
expected failures are answers, not incidents. Unexpected ones are logged with the request
id that the client sees in its masked error.
"""

from __future__ import annotations

import logging
from typing import Any

import strawberry
from graphql import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import ExecutionContext

from graph.api.execution.masking import is_expected
from graph.api.execution.runner import Runner

logger = logging.getLogger("convograph.errors")


class Schema(strawberry.Schema):
    def create_extensions_runner(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension]
    ) -> SchemaExtensionsRunner:
        # The same extensions, run with their hooks looked up once per class (runner.py).
        return Runner(execution_context, extensions)

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        context: Any = execution_context.context if execution_context else None
        request_id = getattr(context, "request_id", "-")
        for error in errors:
            if not is_expected(error):
                logger.error(
                    "unexpected error (request %s) at %s",
                    request_id,
                    error.path,
                    exc_info=error.original_error,
                )
