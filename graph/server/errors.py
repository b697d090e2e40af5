"""The JSON error responses of requests refused before GraphQL runs (401, 413, …)."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from graph.api.execution import outage_log
from graph.api.execution.masking import UNAVAILABLE
from graph.domain.errors import ErrorCode
from graph.server.response_status import UNAVAILABLE_RETRY_AFTER
from graph.store.errors import is_unavailable

logger = logging.getLogger("convograph.http")


# The code of each refusal before GraphQL runs, by its status: a client that switches on
# `extensions.code` finds one on every error, as on GraphQL's own (masking.py). Where a
# field's error has the same meaning, the same code (domain.errors.ErrorCode).
STATUS_CODES = {
    400: "BAD_REQUEST",
    401: "UNAUTHENTICATED",
    403: ErrorCode.FORBIDDEN.value,
    404: ErrorCode.NOT_FOUND.value,
    405: "METHOD_NOT_ALLOWED",
    406: "NOT_ACCEPTABLE",
    408: "REQUEST_TIMEOUT",
    413: ErrorCode.LIMIT_EXCEEDED.value,
    415: "UNSUPPORTED_MEDIA_TYPE",
}


def error_response(
    status: int, message: str, *, code: str | None = None, **headers: str
) -> JSONResponse:
    """A refusal before GraphQL runs: `{"errors": [{"message", "extensions": {"code"}}]}`,
    the code its status's unless given."""
    code = code or STATUS_CODES.get(status, "BAD_REQUEST")
    error = {"message": message, "extensions": {"code": code}}
    return JSONResponse({"errors": [error]}, status_code=status, headers=headers)


async def http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (a path it has no route for, a method a route does not
    serve) as JSON, like every other refusal, instead of its plain text."""
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if "Allow" in headers:  # Starlette lists a route's methods in a set's order
        headers["Allow"] = ", ".join(sorted(headers["Allow"].split(", ")))
    return error_response(exc.status_code, exc.detail, **headers)


def internal_error(exc: BaseException, request_id: str) -> JSONResponse:
    """A failure outside the resolvers, masked as the schema masks errors inside them."""
    unavailable = is_unavailable(exc)
    if unavailable:
        outage_log.unavailable(logger, request_id, exc)
    else:
        logger.error("request %s failed before execution", request_id, exc_info=exc)
    error = {
        "message": UNAVAILABLE if unavailable else "Unexpected error.",
        "extensions": {
            "code": "DATABASE_UNAVAILABLE" if unavailable else "INTERNAL",
            "requestId": request_id,
        },
    }
    if unavailable:
        headers = {"Retry-After": UNAVAILABLE_RETRY_AFTER}
        return JSONResponse({"errors": [error]}, status_code=503, headers=headers)
    return JSONResponse({"errors": [error]}, status_code=500)
