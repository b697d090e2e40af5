"""What clients see of unexpected errors: a masked message, never internals.

A database that is unreachable is named as such (clients should retry); any
other unexpected exception becomes "Unexpected error." with the request id,
and the details go only to the log.
"""

from __future__ import annotations

import asyncio

from graphql import GraphQLError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from strawberry.extensions import MaskErrors

from .errors import DomainError

UNAVAILABLE = "the database is unavailable; retry shortly"


def is_expected(error: GraphQLError) -> bool:
    original = error.original_error
    return original is None or isinstance(original, (DomainError, GraphQLError))


def is_unavailable(exc: BaseException | None) -> bool:
    """Connection loss, refusal or pool exhaustion: the database, not the request, is at fault."""
    if isinstance(exc, PoolTimeout | ConnectionError | asyncio.TimeoutError):
        return True
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        return isinstance(exc.orig, ConnectionError | OSError) or "connect" in str(exc.orig).lower()
    return isinstance(exc, OSError)


class ErrorMasking(MaskErrors):
    def __init__(self) -> None:
        super().__init__(should_mask_error=lambda e: not is_expected(e))

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        unavailable = is_unavailable(error.original_error)
        context = getattr(self.execution_context, "context", None)
        return GraphQLError(
            message=UNAVAILABLE if unavailable else "Unexpected error.",
            nodes=error.nodes,
            source=error.source,
            positions=error.positions,
            path=error.path,
            original_error=None,
            extensions={
                "code": "DATABASE_UNAVAILABLE" if unavailable else "INTERNAL",
                "requestId": getattr(context, "request_id", None),
            },
        )
