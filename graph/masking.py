"""What clients see of unexpected errors: a masked message, never internals.

A database that is unreachable is named as such (clients should retry); any
other unexpected exception becomes "Unexpected error." with the request id,
and the details go only to the log.
"""

from __future__ import annotations

import asyncio
from typing import Any

from graphql import GraphQLError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

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


def masked(error: GraphQLError, request_id: str | None) -> GraphQLError:
    """`error` as a client may see it: itself when expected, else a masked copy."""
    if is_expected(error):
        return error
    unavailable = is_unavailable(error.original_error)
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
