"""What clients see of errors: expected ones with their code, unexpected ones masked.

A DomainError raised by a resolver goes out with its code and field; a database that is
unreachable is named as such (clients should retry); any other unexpected exception
becomes "Unexpected error." with the request id, and the details go only to the log.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLError,
    GraphQLSyntaxError,
    OperationDefinitionNode,
    OperationType,
    located_error,
)
from strawberry.exceptions import MissingQueryError
from strawberry.extensions import SchemaExtension
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError

from graph.domain.errors import DomainError
from graph.store.errors import is_unavailable

UNAVAILABLE = "the database is unavailable; retry shortly"


# What strawberry raises for a request that names no operation it can run (no query, an
# unknown operation name, a type the transport does not serve): the client's mistake.
REQUEST_ERRORS = (MissingQueryError, CannotGetOperationTypeError, InvalidOperationTypeError)
_EXPECTED = (DomainError, GraphQLError, *REQUEST_ERRORS)


def is_expected(error: GraphQLError) -> bool:
    original = error.original_error
    return original is None or isinstance(original, _EXPECTED)


VALIDATION_FAILED = "GRAPHQL_VALIDATION_FAILED"


def request_refusal_code(error: GraphQLError) -> str:
    """The code of a refusal of the request itself, which graphql-core and Strawberry give
    none: its syntax, or its validation (the document against the schema and the limits,
    the variables' values, the operation to run)."""
    if isinstance(error, GraphQLSyntaxError):
        return "GRAPHQL_PARSE_FAILED"
    return VALIDATION_FAILED


def masked(error: GraphQLError, request_id: str | None) -> GraphQLError:
    """`error` as a client may see it: every error with a code."""
    original = error.original_error
    if isinstance(original, DomainError):
        error.extensions = {
            "code": original.code.value,
            "field": original.field,
            **original.extensions,
        }
        return error
    if is_expected(error):
        if not (error.extensions or {}).get("code"):
            # A client tells a request to fix from a failure to retry by the code alone.
            error.extensions = {**(error.extensions or {}), "code": request_refusal_code(error)}
        return error
    unavailable = is_unavailable(original)
    return GraphQLError(
        message=UNAVAILABLE if unavailable else "Unexpected error.",
        nodes=error.nodes,
        source=error.source,
        positions=error.positions,
        path=error.path,
        original_error=None,
        extensions={
            "code": "DATABASE_UNAVAILABLE" if unavailable else "INTERNAL",
            "requestId": request_id,
        },
    )


def mask_result(result: Any, request_id: str | None) -> None:
    """Mask the errors of an operation's result (or of each part of a streamed one)."""
    if result is None:
        return
    parts = [result, getattr(result, "initial_result", None)]
    parts += getattr(result, "incremental", None) or ()
    parts += getattr(result, "completed", None) or ()
    for part in parts:
        errors = getattr(part, "errors", None)
        if errors:
            part.errors = [masked(e, request_id) for e in errors]


def request_id_of(execution_context: Any) -> str | None:
    return getattr(execution_context.context, "request_id", None)


class Masking(SchemaExtension):
    """Masks every result's errors as it leaves the schema (see the module docstring)."""

    def on_operation(self) -> Iterator[None]:
        yield
        # Streamed results (subscriptions) were masked one by one.
        mask_result(self.execution_context.result, request_id_of(self.execution_context))

    def on_stream_result(self, result: Any) -> Iterator[None]:
        execution = self.execution_context
        _locate_stream_errors(result, execution.graphql_document, execution.operation_name)
        mask_result(result, request_id_of(self.execution_context))
        yield


def _locate_stream_errors(
    result: Any, document: DocumentNode | None, operation_name: str | None
) -> None:
    """Place at the subscription's field the errors its stream raised (a conversation not
    found, a cursor refused, a token revoked): graphql-core leaves them without the `path`
    and `locations` a field's error has over HTTP, and a client that routes errors by path
    found nothing there."""
    errors = getattr(result, "errors", None)
    if not errors or document is None or not any(map(_unlocated, errors)):
        return
    field = _subscribed_field(document, operation_name)
    if field is None:
        return
    key = (field.alias or field.name).value
    result.errors = [
        located_error(e.original_error, [field], [key]) if _unlocated(e) else e for e in errors
    ]


def _unlocated(error: GraphQLError) -> bool:
    """An error the stream raised: no path, no place in the document. A request error (a
    variable that does not coerce) has its place, the variable's definition, and stays a
    request error with its own message."""
    return error.path is None and not error.nodes and error.original_error is not None


def _subscribed_field(document: DocumentNode, operation_name: str | None) -> FieldNode | None:
    """The field of the subscription that runs: its operation has exactly one at its root."""
    for definition in document.definitions:
        if (
            isinstance(definition, OperationDefinitionNode)
            and definition.operation is OperationType.SUBSCRIPTION
            and (
                operation_name is None or getattr(definition.name, "value", None) == operation_name
            )
        ):
            for selection in definition.selection_set.selections:
                if isinstance(selection, FieldNode):
                    return selection
    return None
